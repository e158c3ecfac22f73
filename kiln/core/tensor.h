#pragma once
// Storage, TensorImpl and the Tensor handle.
//
// Note [Fake tensors keep their device]
// A fake tensor is an ordinary TensorImpl whose Storage has no bytes: it has full
// metadata (shape, strides, offset, dtype, a concrete device, even one this machine
// lacks) and a storage *identity*, so views of a fake tensor are still views of the
// same base. Nothing in kiln special-cases fake tensors except the places that read
// or write data, which check `is_fake()` and fail with a data-dependent error (F5).

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/allocator.h"
#include "kiln/core/device.h"
#include "kiln/core/dims.h"
#include "kiln/core/dtype.h"
#include "kiln/core/error.h"
#include "kiln/core/scalar.h"

namespace kiln {

struct StreamImpl;  // kiln/device/stream_impl.h
class Tensor;
namespace autograd {
struct AutogradMeta;  // kiln/autograd/autograd.h
class Node;
}  // namespace autograd
namespace dist {
class DTensorState;  // kiln/distributed/dtensor.h
}  // namespace dist

/** A block of device memory shared by a tensor and its views. `data == nullptr` with
 * `fake` set means metadata only (see Note [Fake tensors keep their device]). */
struct StorageImpl {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;  // null: not owned (fake, or borrowed memory)
  bool fake = false;
  /** The stream that last queued a write here (of any device: a pinned host buffer
   * is written by a CUDA stream); null = the inline CPU stream, which is always
   * caught up. Host reads synchronise it first (D4). */
  std::atomic<StreamImpl*> writer{nullptr};
  /** (X2) Set while capturing on the result of a device-preserving to(): names that
   * call; any in-place op on this storage then fails with a frozen_mutation Error. */
  std::shared_ptr<const std::string> frozen_by;
  /** Keeps borrowed memory alive (e.g. the mapping of a program file); null when the
   * bytes come from `allocator`. */
  std::shared_ptr<void> owner;
  /** (G4) Bumped by every in-place op on this storage (so shared by a tensor, its views
   * and its detached aliases); saved tensors remember it to detect later writes. */
  uint32_t version = 0;
  /** (G4) The version left by the last in-place op that autograd recorded; views made
   * before it have a stale history. */
  uint32_t recorded_write = 0;
  /** (G6) Allocated under inference mode: tensors over it (views included) are inference
   * tensors, which autograd never saves and which are written only in inference mode. */
  bool inference = false;

  StorageImpl(void* d, size_t n, Device dev, Allocator* a, bool is_fake)
      : data(d), nbytes(n), device(dev), allocator(a), fake(is_fake) {}
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;
  ~StorageImpl() {
    if (allocator) allocator->deallocate(data, nbytes);
  }
};
using Storage = std::shared_ptr<StorageImpl>;

namespace detail {
struct IdBlock {  // ids this thread may hand out: [next, end)
  uint64_t next, end;
};
extern constinit thread_local IdBlock t_tensor_ids;
uint64_t refill_tensor_ids();
}  // namespace detail

/** A number no other TensorImpl of the process ever has: fresh for every impl, copies
 * included. The tracing tables keep (address, id) for a tensor instead of a weak
 * pointer: no atomic reference counts per traced op, no freed impl's memory held, and
 * a new impl at a recycled address never matches an old entry. */
class TensorId {
 public:
  TensorId() : value_(next()) {}
  TensorId(const TensorId&) : value_(next()) {}
  TensorId& operator=(const TensorId&) { return *this; }  // an impl keeps its identity
  uint64_t value() const { return value_; }

 private:
  static uint64_t next() {
    detail::IdBlock& b = detail::t_tensor_ids;
    if (b.next == b.end) [[unlikely]]
      return detail::refill_tensor_ids();
    return b.next++;
  }
  uint64_t value_;
};

/** The descriptor behind a Tensor: a plain struct, no virtuals. */
struct TensorImpl {
  // User-provided: make_pooled<TensorImpl>() value-initializes, which for an implicit
  // constructor zeroes the whole struct first (a `rep stos` on every new tensor).
  // Every member has its own initializer.
  TensorImpl() {}  // NOLINT(modernize-use-equals-default)
  // A new field must also be copied by FakeMode::from_real (which copies them one by one).

