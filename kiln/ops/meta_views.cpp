// Meta functions of the view ops: outputs share self's storage, so each computes the
// output's shape, strides and storage offset (and as_strided_scatter, their inverse).
#include <algorithm>

#include "kiln/ops/meta.h"
#include "kiln/ops/meta_util.h"

namespace kiln::ops {

namespace {

// An output that views `self`'s storage with the given layout.
void view_out(MetaOut& out, const Tensor& self, Dims shape, Dims strides, const SymInt& offset) {
  TensorMeta& m = out.outs.append_slot();  // built in place (see MetaOut::fresh)
  m.shape = std::move(shape);
  m.strides = std::move(strides);
  m.offset = offset;
  m.dtype = self.dtype();
  m.alias = TensorMeta::Alias::view;
}

// Elements a strided layout spans from the storage start (0 when it is empty).
int64_t strided_extent(const IntList& size, const IntList& stride, int64_t offset,
                       std::string_view op) {
  KILN_CHECK(size.size() == stride.size(), shape,
             "[{}] mismatch in length of sizes ({}) and strides ({})", op, size.size(),
             stride.size());
  KILN_CHECK(offset >= 0, shape, "[{}] invalid storage offset {}: offsets must be non-negative", op,
             offset);
  // One past the last element addressed, computed without overflow.
  int64_t extent = offset + 1;
  bool overflow = false;
  for (size_t i = 0; i < size.size(); ++i) {
    KILN_CHECK(size[i] >= 0 && stride[i] >= 0, shape, "[{}] sizes and strides must be non-negative",
               op);
    if (size[i] == 0) return 0;
    int64_t reach = 0;
    overflow |= __builtin_mul_overflow(size[i] - 1, stride[i], &reach) ||
                __builtin_add_overflow(extent, reach, &extent);
  }
  KILN_CHECK(!overflow, shape,
             "[{}] size {} and stride {} at offset {} address more elements "
             "than int64 can hold",
             op, ints_str(size), ints_str(stride), offset);
  return extent;
}

}  // namespace

Dims infer_size(const IntList& size, const SymInt& numel, std::string_view op) {
  if (numel.is_symbolic()) [[unlikely]]
    return infer_symbolic_size(size, numel, op);
  return infer_size(size, numel.hint(), op);
}

Dims infer_symbolic_size(const IntList& size, const SymInt& numel, std::string_view op) {
  return infer_size(Dims(std::span<const int64_t>(size.data(), size.size())), numel, op);
}

Dims infer_size(const Dims& size, const SymInt& numel, std::string_view op) {
  if (!size.is_symbolic() && !numel.is_symbolic()) {
    IntList ints(size.hints().begin(), size.hints().end());
    return infer_size(ints, numel.hint(), op);
  }
  Dims out = size;
  SymInt known = 1;
  int infer = -1;
  for (size_t i = 0; i < size.size(); ++i) {
    SymInt s = size.sym(i);
    if (s.same_as(-1)) {
      KILN_CHECK(infer < 0, shape, "[{}] only one dimension can be inferred", op);
      infer = static_cast<int>(i);
    } else {
      KILN_CHECK(s.is_symbolic() || s.hint() >= 0, shape, "[{}] invalid shape dimension {}", op,
                 s.hint());
      known = known * s;
    }
  }
  // (Y2) The inferred size needs the count to divide: a divisibility guard unless the
  // expression already is a multiple (4*s0 viewed as (-1, 4)).
  if (infer >= 0) {
    KILN_CHECK(known != 0 && mod(numel, known) == 0, shape,
               "[{}] shape '{}' is invalid for input of size {}", op, size.str(), numel.str());
    out.set(static_cast<size_t>(infer), floordiv(numel, known));
  } else {
    KILN_CHECK(numel.same_as(known) || numel == known, shape,
               "[{}] shape '{}' is invalid for input of size {}", op, size.str(), numel.str());
  }
  return out;
}

Dims infer_size(const IntList& size, int64_t numel, std::string_view op) {
  Dims out(size);
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) {
      KILN_CHECK(infer < 0, shape, "[{}] only one dimension can be inferred", op);
      infer = static_cast<int>(i);
    } else {
      KILN_CHECK(size[i] >= 0, shape, "[{}] invalid shape dimension {}", op, size[i]);
      known *= size[i];
    }
  }
  if (infer >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0, shape,
               "[{}] shape '{}' is invalid for input of size {}", op, ints_str(size), numel);
    out[infer] = numel / known;
  } else {
    KILN_CHECK(known == numel, shape, "[{}] shape '{}' is invalid for input of size {}", op,
               ints_str(size), numel);
  }
  return out;
}

