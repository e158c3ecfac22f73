// Indexing on CUDA devices: index_select, gather, embedding, scatter_add.
//
// Index tensors may live on the CPU (D2): they are checked on the host and copied
// over. An out-of-range index in a CUDA index tensor cannot be reported without
// waiting for the GPU: the kernel records it and skips the access, and the next host
// wait on the device throws it (Note [Index errors found by kernels] in
// kiln/device/cuda_runtime.h), where PyTorch's device assert would end the context.
#include "kiln/backend/cuda/common.cuh"

namespace kiln::cuda {

namespace {

// The index as a dense int64 tensor on `device`: a CPU index is bounds-checked on the
// host, then copied to the device.
Tensor device_index(const Tensor& index, int64_t bound, Device device, const char* op) {
  if (!index.device().is_cpu()) return dense(index, DType::i64, device);
  std::vector<int64_t> host(static_cast<size_t>(index.numel()));
  Dims pos(index.dim(), 0);
  for (size_t n = 0; n < host.size(); ++n) {  // odometer over the index's elements
    int64_t off = index.offset();
    for (int64_t d = 0; d < index.dim(); ++d) off += pos[d] * index.strides()[d];
    Tensor one = make_view(index, Dims{}, Dims{}, off);
    int64_t v = host_scalar<int64_t>(one);
    KILN_CHECK(v >= 0 && v < bound, index, "[{}] index {} is out of range for size {}", op, v,
               bound);
    host[n] = v < 0 ? v + bound : v;
    for (int64_t d = index.dim(); d-- > 0;) {
      if (++pos[d] < index.shape()[d]) break;
      pos[d] = 0;
    }
  }
  Tensor out = empty(index.shape(), DType::i64, device);
  if (!host.empty())
    device_backend(DeviceType::cuda)
        ->copy_bytes(static_cast<int64_t*>(out.storage()->data), device, host.data(),
                     Device(DeviceType::cpu, 0), host.size() * sizeof(int64_t), false);
  return out;
}

// Where a kernel's index reads are checked: the device's error block and the op's name.
struct IndexCheck {
  KernelError* error;
  const char* op;
  int64_t bound;

  IndexCheck(int64_t bound, Device device, const char* op)
      : error(kernel_error_block(device.index)), op(op), bound(bound) {}

