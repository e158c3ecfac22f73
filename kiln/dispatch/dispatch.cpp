#include "kiln/dispatch/dispatch.h"

#include <atomic>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#if KILN_WITH_CUDA
#include "kiln/backend/cuda/kernels.h"
#endif
#include "kiln/device/kernel_scope.h"
#include "kiln/device/registry.h"
#include "kiln/device/stream.h"
#include "kiln/device/stream_impl.h"
#include "kiln/dispatch/grad_mode.h"
#include "kiln/ops/extension.h"
#include "kiln/ops/meta.h"

namespace kiln {

using ops::OpInfo;
using ops::OpKind;

namespace {

thread_local std::vector<Mode*> t_modes;
thread_local size_t t_depth = 0;   // modes [0, t_depth) are active for the next dispatch
thread_local size_t t_pushed = 0;  // t_modes.size(), readable without the vector's TLS init

// Pops the innermost mode while it handles a call. See Note [Re-dispatch through the
// mode stack].
struct PopMode {
  PopMode() { --t_depth; }
  ~PopMode() { ++t_depth; }
};
thread_local DevicePolicy t_policy;

const ops::KernelTable* g_test_tables[kNumDeviceTypes] = {};

}  // namespace

// The one registry of kernel tables: add a line per compiled backend.
const ops::KernelTable* kernel_table(DeviceType type) {
  if (const ops::KernelTable* t = g_test_tables[static_cast<int>(type)]) return t;
  switch (type) {
    case DeviceType::cpu: return &cpu::kernels();
#if KILN_WITH_CUDA
    case DeviceType::cuda: return &cuda::kernels();
#endif
    default: return nullptr;
  }
}

namespace {

// The kernel of `op` for `type`: the backend's table entry for a built-in op, the
// registration's for an extension op (E1).
ops::Kernel kernel_of(const ops::KernelTable* table, OpKind op, DeviceType type) {
  if (ops::is_builtin(op)) [[likely]]
    return table ? (*table)[static_cast<size_t>(op)] : nullptr;
  return ops::extension_kernel(op, type);
}

// (D2) The host is cpu:0; virtual CPU devices cpu:1.. stand in for accelerators.
constexpr Device kHost(DeviceType::cpu, 0);
bool is_host_scalar(const Tensor& t) { return t.dim() == 0 && t.device() == kHost; }

// (F3)/(F4) Folds one more tensor argument into the running common device. Argument
// names are kept as (name, list index) and only formatted for an error.
struct DeviceFold {
  DeviceFold(const OpInfo& i, DevicePolicy p) : info(i), policy(p) {}
  const OpInfo& info;
  DevicePolicy policy;
  bool have = false;
  bool from_scalar = false;
  Device device;
  std::string_view arg;
  int arg_index = -1;

  static std::string describe(std::string_view name, int index) {
    return index < 0 ? std::string(name) : fmt::format("{}[{}]", name, index);
  }

  // `host_ok`: an index argument, which may live on the host; `written`: the argument
  // the op writes, which is never exempt (D2).
  void add(const Tensor& t, std::string_view name, int index, bool host_ok, bool written) {
    Device d = t.device();
    bool scalar = !written && is_host_scalar(t);
    if (!have) {
      have = true, device = d, from_scalar = scalar, arg = name, arg_index = index;
      return;
    }
    if (d == device) {
      from_scalar = from_scalar && scalar;
      return;
    }
    if (scalar || (host_ok && d == kHost)) return;  // a host scalar never wins (D2)
    if (from_scalar) {                              // ... so a later device replaces it
      device = d, from_scalar = false, arg = name, arg_index = index;
      return;
    }
    if (auto winner = prefer(device, d)) {
      if (*winner == d) device = d, arg = name, arg_index = index;
      return;
    }
    fail(ErrorKind::device_mismatch,
         "[{}] Expected all tensors to be on the same device, but found at least two devices, "
         "{} (argument '{}') and {} (argument '{}')",
         info.name, device, describe(arg, arg_index), d, describe(name, index));
  }

