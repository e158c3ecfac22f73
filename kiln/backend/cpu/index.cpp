// Indexing kernels: index_select, gather, embedding, scatter_add.
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/loops.h"

namespace kiln::cpu {

namespace {

// Index values as a dense i64 array, each checked against `size`. Negative indices are
// out of bounds, as in PyTorch's index_select, gather and embedding.
Tensor checked_index(const char* op, const Tensor& index, int64_t size, int64_t dim) {
  Tensor idx = contiguous(cast(index, DType::i64));
  const int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    KILN_CHECK(p[i] >= 0 && p[i] < size, index,
               "[{}] index {} is out of bounds for dimension {} with size {}", op, p[i], dim, size);
  return idx;
}

// out = self rows picked along `dim` by `idx` (a dense i64 list).
void select_rows(const Tensor& self, int64_t dim, const Tensor& idx, const Tensor& out) {
  const int64_t* p = idx.data<int64_t>();
  int64_t size = self.dim() ? self.shape()[dim] : 1;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t j = p[i] < 0 ? p[i] + size : p[i];
    if (self.dim() == 0) {
      copy_into(out, self);
      continue;
    }
    Dims s_shape = self.shape(), o_shape = out.shape();
    s_shape.erase(dim);
    o_shape.erase(dim);
    Dims s_str = self.strides(), o_str = out.strides();
    s_str.erase(dim);
    o_str.erase(dim);
    copy_into(make_view(out, o_shape, o_str, out.offset() + i * out.strides()[dim]),
              make_view(self, s_shape, s_str, self.offset() + j * self.strides()[dim]));
  }
}

}  // namespace

void k_index_select(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  int64_t dim = wrap_dim(c.args.i64(1), self.dim(), "index_select");
  int64_t size = self.dim() ? self.shape()[dim] : 1;
  select_rows(self, dim, checked_index("index_select", c.args.tensor(2), size, dim), outs[0]);
}

void k_embedding(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& weight = c.args.tensor(0);
  const Tensor& out = outs[0];
  Tensor idx = checked_index("embedding", c.args.tensor(1), weight.shape()[0], 0);
  int64_t n = idx.numel(), d = weight.shape()[1];
  Tensor out2 = make_view(out, Dims{n, d}, Dims{d, 1}, out.offset());
  select_rows(weight, 0, idx, out2);
}

void k_gather(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& out = outs[0];
  int64_t dim = wrap_dim(c.args.i64(1), self.dim(), "gather");
  int64_t size = self.dim() ? self.shape()[dim] : 1;
  Tensor idx = checked_index("gather", c.args.tensor(2), size, dim);
  if (out.numel() == 0) return;
  int64_t rank = out.dim();
  KILN_DISPATCH_ALL(self.dtype(), "gather", {
    const T* src = static_cast<const T*>(self.storage()->data);
    T* dst = out.data<T>();
    const int64_t* ip = idx.data<int64_t>();
    Dims pos(rank, 0);
    for (int64_t lin = 0; lin < out.numel(); ++lin) {
      int64_t so = self.offset();
      for (int64_t d = 0; d < rank; ++d) {
        int64_t coord = d == dim ? (ip[lin] < 0 ? ip[lin] + size : ip[lin]) : pos[d];
        so += coord * self.strides()[d];
      }
      dst[lin] = src[so];
      for (int64_t d = rank; d-- > 0;) {
        if (++pos[d] < out.shape()[d]) break;
        pos[d] = 0;
      }
    }
  });
}

void k_scatter_add(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& src = c.args.tensor(3);
  const Tensor& out = outs[0];
  copy_into(out, self);
  int64_t dim = wrap_dim(c.args.i64(1), self.dim(), "scatter_add");
  int64_t size = self.dim() ? self.shape()[dim] : 1;
  Tensor idx = checked_index("scatter_add", c.args.tensor(2), size, dim);
  if (idx.numel() == 0) return;
  int64_t rank = idx.dim();
  KILN_DISPATCH_ALL(self.dtype(), "scatter_add", {
    T* dst = static_cast<T*>(out.storage()->data);
    const T* from = static_cast<const T*>(src.storage()->data);
    const int64_t* ip = idx.data<int64_t>();
    Dims pos(rank, 0);
    for (int64_t lin = 0; lin < idx.numel(); ++lin) {  // odometer over the index
      int64_t to = out.offset(), so = src.offset();
      for (int64_t d = 0; d < rank; ++d) {
        to += (d == dim ? ip[lin] : pos[d]) * out.strides()[d];
        so += pos[d] * src.strides()[d];
      }
      if constexpr (std::is_same_v<T, bool>)
        dst[to] = dst[to] || from[so];
      else
        dst[to] = static_cast<T>(dst[to] + from[so]);
      for (int64_t d = rank; d-- > 0;) {
        if (++pos[d] < idx.shape()[d]) break;
        pos[d] = 0;
      }
    }
  });
}

}  // namespace kiln::cpu

namespace kiln::cpu {

// The coordinates of the non-zero elements in row-major order, one row each (meta_nonzero
// counted them: the output has exactly that many rows).
void k_nonzero(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& x = c.args.tensor(0);
  const Tensor& out = outs[0];
  int64_t rank = x.dim(), row = 0;
  std::vector<int64_t> at(static_cast<size_t>(rank), 0);
  auto* o = out.data<int64_t>();
  KILN_DISPATCH_ALL(x.dtype(), "nonzero", {
    const T* p = static_cast<const T*>(x.storage()->data);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t off = x.offset();
      for (int64_t d = 0; d < rank; ++d) off += at[static_cast<size_t>(d)] * x.stride(d);
      if (static_cast<double>(p[off]) != 0.0) {
        for (int64_t d = 0; d < rank; ++d)
          o[row * out.stride(0) + d * out.stride(1)] = at[static_cast<size_t>(d)];
        ++row;
      }
      for (int64_t d = rank - 1; d >= 0; --d) {  // the next row-major coordinate
        if (++at[static_cast<size_t>(d)] < x.size(d)) break;
        at[static_cast<size_t>(d)] = 0;
      }
    }
  });
  KILN_CHECK(row == out.size(0), internal, "[nonzero] counted {} rows, found {}", out.size(0), row);
}

}  // namespace kiln::cpu