  Dims shape;
  Dims strides;        // in elements
  int64_t offset = 0;  // in elements, into storage
  /** (Y2) A fake tensor's symbolic offset (a view at a symbolic position: `offset` holds
   * its example value), else null. offset() pins it; sym_offset() keeps it. */
  const sym::Expr* offset_expr = nullptr;
  DType dtype = DType::f32;
  Device device;                // always has an index
  Storage storage;              // shared with views; never null
  bool wrapped_number = false;  // a 0-dim CPU tensor made from a C++ number (promotion)
  /** 1 + the storage version when this tensor was made by a view op; 0 otherwise. */
  uint32_t view_made_at = 0;
  /** (G4) For a view: the tensor it was made from, followed to the first non-view (views
   * keep it alive, as in PyTorch). An in-place write through the view that autograd
   * records rebases this tensor's history. Null otherwise. */
  std::shared_ptr<TensorImpl> view_base;
  /** Gradient state; null for tensors autograd has never seen (G1). */
  std::shared_ptr<autograd::AutogradMeta> autograd;
  /** (S1) Set for a distributed tensor: its local shard, mesh and placements. The impl's
   * own shape and strides are then the global ones, and it holds no data. */
  std::shared_ptr<const dist::DTensorState> dtensor;
  TensorId id;
};

/** A value handle to a TensorImpl; copying a Tensor shares the impl (like torch). */
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Dims& shape() const { return impl_->shape; }
  const Dims& strides() const { return impl_->strides; }
  int64_t dim() const { return static_cast<int64_t>(impl_->shape.size()); }
  /** Size of dimension `d`; negative `d` counts from the end. */
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  /** Size of dimension `d` as a size: an expression for a symbolic dim (no guard;
   * size() reads its example value and pins it: Note [Symbolic sizes]). */
  SymInt sym_size(int64_t d) const;
  /** The element count as a size. */
  SymInt sym_numel() const { return kiln::sym_numel(impl_->shape); }
  int64_t numel() const { return numel_of(impl_->shape); }
  /** The storage offset; a symbolic one is read as its example value, pinned (Y2). */
  int64_t offset() const {
    if (impl_->offset_expr) [[unlikely]]
      detail::specialize(impl_->offset_expr, impl_->offset);
    return impl_->offset;
  }
  /** The storage offset as a size: an expression for a view at a symbolic position. */
  SymInt sym_offset() const {
    return impl_->offset_expr ? SymInt(impl_->offset_expr, impl_->offset) : SymInt(impl_->offset);
  }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->device; }
  size_t itemsize() const { return kiln::itemsize(impl_->dtype); }
  /** Row-major dense: each stride the product of the sizes after it (dims of size 1
   * ignored). Inline: dispatch asks it several times per eager op. */
  bool is_contiguous() const {
    if (impl_->shape.is_symbolic() || impl_->strides.is_symbolic()) [[unlikely]]
      return symbolic_contiguous();
    int64_t expected = 1;
    const int64_t* sizes = impl_->shape.hints().data();  // integers: checked above
    const int64_t* steps = impl_->strides.hints().data();
    for (size_t i = impl_->shape.size(); i-- > 0;) {
      int64_t s = sizes[i];
      if (s == 1) continue;
      if (s == 0) return true;
      if (steps[i] != expected) return false;
      expected *= s;
    }
    return true;
  }
  bool is_fake() const { return impl_->storage->fake; }
  bool is_wrapped_number() const { return impl_->wrapped_number; }
  /** (S1) A distributed tensor (kiln/distributed/dtensor.h). */
  bool is_dtensor() const { return impl_->dtensor != nullptr; }
  const Storage& storage() const { return impl_->storage; }
  /** True when both share one storage (one is a view of the other, or both of a base). */
  bool is_alias_of(const Tensor& other) const { return impl_->storage == other.impl_->storage; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  /** Pointer to the first element; throws for fake tensors. */
  void* raw_data() const;
  /** Typed pointer to the first element; T must be this tensor's element type (a dtype
   * Error otherwise, as libtorch's data_ptr<T>). Other T (bytes) are not checked. */
  template <typename T>
  T* data() const {
    if constexpr (kIsElement<T>)
      if (dtype_of<T>() != impl_->dtype) [[unlikely]]
        wrong_element_type(dtype_of<T>());
    return static_cast<T*>(raw_data());
  }

  /** (G6) Made under inference mode (autograd::InferenceModeGuard): a view of such a
   * tensor is one too; a view made there of a normal tensor is normal, as in PyTorch. */
  bool is_inference() const { return impl_->storage && impl_->storage->inference; }

  // ---- autograd (G1-G5), through the hook of Note [Autograd methods through a hook] ----
  /** A leaf that asked for gradients, or the output of a recorded differentiable op. */
  bool requires_grad() const;
  /** Makes a leaf require gradients (floating dtypes only); false detaches it. */
  Tensor& set_requires_grad(bool on = true);
  /** No recorded history: a tensor made by the user, or by an op nobody differentiates. */
  bool is_leaf() const;
  /** The gradient accumulated by backward (leaves, and non-leaves that retain_grad). */
  const Tensor& grad() const;
  /** The same, writable (optimizers and zero_grad update it in place or reset it). */
  Tensor& mutable_grad() const;
  /** Keeps this non-leaf's gradient in grad() after backward. */
  void retain_grad() const;
  /** The node that computes this tensor's gradient inputs; null for leaves. */
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  /** grad_fn's name ("MulBackward0"), or "" for a leaf. */
  std::string grad_fn_name() const;
  /** The same data without history, requiring no gradient (shares storage and version).
   * Under active modes it is an `alias` op dispatched to them (a trace records it, as
   * PyTorch records aten.detach); eagerly, a new descriptor of the same data. */
  Tensor detach() const;
  /** detach() that never dispatches: a new descriptor of the same data, for library code
   * keeping its own handles (a mode's bookkeeping, a leaf made for a trace). */
  Tensor detach_descriptor() const;
  /** (G5) Gradients of this tensor w.r.t. the leaves: a scalar needs no `grad`
   * (autograd::backward). */
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false,
                bool create_graph = false) const;
  /** The in-place write counter of this tensor's storage (G4). */
  uint32_t version() const { return impl_->storage->version; }

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /** "f32[2, 3]@cpu:0". */
  std::string meta_str() const;

 private:
  [[noreturn]] void wrong_element_type(DType requested) const;
  bool symbolic_contiguous() const;
  std::shared_ptr<TensorImpl> impl_;
};