  // (F4) The preferred side wins when exactly one side is preferred.
  std::optional<Device> prefer(Device a, Device b) const {
    auto preferred = [this](Device d) {
      switch (policy.kind) {
        case DevicePolicy::Kind::strict: return false;
        case DevicePolicy::Kind::prefer_non_cpu: return !d.is_cpu();
        case DevicePolicy::Kind::prefer_type: return d.type == policy.type;
      }
      return false;
    };
    bool pa = preferred(a), pb = preferred(b);
    if (pa == pb) return std::nullopt;
    return pa ? a : b;
  }
};

Device device_arg(std::span<const Value> args, std::string_view op) {
  for (const Value& v : args)
    if (auto* d = std::get_if<Device>(&v)) return resolve_device(*d);
  fail(ErrorKind::internal, "[{}] has no device argument", op);
}

}  // namespace

ModeGuard::ModeGuard(Mode& mode) : mode_(&mode) {
  KILN_CHECK(t_depth == t_modes.size(), value, "modes must be pushed outside of a mode's handler");
  t_modes.push_back(mode_);
  t_depth = t_pushed = t_modes.size();
}

ModeGuard::~ModeGuard() {
  if (!t_modes.empty() && t_modes.back() == mode_) t_modes.pop_back();
  t_depth = t_pushed = t_modes.size();
}

BelowMode::BelowMode(const Mode& mode) : popped_(t_depth > 0 && t_modes[t_depth - 1] == &mode) {
  if (popped_) --t_depth;
}
BelowMode::~BelowMode() {
  if (popped_) ++t_depth;
}

int active_mode_count() { return static_cast<int>(t_depth); }

bool redispatch_is_meta(std::span<const Value> args) {
  return t_depth == 1 && t_modes[0]->only_propagates(args);
}

DevicePolicy current_device_policy() { return t_policy; }
DevicePolicyGuard::DevicePolicyGuard(DevicePolicy policy) : prev_(t_policy) { t_policy = policy; }
DevicePolicyGuard::~DevicePolicyGuard() { t_policy = prev_; }

Device op_device(OpKind op, std::span<const Value> args) {
  const OpInfo& info = ops::op_info(op);
  switch (info.device_rule) {
    case ops::DeviceRule::factory:
    case ops::DeviceRule::to_copy: return device_arg(args, info.name);
    case ops::DeviceRule::copy: return std::get<Tensor>(args[0]).device();
    case ops::DeviceRule::same:
    case ops::DeviceRule::index: break;
  }
  // The common case first: every tensor argument on one device, which the fold below
  // would return whatever the policy (host scalars and index arguments only matter
  // when devices differ).
  const Device* first = nullptr;
  bool uniform = true;
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v)) {
      if (!t->defined()) continue;
      const Device& d = t->impl()->device;
      if (!first)
        first = &d;
      else if (d != *first)
        uniform = false;
    } else if (std::holds_alternative<TensorList>(v)) {
      uniform = false;
    }
  }
  if (uniform && first) [[likely]]
    return *first;
  DeviceFold fold{info, t_policy};
  bool index_rule = info.device_rule == ops::DeviceRule::index;
  const auto& specs = info.schema.args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto* t = std::get_if<Tensor>(&args[i])) {
      if (t->defined())
        fold.add(*t, specs[i].name, -1, index_rule && fold.have,
                 static_cast<int>(i) == info.schema.mutated_arg);
    } else if (auto* list = std::get_if<TensorList>(&args[i])) {
      for (size_t j = 0; j < list->size(); ++j)
        fold.add((*list)[j], specs[i].name, static_cast<int>(j), false, false);
    }
  }
  KILN_CHECK(fold.have, value, "[{}] expected a non-empty list of tensors", info.name);
  return fold.device;
}

void mark_view(const Tensor& view, const Tensor& base) {
  TensorImpl* v = view.impl();
  v->view_made_at = base.storage()->version + 1;
  v->view_base = base.impl()->view_base ? base.impl()->view_base : base.impl_ptr();
}

Outputs materialize(const OpInfo& info, std::span<const Value> args, const ops::MetaOut& meta,
                    Device device, Allocator* allocator) {
  Outputs outs;
  for (const ops::TensorMeta& m : meta.outs) {
    switch (m.alias) {
      case ops::TensorMeta::Alias::self:
        outs.push_back(std::get<Tensor>(args[info.schema.mutated_arg]));
        break;
      case ops::TensorMeta::Alias::view: {
        const Tensor& base = std::get<Tensor>(args[info.schema.view_of_arg]);
        outs.push_back(make_view(base, m.shape, m.strides, m.offset, info.name));
        mark_view(outs[outs.size() - 1], base);
        break;
      }
      case ops::TensorMeta::Alias::none:
        outs.push_back(make_tensor(m.shape, m.strides, m.dtype, device, allocator, info.name));
        break;
    }
  }
  return outs;
}