// Walks the old dims in chunks that are contiguous in memory; each chunk must map to
// a run of new dims with the same element count.
bool compute_view_strides(const Dims& shape, const Dims& strides, const Dims& new_shape,
                          Dims& out) {
  if (shape.is_symbolic() || strides.is_symbolic() || new_shape.is_symbolic()) [[unlikely]]
    return symbolic_view_strides(shape, strides, new_shape, out);
  out = Dims(new_shape.size());
  int64_t numel = numel_of(shape);
  if (numel == 0 || shape.empty()) {
    out = contiguous_strides(new_shape);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

// The same walk with sizes, deciding nothing on symbols: a stride continues its chunk
// when it is the same expression, and a run of new dims matches a chunk when their
// products are the same expression. Products
// equal only in value (rare: different factorizations through floor division) count as
// no match, so view refuses and reshape copies - never a wrong layout.
bool symbolic_view_strides(const Dims& shape, const Dims& strides, const Dims& new_shape,
                           Dims& out) {
  out = Dims(new_shape.size());
  if (shape.empty() || empty_special_case(sym_numel(shape))) {
    symbolic_strides_into(new_shape, out);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  SymInt chunk_base_stride = strides.sym(strides.size() - 1);
  SymInt tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel = tensor_numel * shape.sym(static_cast<size_t>(d));
    bool chunk_ends = d == 0;
    if (!chunk_ends) {
      SymInt continued = tensor_numel * chunk_base_stride;
      SymInt prev = strides.sym(static_cast<size_t>(d - 1));
      // Not the same expression: a new chunk, with no guard. At a binding where the two
      // happen to be equal a view was possible; reshape then copies, which is never wrong.
      chunk_ends = !prev.same_as(continued) && !shape.sym(static_cast<size_t>(d - 1)).same_as(1);
    }
    if (chunk_ends) {
      // Equal in value but not in form (4*(s0//4) and s0): equal under a guard.
      auto matched = [&] {
        return view_numel.same_as(tensor_numel) ||
               (view_numel.hint() == tensor_numel.hint() && view_numel == tensor_numel);
      };
      while (view_d >= 0 && (new_shape.sym(static_cast<size_t>(view_d)).same_as(1) || !matched())) {
        out.set(static_cast<size_t>(view_d), view_numel * chunk_base_stride);
        view_numel = view_numel * new_shape.sym(static_cast<size_t>(view_d));
        --view_d;
      }
      if (!matched()) return false;
      if (d > 0) {
        chunk_base_stride = strides.sym(static_cast<size_t>(d - 1));
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

// ---- views --------------------------------------------------------------------

void meta_view(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  Dims shape = std::holds_alternative<IntList>(c.args[1])
                   ? infer_size(c.args.ints(1), self.sym_numel(), "view")
                   : infer_size(c.args.sizes(1), self.sym_numel(), "view");
  Dims strides;
  KILN_CHECK(compute_view_strides(self.shape(), self.strides(), shape, strides), shape,
             "[view] size {} is not compatible with input tensor's size {} and stride {} (at least "
             "one dimension spans across two contiguous subspaces); use reshape instead",
             shape.str(), self.shape().str(), self.strides().str());
  view_out(out, self, std::move(shape), std::move(strides), self.sym_offset());
}

void meta_permute(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const IntList& dims = c.args.ints(1);
  KILN_CHECK(static_cast<int64_t>(dims.size()) == self.dim(), shape,
             "[permute] number of dims {} does not match the tensor's {} dims", dims.size(),
             self.dim());
  Dims shape(dims.size()), strides(dims.size());
  Dims seen(dims.size());  // 1 where a dim was taken (inline: no allocation up to rank 6)
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], self.dim(), "permute");
    KILN_CHECK(!seen[static_cast<size_t>(d)], value, "[permute] repeated dim {} in {}", d,
               ints_str(dims));
    seen[static_cast<size_t>(d)] = 1;
    shape.set(i, self.shape().sym(static_cast<size_t>(d)));
    strides.set(i, self.strides().sym(static_cast<size_t>(d)));
  }
  view_out(out, self, std::move(shape), std::move(strides), self.sym_offset());
}

void meta_alias(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  view_out(out, self, self.shape(), self.strides(), self.sym_offset());
}

void meta_transpose(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  Dims shape = self.shape(), strides = self.strides();
  if (self.dim() > 0) {
    auto a = static_cast<size_t>(wrap_dim(c.args.i64(1), self.dim(), "transpose"));
    auto b = static_cast<size_t>(wrap_dim(c.args.i64(2), self.dim(), "transpose"));
    SymInt sa = shape.sym(a), ta = strides.sym(a);
    shape.set(a, shape.sym(b));
    shape.set(b, sa);
    strides.set(a, strides.sym(b));
    strides.set(b, ta);
  }
  view_out(out, self, std::move(shape), std::move(strides), self.sym_offset());
}

void meta_unsqueeze(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  int64_t d = wrap_dim(c.args.i64(1), self.dim() + 1, "unsqueeze");
  Dims shape = self.shape(), strides = self.strides();
  auto at = static_cast<size_t>(d);
  SymInt st = d < self.dim() ? shape.sym(at) * strides.sym(at) : SymInt(1);
  shape.insert(at, int64_t{1});
  strides.insert(at, st);
  view_out(out, self, std::move(shape), std::move(strides), self.sym_offset());
}

void meta_squeeze(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  std::vector<bool> drop(self.dim(), c.args.ints(1).empty());
  for (int64_t d : c.args.ints(1))
    if (self.dim() > 0) drop[wrap_dim(d, self.dim(), "squeeze")] = true;
  Dims shape, strides;
  for (int64_t i = 0; i < self.dim(); ++i) {
    auto at = static_cast<size_t>(i);
    if (drop[at] && self.shape().sym(at) == 1) continue;
    shape.push_back(self.shape().sym(at));
    strides.push_back(self.strides().sym(at));
  }
  view_out(out, self, std::move(shape), std::move(strides), self.sym_offset());
}

void meta_expand(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const Dims size = c.args.sizes(1);
  KILN_CHECK(static_cast<int64_t>(size.size()) >= self.dim(), shape,
             "[expand] the number of sizes provided ({}) must be greater or equal to the number "
             "of dimensions in the tensor ({})",
             size.size(), self.dim());
  size_t lead = size.size() - self.dim();
  Dims shape(size.size()), strides(size.size());
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      KILN_CHECK(size.sym(i).is_symbolic() || size.hint(i) >= 0, shape,
                 "[expand] -1 is not allowed in a leading, new dimension");
      shape.set(i, size.sym(i));
      strides.set(i, 0);
      continue;
    }
    SymInt have = self.shape().sym(i - lead);
    SymInt want = size.sym(i).same_as(-1) ? have : size.sym(i);
    // A static 1 broadcast to a symbolic size is expanded (stride 0) without asking
    // whether that size is 1: if it is, the stride of a size-1 dim does not matter (Y2).
    bool one_to_symbol = !have.is_symbolic() && have.hint() == 1 && want.is_symbolic();
    bool same = have.same_as(want) || (!one_to_symbol && have == want);
    KILN_CHECK(same || have == 1, shape,
               "[expand] the expanded size of the tensor ({}) must match the existing size ({}) at "
               "non-singleton dimension {}; target sizes {}, tensor sizes {}",
               want.str(), have.str(), i, size.str(), self.shape().str());
    shape.set(i, want);
    strides.set(i, same ? self.strides().sym(i - lead) : SymInt(0));
  }
  view_out(out, self, std::move(shape), std::move(strides), self.sym_offset());
}

void meta_slice(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  KILN_CHECK(self.dim() > 0, shape, "[slice] cannot be applied to a 0-dim tensor");
  auto d = static_cast<size_t>(wrap_dim(c.args.i64(1), self.dim(), "slice"));
  SymInt size = self.shape().sym(d);
  int64_t step = c.args.i64(4);
  KILN_CHECK(step > 0, value, "[slice] step must be positive, got {}", step);
  // Bounds clamped into [0, size] as Python's; on a symbolic size each clamp that the
  // ranges do not settle is a guard (x[1:] on s0 >= 1 needs none). The full range (the
  // usual bounds of a slice that keeps everything) is the size itself.
  const int64_t kEnd = INT64_MAX;
  auto clamp = [&size](const SymInt& v) -> SymInt {
    if (v.same_as(kEnd)) return size;
    SymInt x = !v.is_symbolic() && v.hint() < 0 ? size + v : v;
    if (x < 0) return 0;
    // (Y3) a data-dependent bound is clamped in the expression (the program evaluates
    // Min when it runs) rather than by a decision the trace cannot take
    if (x.is_symbolic() && data_dependent_size(x)) return sym_min(x, size);
    if (x > size) return size;
    return x;
  };
  SymInt start = c.args.is_none(2) ? SymInt(0) : clamp(c.args.sym(2));
  SymInt end = c.args.is_none(3) ? size : clamp(c.args.sym(3));
  // ceil((end - start) / step), 0 when end <= start: one expression, no decision
  SymInt len = sym_max(floordiv(end - start - 1, step) + 1, 0);
  Dims shape = self.shape(), strides = self.strides();
  SymInt stride = strides.sym(d);
  shape.set(d, len);
  strides.set(d, stride * step);
  // (Y2) at a symbolic position the offset stays an expression (a slice of a dim after
  // a symbolic one): only code that reads it as an integer pins it
  view_out(out, self, std::move(shape), std::move(strides), self.sym_offset() + start * stride);
}

void meta_select(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  KILN_CHECK(self.dim() > 0, shape, "[select] cannot be applied to a 0-dim tensor");
  auto d = static_cast<size_t>(wrap_dim(c.args.i64(1), self.dim(), "select"));
  SymInt size = self.shape().sym(d), index = c.args.i64(2);
  KILN_CHECK(index >= SymInt(0) - size && index < size, index,
             "[select] index {} out of range for tensor of size {} at dimension {}", index.str(),
             self.shape().str(), d);
  if (index < 0) index = index + size;
  Dims shape = self.shape(), strides = self.strides();
  SymInt offset = self.sym_offset() + index * strides.sym(d);  // (Y2) kept symbolic
  shape.erase(d);
  strides.erase(d);
  view_out(out, self, std::move(shape), std::move(strides), offset);
}

void meta_as_strided(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  int64_t offset = c.args.is_none(3) ? self.offset() : c.args.i64(3);
  if (std::holds_alternative<SymIntList>(c.args[1]) ||
      std::holds_alternative<SymIntList>(c.args[2])) {
    // (Y2) Symbolic sizes or strides (a convolution's windows over a dynamic batch): the
    // bound is checked at the example values, where the storage was made for them.
    Dims size = c.args.sizes(1), stride = c.args.sizes(2);
    KILN_CHECK(size.size() == stride.size(), shape,
               "[as_strided] mismatch in length of sizes ({}) and strides ({})", size.size(),
               stride.size());
    IntList hs(size.hints().begin(), size.hints().end()),
        ht(stride.hints().begin(), stride.hints().end());
    strided_extent(hs, ht, offset, "as_strided");
    view_out(out, self, std::move(size), std::move(stride), offset);
    return;
  }
  const IntList& size = c.args.ints(1);
  const IntList& stride = c.args.ints(2);
  int64_t extent = strided_extent(size, stride, offset, "as_strided");
  int64_t capacity = static_cast<int64_t>(self.storage()->nbytes / self.itemsize());
  KILN_CHECK(extent <= capacity, shape,
             "[as_strided] size {} and stride {} at offset {} need {} elements, but the storage "
             "holds {}",
             ints_str(size), ints_str(stride), offset, extent, capacity);
  view_out(out, self, Dims(size), Dims(stride), offset);
}

// The output is a contiguous copy of self; the region is addressed in the output's
// own layout (offset 0), the way functionalization uses it on a flat storage value.
void meta_as_strided_scatter(const OpCall& c, MetaOut& out) {
  const Tensor& self = c.args.tensor(0);
  const Tensor& src = c.args.tensor(1);
  const IntList& size = c.args.ints(2);
  const IntList& stride = c.args.ints(3);
  KILN_CHECK(src.shape() == Dims(size), shape,
             "[as_strided_scatter] src of shape {} does not match size {}", src.shape().str(),
             ints_str(size));
  int64_t offset = c.args.is_none(4) ? 0 : c.args.i64(4);
  int64_t extent = strided_extent(size, stride, offset, "as_strided_scatter");
  KILN_CHECK(extent <= self.numel(), shape,
             "[as_strided_scatter] size {} and stride {} at offset {} need {} elements, but self "
             "has {}",
             ints_str(size), ints_str(stride), offset, extent, self.numel());
  out.fresh(self.shape(), self.dtype());
}

}  // namespace kiln::ops