  /** `v` when it indexes [0, bound); else records the first such index of the device
   * and gives -1 (the caller skips the access). */
  __device__ int64_t operator()(int64_t v) const {
    if (v >= 0 && v < bound) return v;
    if (atomicCAS(&error->code, 0, 1) == 0) {
      error->op = op;
      error->value = v;
      error->bound = bound;
    }
    return -1;
  }
};

// out[..., i, ...] = self[..., index[i], ...] along `dim`: operand 2 of the walk has
// unit stride on `dim` only, so its offset is the coordinate along `dim`.
void select_along(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index,
                  const char* op) {
  if (out.numel() == 0) return;
  Dims self_st = self.strides();
  int64_t step = self.dim() ? self_st[dim] : 0;
  IndexCheck checked(self.dim() ? self.shape()[dim] : 1, out.device(), op);
  if (self.dim()) self_st[dim] = 0;
  Dims coord(out.dim(), 0);
  if (out.dim()) coord[dim] = 1;
  auto g = make_geometry<3>(out.shape(), {out.strides(), self_st, coord},
                            {out.offset(), self.offset(), 0});
  const int64_t* idx = static_cast<const int64_t*>(index.storage()->data) + index.offset();
  switch (itemsize(out.dtype())) {
#define KILN_SELECT(W)                                                         \
  {                                                                            \
    W* o = out_ptr<W>(out);                                                    \
    const W* s = static_cast<const W*>(self.storage()->data);                  \
    launch_elementwise<3>(out.numel(), g, [=] __device__(const int64_t* off) { \
      int64_t j = checked(idx[off[2]]);                                        \
      o[off[0]] = j < 0 ? W(0) : s[off[1] + j * step];                         \
    });                                                                        \
    return;                                                                    \
  }
    case 1: KILN_SELECT(uint8_t)
    case 2: KILN_SELECT(uint16_t)
    case 4: KILN_SELECT(uint32_t)
    case 8: KILN_SELECT(uint64_t)
#undef KILN_SELECT
  }
}

}  // namespace

void k_index_select(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  int64_t dim = wrap(c.args.i64(1), self.dim());
  int64_t bound = self.dim() ? self.shape()[dim] : 1;
  Tensor index = device_index(c.args.tensor(2), bound, c.device, "index_select");
  select_along(outs[0], self, dim, index, "index_select");
}

void k_embedding(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& weight = c.args.tensor(0);
  Tensor index = device_index(c.args.tensor(1), weight.shape()[0], c.device, "embedding");
  const Tensor& out = outs[0];
  int64_t n = index.numel(), d = weight.shape()[1];
  select_along(make_view(out, Dims{n, d}, Dims{d, 1}, out.offset()), weight, 0,
               make_view(index, Dims{n}, Dims{1}, index.offset()), "embedding");
}

void k_gather(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  int64_t dim = wrap(c.args.i64(1), self.dim());
  int64_t bound = self.dim() ? self.shape()[dim] : 1;
  Tensor index = device_index(c.args.tensor(2), bound, c.device, "gather");
  Dims self_st = self.strides();
  int64_t step = self.dim() ? self_st[dim] : 0;
  if (self.dim()) self_st[dim] = 0;
  auto g = make_geometry<3>(out.shape(), {out.strides(), self_st, index.strides()},
                            {out.offset(), self.offset(), index.offset()});
  const int64_t* idx = static_cast<const int64_t*>(index.storage()->data);
  IndexCheck checked(bound, c.device, "gather");
  KILN_CUDA_DISPATCH_ALL(out.dtype(), "gather", {
    T* o = out_ptr<T>(out);
    const T* s = static_cast<const T*>(self.storage()->data);
    launch_elementwise<3>(out.numel(), g, [=] __device__(const int64_t* off) {
      int64_t j = checked(idx[off[2]]);
      o[off[0]] = j < 0 ? store<T>(0) : s[off[1] + j * step];
    });
  });
}

void k_scatter_add(const OpCall& c, std::span<Tensor> outs) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& src = c.args.tensor(3);
  const Tensor& out = outs[0];
  copy_into(out, self);
  int64_t dim = wrap(c.args.i64(1), self.dim());
  int64_t bound = self.dim() ? self.shape()[dim] : 1;
  Tensor index = device_index(c.args.tensor(2), bound, c.device, "scatter_add");
  if (index.numel() == 0) return;
  Dims out_st = out.strides();
  int64_t step = out.dim() ? out_st[dim] : 0;
  if (out.dim()) out_st[dim] = 0;
  auto g = make_geometry<3>(index.shape(), {out_st, src.strides(), index.strides()},
                            {out.offset(), src.offset(), index.offset()});
  const int64_t* idx = static_cast<const int64_t*>(index.storage()->data);
  IndexCheck checked(bound, c.device, "scatter_add");
  // Several index entries may name one position: the additions are atomic, so their
  // order (and a float sum's last bits) may differ from the CPU's, as in PyTorch.
  KILN_CUDA_DISPATCH_FLOAT(out.dtype(), "scatter_add", {
    T* o = static_cast<T*>(out.storage()->data);
    const T* s = static_cast<const T*>(src.storage()->data);
    launch_elementwise<3>(index.numel(), g, [=] __device__(const int64_t* off) {
      int64_t j = checked(idx[off[2]]);
      if (j >= 0) atomicAdd(o + off[0] + j * step, s[off[1]]);
    });
  });
}

}  // namespace kiln::cuda