namespace {

// Meta of `op`, or for a derived in-place op the meta of its functional form checked
// against self (its output is self).
ops::MetaOut run_meta(const OpInfo& info, std::span<const Value> args, Device device) {
  ops::MetaOut meta;
  ops::OpCall call{info.kind, args, device};
  SymOpScope sym_op(info.name);  // (Y2) names the op in the guards its sizes record
  if (info.meta) {
    info.meta(call, meta);
    return meta;
  }
  // (E4) an op defined by its schema alone, its fake function not registered yet
  KILN_CHECK(info.functional != info.kind, unsupported,
             "[{}] has no fake (meta) function yet: register_fake({}, ...) before calling it (kiln "
             "computes "
             "every call's outputs from it, fake or eager)",
             info.name, info.name);
  const OpInfo& functional = ops::op_info(info.functional);
  call.op = functional.kind;
  functional.meta(call, meta);
  check_inplace_result(info, std::get<Tensor>(args[info.schema.mutated_arg]), meta.outs[0].shape,
                       meta.outs[0].dtype);
  return meta;
}

}  // namespace

void check_inplace_result(const OpInfo& info, const Tensor& self, const Dims& shape, DType dtype) {
  KILN_CHECK(shape == self.shape(), shape,
             "[{}] output with shape {} doesn't match the broadcast shape {}", info.name,
             self.shape().str(), shape.str());
  KILN_CHECK(ops::can_cast(dtype, self.dtype()), dtype,
             "[{}] result type {} can't be cast to the desired output type {}", info.name, dtype,
             self.dtype());
}

namespace {
// Metadata-only outputs of `op` on `device` (already folded from the arguments).
Outputs meta_outputs(const OpInfo& info, std::span<const Value> args, Device device) {
  ops::MetaOut meta = run_meta(info, args, device);
  if (!info.meta) {  // derived in-place: the output is self
    Outputs outs;
    outs.push_back(std::get<Tensor>(args[info.schema.mutated_arg]));
    return outs;
  }
  return materialize(info, args, meta, device, /*allocator=*/nullptr);
}
}  // namespace

Outputs dispatch_meta(OpKind op, std::span<const Value> args) {
  return meta_outputs(ops::op_info(op), args, op_device(op, args));
}

namespace {

// Everything a kernel launch needs besides its arguments.
struct Launch {
  const OpInfo* info;
  const ops::KernelTable* table;
  Device device;
};

// Whether a derived in-place op may run its functional kernel straight into self: the
// result has self's dtype, self has no element twice (no 0 stride), and every other
// tensor argument either does not share self's storage or is exactly self's view (an
// elementwise kernel reads each element before writing it).
bool writes_self_directly(const OpInfo& info, std::span<const Value> args,
                          const ops::MetaOut& meta) {
  const Tensor& self = std::get<Tensor>(args[info.schema.mutated_arg]);
  if (meta.outs[0].dtype != self.dtype()) return false;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (self.strides()[d] == 0 && self.shape()[d] > 1) return false;
  auto harmless = [&](const Tensor& t) {
    if (!t.defined() || &t == &self || t.storage() != self.storage()) return true;
    return t.offset() == self.offset() && t.shape() == self.shape() &&
           t.strides() == self.strides();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int>(i) == info.schema.mutated_arg) continue;
    if (auto* t = std::get_if<Tensor>(&args[i])) {
      if (!harmless(*t)) return false;
    } else if (auto* list = std::get_if<TensorList>(&args[i])) {
      for (const Tensor& x : *list)
        if (!harmless(x)) return false;
    }
  }
  return true;
}

