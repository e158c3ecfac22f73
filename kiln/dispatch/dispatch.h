#pragma once
// The single choke point every op call goes through, and the thread-local stack of
// modes (fake, proxy, functionalize) that may intercept it.
//
// Note [Re-dispatch through the mode stack]
// dispatch() hands a call to the innermost active mode with that mode popped for the
// duration of its handler. Whatever the handler dispatches therefore reaches the
// modes below it, and finally the eager path (device check, meta, kernel). A mode
// never looks at another mode's state.

#include <functional>
#include <span>
#include <string>

#include "kiln/core/scope.h"
#include "kiln/ops/op_table.h"

namespace kiln {

/** An interceptor on the dispatch stack. */
class Mode {
 public:
  virtual ~Mode() = default;
  /** Handles one call. Calling dispatch() from here reaches the modes below. */
  virtual Outputs handle(ops::OpKind op, std::span<const Value> args) = 0;
  /** A tensor literal the user made while this mode is active (real data on the host):
   * returns what the user's code sees. The default hands it to the modes below
   * (lift_literal); FakeMode makes it fake, ProxyMode records it as a constant. */
  virtual Tensor lift(const Tensor& literal);
  /** `alias` is a second handle on `of`'s data that autograd keeps (a saved output
   * without its history): a mode that tracks tensors treats it as `of` from now on (a
   * trace reads `of`'s node; no op is recorded). The default tells the modes below. */
  virtual void alias(const Tensor& alias, const Tensor& of);
  /** Whether handle(op, args) would be exactly dispatch_meta(op, args): nothing recorded,
   * nothing converted (FakeMode on fake arguments). Lets a layer above that already
   * knows the outputs' metadata skip the call (see redispatch_is_meta). */
  virtual bool only_propagates(std::span<const Value> args) const;
};

/** Hands a freshly made tensor literal (tensor({..}), from_vector) to the active modes,
 * innermost first, the way dispatch() hands them a call. Eagerly: the literal itself. */
Tensor lift_literal(const Tensor& literal);
/** Tells the active modes, innermost first, that `alias` stands for `of` (Mode::alias). */
void alias_to_modes(const Tensor& alias, const Tensor& of);

/** Pushes `mode` on this thread's stack for the guard's lifetime. */
class ModeGuard : ScopeGuard {
 public:
  explicit ModeGuard(Mode& mode);
  ~ModeGuard();

 private:
  Mode* mode_;
};

/** While alive, dispatches go to the modes below `mode` when `mode` would see them
 * first (else it changes nothing): a mode's helpers called from outside its handle()
 * reach the modes below, as handle() does, and autograd records nothing. */
class BelowMode : ScopeGuard {
 public:
  explicit BelowMode(const Mode& mode);
  ~BelowMode();

 private:
  bool popped_;
};

/** Number of modes that would see a dispatch from here (0 = eager). */
int active_mode_count();

/** Whether redispatch(op, args) of an op that is not in place, on arguments that hold
 * no DTensor, would be exactly dispatch_meta(op, args) from here: one mode below, which
 * neither records nor converts (Mode::only_propagates). A caller may then call
 * dispatch_meta itself, or make the outputs when it knows their metadata. */
bool redispatch_is_meta(std::span<const Value> args);

/** Marks this thread as capturing a program (tracing) for its lifetime. While
 * capturing, `to()` is always recorded as `_to_copy` (X1) and in-place ops on frozen
 * storages fail (X2). */
class CaptureScope : ScopeGuard {
 public:
  CaptureScope();
  ~CaptureScope();
  static bool active();
};

/** Names the code that runs while it is alive (e.g. a module path). Traced nodes
 * record the joined path as provenance; trace-time errors name it. */
class ScopeName : ScopeGuard {
 public:
  explicit ScopeName(std::string name);
  ~ScopeName();

