#include "kiln/dispatch/library.h"

#include <functional>

#include "kiln/backend/cpu/kernels.h"
#if KILN_WITH_CUDA
#include "kiln/backend/cuda/kernels.h"
#endif
#include "kiln/device/kernel_scope.h"
#include "kiln/dispatch/dispatch.h"

namespace kiln {

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
  op.grad = !def.differentiable ? Grad::none : def.backward ? Grad::formula : Grad::missing;
  op.grad_saves = def.backward_saves;
  op.grad_formula = def.backward;
  return ops::register_extension(std::move(op));
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
  return ops::register_extension(std::move(op));
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