// (E1) An extension kernel fills the outputs its meta function described; one that swaps
// in a tensor of another shape, dtype or device would make fake tracing and eager disagree
// (a built-in kernel cannot: the F6 test holds every built-in to its meta function).
void check_extension_outputs(const OpInfo& info, const ops::MetaOut& meta,
                             std::span<const Tensor> outs, Device device) {
  for (size_t i = 0; i < outs.size() && i < meta.outs.size(); ++i) {
    const Tensor& o = outs[i];
    KILN_CHECK(o.defined() && o.shape() == meta.outs[i].shape && o.dtype() == meta.outs[i].dtype &&
                   o.device() == device,
               value, "[{}] the kernel's output {} is {}, but the op's meta function says {}{}@{}",
               info.name, i, o.defined() ? o.meta_str() : std::string("undefined"),
               to_string(meta.outs[i].dtype), meta.outs[i].shape.str(), device);
  }
}

// Runs one op's kernel under its KernelScope (D3, D8). A derived in-place op runs its
// functional kernel into self when that is safe (writes_self_directly), else into a
// temporary (shaped by `meta`) that is then copied into self.
void run_kernel(const Launch& l, const ops::MetaOut& meta, std::span<const Value> args,
                std::span<Tensor> outs) {
  KernelScope scope(l.info->name, l.device);
  if (l.info->meta) {
    kernel_of(l.table, l.info->kind, l.device.type)(ops::OpCall{l.info->kind, args, l.device},
                                                    outs);
    if (!ops::is_builtin(l.info->kind)) check_extension_outputs(*l.info, meta, outs, l.device);
    return;
  }
  const OpInfo& functional = ops::op_info(l.info->functional);
  ops::Kernel kernel = kernel_of(l.table, functional.kind, l.device.type);
  if (writes_self_directly(*l.info, args, meta)) {
    kernel(ops::OpCall{functional.kind, args, l.device}, outs);
    return;
  }
  Outputs tmp = materialize(functional, args, meta, l.device, &device_allocator(l.device));
  kernel(ops::OpCall{functional.kind, args, l.device}, tmp);
  Value copy_args[3] = {outs[0], tmp[0], false};
  (*l.table)[static_cast<size_t>(OpKind::copy_)](
      ops::OpCall{OpKind::copy_, std::span<const Value>(copy_args), l.device}, outs);
}

// (D4) Makes `stream` wait for every other stream that last wrote one of the tensor
// arguments (a tensor produced on another stream or device is complete before a kernel
// reads it). The common case, data written by this stream or inline, costs one load.
// Also the one place a fake tensor (metadata only, F1) that reached a kernel is caught:
// a constant holding one in a graph run for real, say.
void order_after_writers(const OpInfo& info, std::span<const Value> args, Stream stream) {
  auto order = [&](const Tensor& t) {
    if (!t.defined()) return;
    KILN_CHECK(!t.storage()->fake, value,
               "[{}] got a fake tensor ({}): it has metadata but no data to compute with",
               info.name, t.meta_str());
    StreamImpl* w = t.storage()->writer.load(std::memory_order_relaxed);
    if (!w || w == stream.impl()) return;
    Event written;
    written.record(Stream::of(w));
    written.wait(stream);
  };
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v))
      order(*t);
    else if (auto* list = std::get_if<TensorList>(&v))
      for (const Tensor& t : *list) order(t);
  }
}

// Tells stream-aware allocators that `stream` uses every tensor of the call, so their
// blocks outlive the queued work. See Note [Stream-aware reuse].
void record_stream_uses(std::span<const Value> args, std::span<Tensor> outs, Stream stream) {
  auto note = [&](const Tensor& t) {
    if (!t.defined()) return;
    StorageImpl* s = t.storage().get();
    if (s->allocator && s->data) s->allocator->record_stream(s->data, stream.impl());
  };
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v))
      note(*t);
    else if (auto* list = std::get_if<TensorList>(&v))
      for (const Tensor& t : *list) note(t);
  }
  for (const Tensor& t : outs) note(t);
}

// The source of a copy between devices, or null; `non_blocking` says whether the
// host may return before the copy has run (D7).
const Tensor* cross_device_source(const OpInfo& info, std::span<const Value> args, Device device,
                                  bool& non_blocking) {
  size_t src = info.device_rule == ops::DeviceRule::to_copy ? 0
               : info.device_rule == ops::DeviceRule::copy  ? 1
                                                            : args.size();
  if (src >= args.size()) return nullptr;
  const Tensor& t = std::get<Tensor>(args[src]);
  if (t.device() == device) return nullptr;
  non_blocking = std::get<bool>(args[info.kind == OpKind::copy_ ? 2 : 3]);
  return &t;
}