// Note [Autograd methods through a hook]
// Tensor keeps PyTorch's autograd methods (requires_grad, set_requires_grad, grad,
// grad_fn, detach, backward, ...) because that is where users look for them, but their
// work is autograd's, three layers up (kiln/autograd/). Core defines them over a table
// of functions, AutogradHooks, that the autograd layer installs when it is linked: by a
// static initializer of kiln/autograd/variable.cpp, and by an inline variable of
// kiln/autograd/autograd.h, which pulls that object out of the static archive into
// every program that includes the header. A tensor autograd never saw (no gradient
// state, not a stale view) is answered here without the table -- no grad, a leaf, no
// history -- so the common case costs the pointer test it always cost. Asking for
// gradients with autograd not linked is an Error that says what to include. Dispatch
// reaches autograd's recorder the same way (AutogradLayer, kiln/dispatch/dispatch.h),
// so no file below autograd includes or links it.
namespace detail {
struct AutogradHooks {
  bool (*requires_grad)(const Tensor&);
  void (*set_requires_grad)(const Tensor&, bool);
  bool (*is_leaf)(const Tensor&);
  const Tensor& (*grad)(const Tensor&);
  Tensor& (*mutable_grad)(const Tensor&);
  void (*retain_grad)(const Tensor&);
  const std::shared_ptr<autograd::Node>& (*grad_fn)(const Tensor&);
  std::string (*grad_fn_name)(const Tensor&);
  Tensor (*detach)(const Tensor&);
  void (*backward)(const Tensor&, const Tensor&, bool, bool);
};
/** Installs autograd's table (kiln/autograd/variable.cpp); idempotent. */
void set_autograd_hooks(const AutogradHooks* hooks);

/** (G4) Whether `t` is a view made before a recorded write to its storage (its gradient
 * history is stale until autograd refreshes it). */
inline bool stale_view(const Tensor& t) {
  const TensorImpl* i = t.impl();
  return i->view_made_at != 0 && i->view_made_at <= i->storage->recorded_write;
}
}  // namespace detail

/** Wraps `dim` (may be negative) into [0, rank); throws an index Error naming `op`. */
int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op);

/** Checks that `shape` can describe a tensor of `dtype`: no negative size, an element
 * count (and every contiguous stride) that fits int64, and a byte size that fits the
 * address space. Returns the byte size; throws a shape Error naming `op` otherwise. */
size_t check_sizes(const Dims& shape, DType dtype, std::string_view op);

/** Creates a tensor with fresh contiguous storage from `allocator` (or a fake one when
 * `allocator` is null). `op` names the caller in errors (see check_sizes). */
/** Whether this thread is in inference mode: storages made now are inference storages
 * (G6). autograd::InferenceModeGuard sets it; it lives here so that every allocation
 * can read it. */
bool inference_mode();
void set_inference_mode(bool on);

Tensor make_tensor(const Dims& shape, DType dtype, Device device, Allocator* allocator,
                   std::string_view op = "empty");
/** The same with the contiguous strides of `shape` already computed. */
Tensor make_tensor(const Dims& shape, const Dims& strides, DType dtype, Device device,
                   Allocator* allocator, std::string_view op = "empty");
/** Creates a view: new metadata over `base`'s storage. Sizes, strides and the offset
 * must be non-negative and the element count must fit int64 (a shape Error otherwise). */
Tensor make_view(const Tensor& base, Dims shape, Dims strides, int64_t offset,
                 std::string_view op = "view");
/** The same at an offset that may be symbolic (a fake view, Y2). */
Tensor make_view(const Tensor& base, Dims shape, Dims strides, const SymInt& offset,
                 std::string_view op);

/** The first and last elements of its storage `t` can address ({1, 0} when it has none). */
std::pair<int64_t, int64_t> element_span(const Tensor& t);
/** Whether `a` and `b` have an element at the same place of one storage: their spans
 * first, element by element only when those meet (interleaved strided views). */
bool shares_elements(const Tensor& a, const Tensor& b);

/** Whether a table entry for `t`'s address, made for the impl with `id`, is about `t`
 * (not about a freed impl whose address `t`'s reuses). See TensorId. */
inline bool refers_to(uint64_t id, const Tensor& t) { return t.impl()->id.value() == id; }

}  // namespace kiln
