// Note [In-place metadata ops]
// t_, transpose_, unsqueeze_, squeeze_ and as_strided_ change the shape, strides or
// offset of the tensor they are called on -- every handle on that TensorImpl sees it --
// not its data. Each is its view op, dispatched as usual (so autograd records it, fake
// tensors propagate it, a trace records the view node), whose result the tensor then
// *becomes*: its impl takes the view's geometry and history, and the active modes are
// told it stands for the view's value from now on (Mode::alias), so a trace reads the
// view's node for it. As PyTorch: a leaf that requires grad may not be changed this way,
// and the history afterwards is the view op's (x.t_().grad_fn is the transpose's node).
// resize_ and set_ change what the tensor views: resize_ keeps the storage when it is
// large enough and otherwise grows it in place (every tensor over that storage sees the
// new memory, the old elements first), refusing a tensor that requires grad; set_ makes
// the tensor view exactly what `source` views. Neither is recorded by autograd or traced
// (as in PyTorch, where tracing them is unsupported): both refuse to run under a mode.
#include <algorithm>

#include "kiln/api/functional.h"
#include "kiln/core/error.h"
#include "kiln/dispatch/dispatch.h"
#include "kiln/dispatch/grad_mode.h"

namespace kiln {

namespace {

void check_not_grad_leaf(const char* op, const Tensor& self) {
  KILN_CHECK(self.defined(), value, "[{}] called on an undefined tensor", op);
  KILN_CHECK(!(self.is_leaf() && self.requires_grad() && autograd::grad_enabled()), value,
             "[{}] a leaf Variable that requires grad ({}) is being used in an in-place operation.",
             op, self.meta_str());
}

// `self` becomes the view `make()` takes of it (dispatched: recorded, traced, propagated):
// its geometry and history.
template <typename Make>
Tensor& become(const char* op, Tensor& self, Make&& make) {
  check_not_grad_leaf(op, self);
  Tensor view = make();
  TensorImpl& s = *self.impl();
  const TensorImpl& v = *view.impl();
  s.shape = v.shape;
  s.strides = v.strides;
  s.offset = v.offset;
  s.autograd = v.autograd;
  // self's own base stays its base: the view's is self (or self's base) already
  alias_to_modes(self, view);
  return self;
}

}  // namespace

Tensor& transpose_(Tensor& self, int64_t dim0, int64_t dim1) {
  return become("transpose_", self, [&] { return transpose(self, dim0, dim1); });
}

Tensor& t_(Tensor& self) {
  return become("t_", self, [&] { return t(self); });
}

Tensor& unsqueeze_(Tensor& self, int64_t dim) {
  return become("unsqueeze_", self, [&] { return unsqueeze(self, dim); });
}

Tensor& squeeze_(Tensor& self) {
  return become("squeeze_", self, [&] { return squeeze(self); });
}

Tensor& squeeze_(Tensor& self, int64_t dim) {
  return become("squeeze_", self, [&] { return squeeze(self, dim); });
}

Tensor& as_strided_(Tensor& self, const IntList& size, const IntList& stride,
                    std::optional<int64_t> storage_offset) {
  return become("as_strided_", self,
                [&] { return as_strided(self, size, stride, storage_offset); });
}

Tensor& resize_(Tensor& self, const IntList& size) {
  KILN_CHECK(self.defined(), value, "[resize_] called on an undefined tensor");
  KILN_CHECK(!self.requires_grad(), value,
             "[resize_] cannot resize variables that require grad ({})", self.meta_str());
  KILN_CHECK(!CaptureScope::active(), unsupported,
             "[resize_] is not supported while tracing or capturing (its new memory is not a value "
             "of the graph)");
  Dims shape(size);
  for (int64_t d : size)
    KILN_CHECK(d >= 0, shape, "[resize_] Trying to create tensor with negative dimension {}: {}", d,
               shape.str());
  // numel_of saturates; the byte count must not wrap past it (a wrapped count would skip
  // the growth and leave the tensor larger than its memory)
  int64_t needed = 0;
  KILN_CHECK(numel_of(shape) < INT64_MAX &&
                 !__builtin_add_overflow(self.offset(), numel_of(shape), &needed) &&
                 !__builtin_mul_overflow(needed, static_cast<int64_t>(self.itemsize()), &needed),
             shape, "[resize_] {} elements of {} do not fit in memory", shape.str(), self.dtype());
  StorageImpl& st = *self.storage();
  if (needed > static_cast<int64_t>(st.nbytes)) {
    KILN_CHECK(
        st.allocator || st.fake, unsupported,
        "[resize_] Trying to resize storage that is not resizable ({}: its memory is borrowed)",
        self.meta_str());
    if (st.fake) {
      st.nbytes = static_cast<size_t>(needed);
    } else {
      // New memory over the same StorageImpl, the old bytes first (any device: by copy_).
      int64_t old_elems = static_cast<int64_t>(st.nbytes / self.itemsize());
      Tensor grown = empty({needed / static_cast<int64_t>(self.itemsize())},
                           {.dtype = self.dtype(), .device = self.device()});
      if (old_elems > 0) {
        Tensor old = as_strided(self.detach(), {old_elems}, {1}, 0);
        Tensor head = narrow(grown, 0, 0, old_elems);
        copy_(head, old);
      }
      StorageImpl& g = *grown.storage();
      std::swap(st.data, g.data);
      std::swap(st.nbytes, g.nbytes);
      std::swap(st.allocator, g.allocator);  // `grown` frees the old memory
    }
  }
  TensorImpl& s = *self.impl();
  s.shape = shape;
  s.strides = contiguous_strides(shape);
  ++st.version;
  return self;
}

Tensor& set_(Tensor& self, const Tensor& source) {
  KILN_CHECK(self.defined() && source.defined(), value, "[set_] called with an undefined tensor");
  KILN_CHECK(!self.requires_grad(), value, "[set_] cannot set a tensor that requires grad ({})",
             self.meta_str());
  KILN_CHECK(self.dtype() == source.dtype(), dtype,
             "[set_] Could not set tensor of type {} to a tensor of type {}", self.dtype(),
             source.dtype());
  KILN_CHECK(self.device() == source.device(), device_mismatch,
             "[set_] the source is on {}, the tensor on {}", source.device(), self.device());
  KILN_CHECK(!CaptureScope::active(), unsupported,
             "[set_] is not supported while tracing or capturing");
  TensorImpl& s = *self.impl();
  const TensorImpl& src = *source.impl();
  s.storage = src.storage;
  s.shape = src.shape;
  s.strides = src.strides;
  s.offset = src.offset;
  s.view_base = nullptr;
  s.view_made_at = 0;
  return self;
}

}  // namespace kiln