// Whether a copy from `src` to `dst` moves bytes between memories no single kernel can
// address: different device types, or two CUDA devices.
bool needs_transfer(Device src, Device dst) {
  return src.type != dst.type || (src.type != DeviceType::cpu && src.index != dst.index);
}

Tensor fresh(const Dims& shape, DType dtype, Device device) {
  return make_tensor(shape, dtype, device, &device_allocator(device));
}

// Note [Copies between backends]
// (D2) A copy between a CPU and a CUDA device (or two CUDA devices) is three steps: the
// source is made dense in its own dtype by a kernel on its own device (broadcast
// included), the bytes move through the backend's copy (cudaMemcpyAsync on the CUDA
// side's current stream), and a kernel on the destination converts dtype and layout
// when the destination is not a dense tensor of the source's dtype. Each step is an
// ordinary op under its own device's guard and stream, so D3/D4/D8 hold throughout.
void transfer(const Tensor& dst, const Tensor& src_in, bool non_blocking) {
  if (dst.numel() == 0) return;
  Tensor src = src_in;
  if (src.shape() != dst.shape() || !src.is_contiguous()) {
    Value expand_args[2] = {src_in, IntList(dst.shape().begin(), dst.shape().end())};
    Value clone_args[1] = {dispatch_eager(OpKind::expand, expand_args)[0]};
    src = dispatch_eager(OpKind::clone, clone_args)[0];
  }
  bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
  Tensor land = direct ? dst : fresh(dst.shape(), src.dtype(), dst.device());
  Device side = dst.device().is_cpu() ? src.device() : dst.device();
  DeviceBackend* backend = device_backend(side.type);
  KILN_CHECK(backend, unsupported, "[copy_] no copy from {} to {} in this build", src.device(),
             dst.device());
  {
    KernelScope scope("copy_", side);
    Stream stream = current_stream(side);
    Value args[2] = {src, land};
    order_after_writers(ops::op_info(OpKind::copy_), args, stream);
    Tensor outs[1] = {land};
    record_stream_uses(args, outs, stream);
    size_t elem = itemsize(src.dtype());
    backend->copy_bytes(static_cast<char*>(land.storage()->data) + land.offset() * elem,
                        land.device(),
                        static_cast<const char*>(src.storage()->data) + src.offset() * elem,
                        src.device(), static_cast<size_t>(src.numel()) * elem, non_blocking);
    // A blocking copy is complete; a non-blocking one is complete once the stream is.
    land.storage()->writer.store(non_blocking ? stream.impl() : nullptr, std::memory_order_relaxed);
  }
  if (!direct) {
    Value copy_args[3] = {dst, land, non_blocking};
    dispatch_eager(OpKind::copy_, copy_args);
  }
}

}  // namespace

namespace {

// (D4) Queues a kernel on its device's current stream, after the work that wrote its
// inputs; `outs` are already allocated.
void launch(const OpInfo& info, const ops::KernelTable* table, Device device,
            const ops::MetaOut& meta, std::span<const Value> args, std::span<Tensor> outs) {
  bool non_blocking = false;
  const Tensor* src = cross_device_source(info, args, device, non_blocking);
  if (src && needs_transfer(src->device(), device)) {
    transfer(outs[0], *src, non_blocking);
    return;
  }
  Stream stream = current_stream(device);
  order_after_writers(info, args, stream);
  for (const Tensor& o : outs) o.storage()->writer.store(stream.impl(), std::memory_order_relaxed);
  Launch l{&info, table, device};
  if (stream.runs_inline()) {
    if (!device.is_cpu()) record_stream_uses(args, outs, stream);
    run_kernel(l, meta, args, outs);
  } else {
    // The task owns copies of every argument and output, so their memory stays alive
    // until it has run. See Note [CPU streams].
    stream.enqueue([l, meta, a = std::vector<Value>(args.begin(), args.end()),
                    o = std::vector<Tensor>(outs.begin(), outs.end())]() mutable {
      run_kernel(l, meta, a, o);
    });
  }
  if (src && !non_blocking) stream.synchronize();
}

const ops::KernelTable* checked_table(const OpInfo& info, Device device) {
  const ops::KernelTable* table = kernel_table(device.type);
  OpKind kernel_op = info.meta ? info.kind : info.functional;
  KILN_CHECK(kernel_of(table, kernel_op, device.type), unsupported,
             "[{}] has no kernel for device {}", info.name, device);
  return table;
}

}  // namespace

