#include "kiln/dispatch/library.h"

#include <functional>

#include "kiln/backend/cpu/kernels.h"
#if KILN_WITH_CUDA
#include "kiln/backend/cuda/kernels.h"
#endif
#include "kiln/device/kernel_scope.h"
#include "kiln/dispatch/dispatch.h"

namespace kiln {

// Note [Auto-functionalized extension ops]
// An extension op that writes an argument in place and has no functional form ('ns::op_'
// with a meta function of its own, or registered in steps) gets a functional twin when it
// is registered: 'ns::auto_functionalized_op_', the same arguments with the written one
// read-only, returning its new value. The twin's meta function runs the in-place op's
// (the same checks) and answers a fresh tensor like the written argument; its kernel
// copies that argument into the fresh tensor and runs the in-place op's kernel on the
// copy. Functionalization captures the in-place op as the twin plus a write-back of the
// argument, so a captured program stays functional -- what PyTorch's auto_functionalized
// higher-order op does. A program names the twin like any extension op; loading it needs
// the library that registers the in-place op, which brings the twin. The twin has no
// gradient of its own: autograd records the in-place op, above functionalization.
//
// Note [Extension ops that write several arguments]
// PyTorch's custom ops may mutate several arguments ('kx::op(Tensor(a!) x, Tensor(b!) y)
// -> ()'); kiln's table, like its built-ins, knows only in-place ops that write one
// argument and return it. Such an op is therefore no in-place op to the table
// (mutated_arg -1, its returns fresh tensors) and gets a twin as above: the same
// arguments read-only, returning the op's own results and then one new value per written
// argument, in argument order (the order of PyTorch's auto_functionalized). dispatch()
// runs the op as that twin followed by a copy_ into each written argument whenever
// anything above the kernels watches -- a mode (fake, tracing, functionalization), a
// DTensor, autograd -- so every layer sees functional ops and ordinary writes, and a
// captured program is functional. A plain eager call runs the kernel on the arguments
// directly (no copies) and bumps their versions. Autograd cannot see into the kernel: a
// written argument that requires grad is refused by name.
namespace {

ops::OpKind twin_target(ops::OpKind twin) { return *ops::extension_op(twin)->functionalizes; }

ops::Kernel copy_kernel(DeviceType type) {
  const ops::KernelTable* table = kernel_table(type);
  return table ? (*table)[static_cast<size_t>(ops::OpKind::copy_)] : nullptr;
}

// The arguments the twin returns new values of: the in-place op's one, or every one.
std::vector<int> written(const ops::OpInfo& info) {
  if (info.is_inplace()) return {info.schema.mutated_arg};
  return info.schema.written_args;
}

// How many of the twin's outputs come before the written arguments' new values.
size_t own_outputs(const ops::OpInfo& info) {
  return info.is_inplace() ? 0 : static_cast<size_t>(info.schema.num_outputs);
}

void twin_meta(const ops::OpCall& c, ops::MetaOut& out) {
  const ops::OpInfo& info = ops::op_info(twin_target(c.op));
  KILN_CHECK(info.meta, unsupported,
             "[{}] has no fake (meta) function yet: register_fake({}, ...) before calling it",
             info.name, info.name);
  ops::MetaOut own;  // the op's own checks of its arguments, and its own results
  info.meta(ops::OpCall{info.kind, c.args, c.device}, own);
  for (size_t i = 0; i < own_outputs(info); ++i) out.outs.push_back(own.outs[i]);
  for (int w : written(info)) {
    const Tensor& arg = c.args.tensor(static_cast<size_t>(w));
    out.fresh(arg.shape(), arg.dtype());
  }
}

void twin_kernel(const ops::OpCall& c, std::span<Tensor> outs) {
  const ops::OpInfo& info = ops::op_info(twin_target(c.op));
  ops::Kernel kernel = ops::extension_kernel(info.kind, c.device.type);
  KILN_CHECK(kernel, unsupported, "[{}] has no kernel for device {}", info.name, c.device);
  std::vector<Value> args;
  for (size_t i = 0; i < c.args.size(); ++i) args.push_back(c.args[i]);
  size_t own = own_outputs(info), slot = own;
  for (int w : written(info)) {  // the kernel writes copies, the twin's outputs
    Value copy_args[3] = {outs[slot], c.args[static_cast<size_t>(w)], false};
    copy_kernel(c.device.type)(
        ops::OpCall{ops::OpKind::copy_, std::span<const Value>(copy_args), c.device},
        outs.subspan(slot, 1));
    args[static_cast<size_t>(w)] = outs[slot++];
  }
  std::span<Tensor> kernel_outs = info.is_inplace() ? outs.first(1) : outs.first(own);
  kernel(ops::OpCall{info.kind, std::span<const Value>(args), c.device}, kernel_outs);
}

// The twin's returns: the op's own (none for an in-place op), then the written values.
std::string twin_returns(const ops::ExtensionOp& e) {
  std::vector<std::string> parts;
  if (!e.info.is_inplace())
    for (int i = 0; i < e.info.schema.num_outputs; ++i) parts.push_back("Tensor");
  for (size_t i = 0; i < written(e.info).size(); ++i) parts.push_back("Tensor");
  return parts.size() == 1 ? parts[0] : fmt::format("({})", fmt::join(parts, ", "));
}

// Registers `op`'s twin when it writes an argument and has no functional form.
void add_twin(ops::OpKind op, std::string_view who) {
  const ops::ExtensionOp& e = *ops::extension_op(op);
  bool several = e.info.schema.written_args.size() > 1;
  if (!several && (!e.info.is_inplace() || e.info.functional != op)) return;
  std::string schema = e.schema_text.substr(0, e.schema_text.find("->"));
  schema.insert(schema.find("::") + 2, "auto_functionalized_");
  for (size_t at; (at = schema.find("!)")) != std::string::npos;) {
    size_t open = schema.rfind('(', at);
    schema.erase(open, at + 2 - open);
  }
  schema += "-> " + twin_returns(e);
  ops::ExtensionOp twin;
  twin.schema_text = ops::canonical_schema(schema);
  try {
    twin.info.schema = ops::parse_schema(twin.schema_text);
  } catch (const Error& err) {
    fail(ErrorKind::value, "[{}] {}'s functional twin: {}", who, e.name, err.what());
  }
  twin.info.device_rule = e.info.device_rule;
  twin.info.meta = twin_meta;
  twin.library = e.library;
  for (DeviceType type : {DeviceType::cpu, DeviceType::cuda})
    if (copy_kernel(type)) twin.kernels[static_cast<size_t>(type)] = twin_kernel;
  // An in-place op's autograd records the op itself, above functionalization; an op that
  // writes several arguments is recorded as its twin, which then has the op's standing: no
  // formula, so a warning at the call and an error at backward() unless it was declared
  // not differentiable.
  twin.grad = several ? e.grad : ops::ExtensionOp::Grad::none;
  twin.functionalizes = op;
  ops::OpKind t = ops::register_extension(std::move(twin));
  ops::update_extension(op, [&](ops::ExtensionOp& x) { x.auto_functional = t; });
}

}  // namespace

ops::OpKind define_op(const OpDefinition& def) {
  ops::ExtensionOp op;
  op.schema_text = ops::canonical_schema(def.schema);
  try {
    op.info.schema = ops::parse_schema(op.schema_text);
  } catch (const Error& e) {  // the parser's errors are internal for the built-in table
    fail(ErrorKind::value, "[define_op] {}", e.what());
  }
  op.info.device_rule = def.device_rule;
  op.info.meta = def.meta;
  op.library = def.library;
  op.kernels[static_cast<size_t>(DeviceType::cpu)] = def.cpu;
  op.kernels[static_cast<size_t>(DeviceType::cuda)] = def.cuda;
  using Grad = ops::ExtensionOp::Grad;
  KILN_CHECK(!def.backward || op.info.schema.written_args.size() < 2, unsupported,
             "[define_op] {} writes several arguments: kiln has no backward formulas for such "
             "ops (yet)",
             op.info.schema.name);
  op.grad = !def.differentiable ? Grad::none : def.backward ? Grad::formula : Grad::missing;
  op.grad_saves = def.backward_saves;
  op.grad_formula = def.backward;
  ops::OpKind kind = ops::register_extension(std::move(op));
  add_twin(kind, "define_op");
  return kind;
}

ops::OpKind define_schema(std::string_view schema, std::string_view library,
                          ops::DeviceRule device_rule) {
  ops::ExtensionOp op;
  op.schema_text = ops::canonical_schema(schema);
  try {
    op.info.schema = ops::parse_schema(op.schema_text);
  } catch (const Error& e) {
    fail(ErrorKind::value, "[define_schema] {}", e.what());
  }
  op.info.device_rule = device_rule;
  op.library = library;
  op.staged = true;
  ops::OpKind kind = ops::register_extension(std::move(op));
  add_twin(kind, "define_schema");
  return kind;
}

namespace {
// One later step of `op`'s registration; `what` names it in errors.
void step(ops::OpKind op, std::string_view what,
          const std::function<void(ops::ExtensionOp&)>& change) {
  KILN_CHECK(ops::extension_op(op), value,
             "[{}] {} is a built-in op: only extension ops are registered in steps", what,
             ops::op_name(op));
  ops::update_extension(op, change);
}
}  // namespace

void register_fake(ops::OpKind op, ops::MetaFn meta) {
  KILN_CHECK(meta, value, "[register_fake] a null meta function");
  step(op, "register_fake", [&](ops::ExtensionOp& e) {
    KILN_CHECK(!e.info.meta, value, "[register_fake] {} has a fake (meta) function already",
               e.name);
    e.info.meta = meta;
  });
}

void register_kernel(ops::OpKind op, DeviceType type, ops::Kernel kernel) {
  KILN_CHECK(kernel && type != DeviceType::meta, value,
             "[register_kernel] a kernel for cpu or cuda");
  step(op, "register_kernel", [&](ops::ExtensionOp& e) {
    auto& slot = e.kernels[static_cast<size_t>(type)];
    KILN_CHECK(!slot, value, "[register_kernel] {} has a {} kernel already", e.name,
               to_string(type));
    slot = kernel;
  });
}

void register_backward(ops::OpKind op, ops::GradFormula formula, uint32_t saves) {
  KILN_CHECK(formula, value, "[register_backward] a null formula");
  step(op, "register_backward", [&](ops::ExtensionOp& e) {
    KILN_CHECK(e.grad != ops::ExtensionOp::Grad::formula, value,
               "[register_backward] {} has a backward already", e.name);
    KILN_CHECK(e.info.schema.written_args.size() < 2, unsupported,
               "[register_backward] {} writes several arguments: kiln has no backward formulas "
               "for such ops (yet)",
               e.name);
    e.grad = ops::ExtensionOp::Grad::formula;
    e.grad_formula = formula;
    e.grad_saves = saves;
  });
}

Outputs call_op(ops::OpKind op, std::initializer_list<Value> args) {
  return dispatch(op, std::span<const Value>(args.begin(), args.size()));
}

void gemm(const BlasHandle& handle, const Tensor& a, const Tensor& b, const Tensor& c, double alpha,
          double beta) {
  handle.begin_use();  // (D8) inside a kernel: the kernel's device's handle only
  Device d = handle.device();
  for (const auto& [t, name] : {std::pair{&a, "a"}, {&b, "b"}, {&c, "c"}})
    KILN_CHECK(t->device() == d, device_mismatch,
               "[gemm] argument '{}' is on {} but the BLAS handle belongs to {}", name, t->device(),
               d);
  KILN_CHECK(a.dim() == 2 && b.dim() == 2 && c.dim() == 2 && a.shape()[1] == b.shape()[0] &&
                 c.shape()[0] == a.shape()[0] && c.shape()[1] == b.shape()[1],
             shape, "[gemm] expected a [m, k], b [k, n] and c [m, n], got {}, {} and {}",
             a.shape().str(), b.shape().str(), c.shape().str());
  KILN_CHECK(a.dtype() == c.dtype() && b.dtype() == c.dtype() &&
                 (c.dtype() == DType::f32 || c.dtype() == DType::f64),
             dtype, "[gemm] expected f32 or f64 operands of one dtype, got {}, {} and {}",
             a.dtype(), b.dtype(), c.dtype());
  KILN_CHECK(c.strides()[1] == 1 || c.shape()[1] <= 1, value, "[gemm] c's rows must be contiguous");
  DeviceGuard guard(d);  // outside a kernel too, the handle's device is the one used
  switch (d.type) {
    case DeviceType::cpu: return cpu::gemm(a, b, c, alpha, beta);
#if KILN_WITH_CUDA
    case DeviceType::cuda: {
      KILN_CHECK(c.is_contiguous(), value, "[gemm] c must be contiguous on cuda");
      auto batch1 = [](const Tensor& t) {
        return make_view(t, Dims{1, t.shape()[0], t.shape()[1]},
                         Dims{0, t.strides()[0], t.strides()[1]}, t.offset());
      };
      return cuda::gemm(batch1(a), batch1(b), batch1(c), alpha, beta);
    }
#endif
    default: fail(ErrorKind::unsupported, "[gemm] no BLAS for {} in this build", d);
  }
}

}  // namespace kiln