 private:
  size_t mark_;  // the path's length before this scope
};
/** The current scope path, e.g. "blocks.0.attn", or "" (this thread's). */
const std::string& current_scope();

/** (X2) Freezes `t`'s storage (and so every view of it) while capturing; `by` names the
 * call that produced it. */
void freeze(const Tensor& t, std::string by);

/** Runs an op: through autograd when it records gradients, then the innermost active
 * mode, else eagerly. */
Outputs dispatch(ops::OpKind op, std::span<const Value> args);
/** Runs an op below autograd: through the innermost active mode, else eagerly. */
Outputs redispatch(ops::OpKind op, std::span<const Value> args);
/** Runs an op eagerly, ignoring modes: device check (D2), meta, then the kernel of
 * the device's backend under a guard for that device (D3). */
Outputs dispatch_eager(ops::OpKind op, std::span<const Value> args);
/** Runs an op eagerly into preallocated outputs (contiguous, with the shapes, dtypes
 * and device its meta function gives): how a runtime with a memory plan calls kernels.
 * Ops whose outputs alias an input (views, in-place ops) are refused. */
void dispatch_into(ops::OpKind op, std::span<const Value> args, std::span<Tensor> outs);
/** Only the metadata an eager call would produce: outputs without data ("fake"),
 * views sharing the input's storage identity. Used by meta tensors and FakeMode. */
Outputs dispatch_meta(ops::OpKind op, std::span<const Value> args);
/** The checks an in-place op without a meta function of its own makes on its
 * functional form's result (shape and dtype of that result): it must fit `self`. */
void check_inplace_result(const ops::OpInfo& info, const Tensor& self, const Dims& shape,
                          DType dtype);

/** Autograd, the layer above dispatch: dispatch() hands it each call from user code
 * while grad mode is on and a tensor argument requires grad (`record`, which runs the op
 * through redispatch() and attaches its backward node). Installed by kiln/autograd
 * (Note [Autograd methods through a hook] in kiln/core/tensor.h; Note [Autograd sits
 * above the modes] in kiln/autograd/autograd.h). */
struct AutogradLayer {
  Outputs (*record)(ops::OpKind op, std::span<const Value> args);
};
void set_autograd_layer(const AutogradLayer* layer);
/** (G4) Counts an in-place write on its storage's version (the choke point counts every
 * write autograd does not record itself; nothing is counted in inference mode). */
void bump_version(ops::OpKind op, std::span<const Value> args);

/** The layer between autograd and the modes that runs ops on distributed tensors (S2):
 * redispatch() hands it every call with a DTensor argument (`handle`, which calls
 * redispatch() on local shards). Installed by kiln/distributed when the first DTensor is
 * made. See Note [DTensor is a layer between autograd and the modes]. */
struct DTensorLayer {
  Outputs (*handle)(ops::OpKind op, std::span<const Value> args);
  /** A DTensor's local shard. */
  Tensor (*inner)(const Tensor& t);
  /** A DTensor like `like` (mesh, placements, global shape) around another local shard. */
  Tensor (*rewrap)(const Tensor& like, const Tensor& inner);
  /** The same for a gradient of `like`: placed like it except that partial values are
   * replicated (the gradient of a sum of partial values is the same on every rank). */
  Tensor (*rewrap_gradient)(const Tensor& like, const Tensor& inner);
  /** A plain tensor holding a whole value (a gradient a formula built from plain
   * zeros) as a DTensor placed like `like`. */
  Tensor (*distribute_like)(const Tensor& like, const Tensor& whole);
};
void set_dtensor_layer(const DTensorLayer* layer);

// Note [Tensor subclasses under capture]
// Captures (make_fx's functionalize capture, capture_joint) trace what a tensor subclass
// does on its inner tensors: each subclass input is unwrapped to its inner tensor, the
// trace runs on those, and the traced function gets subclass tensors rewrapped around the
// traced inner tensors (PyTorch's __tensor_flatten__ / __tensor_unflatten__). Graph
// inputs and outputs are inner tensors: for a DTensor, this rank's shard.
/** `t`'s inner tensor (a DTensor's local shard), or `t` itself. */
Tensor subclass_inner(const Tensor& t);
/** `inner` wrapped like `like` (a DTensor with like's spec), or `inner` itself when
 * `like` is a plain tensor. */
Tensor subclass_rewrap(const Tensor& like, const Tensor& inner);
/** The same for a tangent (an incoming gradient) of `like`. */
Tensor subclass_rewrap_gradient(const Tensor& like, const Tensor& inner);
/** `t` itself, unless `like` is a DTensor and `t` a plain tensor with the same global
 * value on every rank: then a DTensor placed like `like` (what autograd hands a DTensor
 * leaf when a backward formula built its gradient from plain zeros). */
Tensor subclass_like(const Tensor& like, const Tensor& t);

/** The kernel table of the backend of `type` (a test's replacement, if set), or null. */
const ops::KernelTable* kernel_table(DeviceType type);
/** Replaces the kernel table of `type` (null restores the built-in one); with
 * set_device_backend_for_testing, tests run a backend this machine lacks. */
void set_kernel_table_for_testing(DeviceType type, const ops::KernelTable* table);

/** Runs `body` the way dispatch runs every kernel: queued on `device`'s current
 * stream, under a KernelScope for `device` (D3, D8). For extension kernels. */
void launch_kernel(std::string_view op, Device device, std::function<void()> body);

/** (F4) How a device mismatch between tensor arguments is resolved. */
struct DevicePolicy {
  enum class Kind : uint8_t { strict, prefer_non_cpu, prefer_type };
  Kind kind = Kind::strict;
  DeviceType type = DeviceType::cuda;  // for prefer_type

  static DevicePolicy strict() { return {}; }
  static DevicePolicy prefer_non_cpu() { return {Kind::prefer_non_cpu, DeviceType::cuda}; }
  static DevicePolicy prefer_type(DeviceType t) { return {Kind::prefer_type, t}; }
};

/** The thread's device policy; strict unless a DevicePolicyGuard is alive. */
DevicePolicy current_device_policy();

/** Sets the device policy for its lifetime, restoring the previous one after. */
class DevicePolicyGuard : ScopeGuard {
 public:
  explicit DevicePolicyGuard(DevicePolicy policy);
  ~DevicePolicyGuard();

 private:
  DevicePolicy prev_;
};

/** The device an op runs on and its outputs live on, per its DeviceRule (D2, F3) and
 * the current policy (F4); throws a device_mismatch Error naming op, devices and
 * arguments. */
Device op_device(ops::OpKind op, std::span<const Value> args);

/** (G4) Marks `view` as made from `base` now: its history goes stale at the next recorded
 * write to the storage, and a recorded write through it rebases the root base. */
void mark_view(const Tensor& view, const Tensor& base);

/** Turns the metadata of `op`'s outputs into tensors on `device`: views share their
 * base's storage, `self` outputs are the argument itself, fresh outputs get memory
 * from `allocator` (none, i.e. fake, when it is null). */
Outputs materialize(const ops::OpInfo& info, std::span<const Value> args, const ops::MetaOut& meta,
                    Device device, Allocator* allocator);

}  // namespace kiln