Outputs dispatch_eager(OpKind op, std::span<const Value> args) {
  const OpInfo& info = ops::op_info(op);
  Device device = op_device(op, args);
  if (device.type == DeviceType::meta) return meta_outputs(info, args, device);
  Allocator* allocator = &device_allocator(device);  // checks the device exists
  ops::MetaOut meta = run_meta(info, args, device);
  if (info.is_view()) return materialize(info, args, meta, device, allocator);
  const ops::KernelTable* table = checked_table(info, device);
  if (op == OpKind::_to_copy && std::get<bool>(args[3])) {
    // (D7) A non-blocking copy to the host lands in memory the device can write without
    // staging (pinned on CUDA), or it could not be asynchronous.
    Device from = std::get<Tensor>(args[0]).device();
    if (DeviceBackend* b = device_backend(from.type); b && device.is_cpu() && !from.is_cpu())
      if (Allocator* pinned = b->host_transfer_allocator()) allocator = pinned;
  }
  Outputs outs;
  if (info.meta)
    outs = materialize(info, args, meta, device, allocator);
  else
    outs.push_back(std::get<Tensor>(args[info.schema.mutated_arg]));
  launch(info, table, device, meta, args, outs);
  return outs;
}

void dispatch_into(OpKind op, std::span<const Value> args, std::span<Tensor> outs) {
  const OpInfo& info = ops::op_info(op);
  KILN_CHECK(info.meta && !info.is_view() && !info.is_inplace(), value,
             "[{}] cannot write into given outputs: only ops with fresh outputs can", info.name);
  Device device = op_device(op, args);
  check_device_available(device);
  ops::MetaOut meta = run_meta(info, args, device);
  KILN_CHECK(meta.outs.size() == outs.size(), value, "[{}] returns {} outputs, {} given", info.name,
             meta.outs.size(), outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& o = outs[i];
    KILN_CHECK(o.shape() == meta.outs[i].shape && o.dtype() == meta.outs[i].dtype &&
                   o.device() == device && o.is_contiguous(),
               value, "[{}] output {} must be a contiguous {}{}@{}, got {}", info.name, i,
               to_string(meta.outs[i].dtype), meta.outs[i].shape.str(), device, o.meta_str());
  }
  launch(info, checked_table(info, device), device, meta, args, outs);
}

void set_kernel_table_for_testing(DeviceType type, const ops::KernelTable* table) {
  g_test_tables[static_cast<int>(type)] = table;
}

void launch_kernel(std::string_view op, Device device, std::function<void()> body) {
  device = resolve_device(device);
  check_device_available(device);
  Stream stream = current_stream(device);
  stream.enqueue([op, device, body = std::move(body)] {
    KernelScope scope(op, device);
    body();
  });
}

namespace {
thread_local int t_capture = 0;

// (X2) The one place every mutation passes while capturing.
void check_not_frozen(const OpInfo& info, std::span<const Value> args) {
  const Tensor& self = std::get<Tensor>(args[info.schema.mutated_arg]);
  const auto& by = self.storage()->frozen_by;
  if (!by) return;
  fail(ErrorKind::frozen_mutation,
       "[{}] cannot mutate the result of {} (or a view of it) in a captured program: whether "
       "a device-preserving to() aliases its input depends on the device the program runs on. "
       "Use clone() on it, or to(..., copy=true), before mutating",
       info.name, *by);
}
}  // namespace

namespace {
// The joined path, kept as scopes open and close; each scope remembers where its part
// began, so closing one truncates.
thread_local std::string t_scope_path;
}  // namespace

ScopeName::ScopeName(std::string name) : mark_(t_scope_path.size()) {
  if (!t_scope_path.empty()) t_scope_path += '.';
  t_scope_path += name;
}
ScopeName::~ScopeName() { t_scope_path.resize(mark_); }
const std::string& current_scope() { return t_scope_path; }

CaptureScope::CaptureScope() { ++t_capture; }
CaptureScope::~CaptureScope() { --t_capture; }
bool CaptureScope::active() { return t_capture > 0; }

void freeze(const Tensor& t, std::string by) {
  t.storage()->frozen_by = std::make_shared<const std::string>(std::move(by));
}

namespace autograd::detail {
namespace {
thread_local bool t_grad_enabled = true;
}  // namespace
bool grad_mode() { return t_grad_enabled; }
void set_grad_mode(bool on) { t_grad_enabled = on; }
}  // namespace autograd::detail

namespace {
std::atomic<const AutogradLayer*> g_autograd_layer{nullptr};

// Whether a call records a node: grad mode is on and a tensor argument requires grad.
bool should_record(std::span<const Value> args) {
  if (!autograd::detail::t_grad_enabled) return false;
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v)) {
      if (autograd::detail::wants_grad(*t)) return true;
    } else if (auto* list = std::get_if<TensorList>(&v)) {
      for (const Tensor& x : *list)
        if (autograd::detail::wants_grad(x)) return true;
    }
  }
  return false;
}

// (G6) As PyTorch: an inference tensor has no version counter to bump, so autograd
// could not tell a saved copy was overwritten.
void check_inference_write(OpKind op, std::span<const Value> args) {
  const OpInfo& info = ops::op_info(op);
  const Tensor& self = std::get<Tensor>(args[static_cast<size_t>(info.schema.mutated_arg)]);
  KILN_CHECK(!self.is_inference() || inference_mode(), value,
             "[{}] Inplace update to inference tensor outside InferenceMode is not allowed ({}). "
             "You can make a "
             "clone to get a normal tensor before doing inplace update",
             info.name, self.meta_str());
}
}  // namespace

void set_autograd_layer(const AutogradLayer* layer) {
  g_autograd_layer.store(layer, std::memory_order_release);
}

void bump_version(OpKind op, std::span<const Value> args) {
  if (inference_mode()) return;
  ++std::get<Tensor>(args[ops::op_info(op).schema.mutated_arg]).storage()->version;
}

namespace {
std::atomic<const DTensorLayer*> g_dtensor_layer{nullptr};

bool any_dtensor(std::span<const Value> args) {
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v)) {
      if (t->defined() && t->is_dtensor()) return true;
    } else if (auto* list = std::get_if<TensorList>(&v)) {
      for (const Tensor& x : *list)
        if (x.defined() && x.is_dtensor()) return true;
    }
  }
  return false;
}
}  // namespace

namespace {
// An extension op that writes several arguments (Note [Extension ops that write several
// arguments] in kiln/dispatch/library.cpp): its kernel in place when nothing above the
// kernels watches, otherwise its functional twin and a copy_ into each written argument.
Outputs dispatch_writes_several(const ops::ExtensionOp& e, std::span<const Value> args) {
  const OpInfo& info = e.info;
  for (int w : info.schema.written_args) {
    const Tensor& arg = std::get<Tensor>(args[static_cast<size_t>(w)]);
    KILN_CHECK(!arg.is_inference() || inference_mode(), value,
               "[{}] Inplace update to inference tensor outside InferenceMode is not allowed "
               "(argument '{}': {})",
               info.name, info.schema.args[static_cast<size_t>(w)].name, arg.meta_str());
    KILN_CHECK(!autograd::detail::wants_grad(arg), unsupported,
               "[{}] writes argument '{}', which requires grad: an op that writes several "
               "arguments has no backward (call it under no_grad, or on a tensor that does "
               "not require grad)",
               info.name, info.schema.args[static_cast<size_t>(w)].name);
  }
  // Two written arguments over the same memory would be written in an order only the
  // kernel knows (and the twin's write-backs would disagree with it): refused, as torch's
  // custom ops refuse mutable arguments that alias. Disjoint views of one tensor (two
  // halves, two strided columns) are fine.
  const auto& w = info.schema.written_args;
  for (size_t i = 0; i < w.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const Tensor &a = std::get<Tensor>(args[static_cast<size_t>(w[i])]),
                   &b = std::get<Tensor>(args[static_cast<size_t>(w[j])]);
      KILN_CHECK(!shares_elements(a, b), value,
                 "[{}] writes arguments '{}' and '{}', which overlap in memory; pass separate "
                 "tensors",
                 info.name, info.schema.args[static_cast<size_t>(w[j])].name,
                 info.schema.args[static_cast<size_t>(w[i])].name);
    }
  bool watched = t_depth != 0 || should_record(args) ||
                 (g_dtensor_layer.load(std::memory_order_relaxed) && any_dtensor(args));
  if (!watched) {
    Outputs outs = dispatch_eager(info.kind, args);
    if (!inference_mode())
      for (int w : info.schema.written_args)
        ++std::get<Tensor>(args[static_cast<size_t>(w)]).storage()->version;
    return outs;
  }
  Outputs twin = dispatch(*e.auto_functional, args);
  auto own = static_cast<size_t>(info.schema.num_outputs);
  for (size_t k = 0; k < info.schema.written_args.size(); ++k) {
    Value copy_args[3] = {args[static_cast<size_t>(info.schema.written_args[k])], twin[own + k],
                          false};
    dispatch(OpKind::copy_, copy_args);
  }
  Outputs outs;
  for (size_t i = 0; i < own; ++i) outs.push_back(twin[i]);
  return outs;
}
}  // namespace

Outputs dispatch(OpKind op, std::span<const Value> args) {
  if (!ops::is_builtin(op)) [[unlikely]]
    if (const ops::ExtensionOp* e = ops::extension_op(op); e->info.schema.written_args.size() > 1)
      return dispatch_writes_several(*e, args);
  // The user's call (not a mode's re-dispatch): autograd's turn first. See Note
  // [Autograd sits above the modes]. A tensor that requires grad was made by autograd,
  // so its layer is installed whenever should_record holds.
  if (t_depth == t_pushed) [[likely]] {
    bool inplace = ops::op_is_inplace(op);
    if (inplace) check_inference_write(op, args);
    if (should_record(args))
      return g_autograd_layer.load(std::memory_order_relaxed)->record(op, args);
    if (inplace) bump_version(op, args);
  }
  return redispatch(op, args);
}

void set_dtensor_layer(const DTensorLayer* layer) { g_dtensor_layer.store(layer); }

Tensor subclass_inner(const Tensor& t) {
  if (!t.defined() || !t.is_dtensor()) return t;
  return g_dtensor_layer.load()->inner(t);
}

Tensor subclass_rewrap(const Tensor& like, const Tensor& inner) {
  if (!like.defined() || !like.is_dtensor()) return inner;
  return g_dtensor_layer.load()->rewrap(like, inner);
}

Tensor subclass_rewrap_gradient(const Tensor& like, const Tensor& inner) {
  if (!like.defined() || !like.is_dtensor()) return inner;
  return g_dtensor_layer.load()->rewrap_gradient(like, inner);
}

Tensor subclass_like(const Tensor& like, const Tensor& t) {
  if (!like.defined() || !like.is_dtensor() || !t.defined() || t.is_dtensor()) [[likely]]
    return t;
  return g_dtensor_layer.load()->distribute_like(like, t);
}

Outputs redispatch(OpKind op, std::span<const Value> args) {
  // (S2) Distributed tensors first: their layer runs the op on the local shards.
  if (const DTensorLayer* layer = g_dtensor_layer.load(std::memory_order_relaxed)) [[unlikely]]
    if (any_dtensor(args)) return layer->handle(op, args);
  if (t_capture) {
    const OpInfo& info = ops::op_info(op);
    if (info.is_inplace()) check_not_frozen(info, args);
  }
  if (t_depth == 0) return dispatch_eager(op, args);
  Mode* mode = t_modes[t_depth - 1];
  PopMode pop;
  return mode->handle(op, args);
}

Tensor lift_literal(const Tensor& literal) {
  if (t_depth == 0) return literal;
  Mode* mode = t_modes[t_depth - 1];
  PopMode pop;
  return mode->lift(literal);
}

Tensor Mode::lift(const Tensor& literal) { return lift_literal(literal); }

void alias_to_modes(const Tensor& alias, const Tensor& of) {
  if (t_depth == 0) return;
  Mode* mode = t_modes[t_depth - 1];
  PopMode pop;
  mode->alias(alias, of);
}

void Mode::alias(const Tensor& alias, const Tensor& of) { alias_to_modes(alias, of); }

bool Mode::only_propagates(std::span<const Value>) const { return false; }

}  // namespace kiln
