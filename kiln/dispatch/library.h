#pragma once
// Defining ops outside kiln (in the spirit of torch.library): a kernel library names
// its op with a namespaced schema, gives a meta function and kernels per backend, and
// from then on the op goes through the same dispatch as the built-in table (E1):
// device fold (D2), the kernel's device guard (D3), its device's current stream (D4),
// pooled BLAS handles (D5), the checker (D8), fake tensors, make_fx,
// functionalization (E2), export, the executor, `kiln show` (E3).
//
//   void gated_mlp_meta(const ops::OpCall& call, ops::MetaOut& out);       // shapes only
//   void gated_mlp_cpu(const ops::OpCall& call, std::span<Tensor> outs);   // the work
//   const ops::OpKind kGatedMlp = define_op({
//       .schema = "kx::gated_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, "
//                 "Tensor workspace) -> Tensor",
//       .meta = gated_mlp_meta,
//       .library = "libkiln_gated_mlp.so",
//       .cpu = gated_mlp_cpu});
//   Tensor y = call_op(kGatedMlp, {x, wg, wu, wd, ws})[0];
//
// A kernel is called with its outputs allocated from the meta function's answer, on
// the op's device, inside a KernelScope: the device is current, current_stream(device)
// is where its work goes, and blas_handle(device) is the device's pooled handle. It
// must not keep state across calls that belongs to one device (a handle, a stream).
// See docs/extensions.md.

#include <initializer_list>
#include <string_view>

#include "kiln/device/blas.h"
#include "kiln/ops/extension.h"

namespace kiln {

/** Everything an extension op is made of. Fields left out keep their defaults. */
struct OpDefinition {
  /** "namespace::name(args) -> returns" with alias annotations: `Tensor(a!) self` is an
   * argument the op writes (and must return, as '-> Tensor(a!)'); an op that writes
   * several ('Tensor(a!) x, Tensor(b!) y') returns fresh tensors only, or '()'. */
  std::string_view schema;
  /** Output shapes and dtypes (what fake tensors and tracing use). May be null only for
   * an in-place op 'ns::op_' whose functional 'ns::op' is already registered: it is then
   * derived from the functional op as built-in in-place ops are. */
  ops::MetaFn meta = nullptr;
  /** What to load to get the op (a library file or project name): named when a program
   * that uses the op is loaded where it is missing. */
  std::string_view library;
  ops::DeviceRule device_rule = ops::DeviceRule::same;
  ops::Kernel cpu = nullptr;
  ops::Kernel cuda = nullptr;
  /** The backward formula, as the built-in derivative table's (kiln/autograd/function.h)
   * and the tensors it reads (bit i: argument i; autograd::kSavesResult: the outputs).
   * Without one, the op fails when an argument requires grad, unless it is declared
   * not differentiable (its outputs then never require grad, like argmax's). */
  ops::GradFormula backward = nullptr;
  uint32_t backward_saves = 0;
  bool differentiable = true;
};

/** Registers an op; returns its kind, valid for the life of the process. Throws a value
 * Error naming the op for a malformed or taken name, or a schema kiln cannot run. */
ops::OpKind define_op(const OpDefinition& def);

/** (E4) Registration in steps, as torch.library: the schema first (the op exists and
 * programs can name it), then each piece when its code is ready. Calling it before its
 * fake function exists is an unsupported Error at once (fake and eager calls alike: kiln
 * computes every call's outputs from it); before a kernel for the device, at the call;
 * without a backward, at backward() (a warning at the forward). Each piece may be given
 * once. */
ops::OpKind define_schema(std::string_view schema, std::string_view library = {},
                          ops::DeviceRule device_rule = ops::DeviceRule::same);
void register_fake(ops::OpKind op, ops::MetaFn meta);
void register_kernel(ops::OpKind op, DeviceType type, ops::Kernel kernel);
/** `saves` as OpDefinition::backward_saves; `differentiable = false` declares that its
 * outputs never require grad instead. */
void register_backward(ops::OpKind op, ops::GradFormula formula, uint32_t saves = 0);

/** Calls any op (built-in or registered) through dispatch. */
Outputs call_op(ops::OpKind op, std::initializer_list<Value> args);

/** c = alpha * a @ b + beta * c for 2-D f32/f64 tensors on `handle`'s device, through
 * the backend's BLAS (OpenBLAS, cuBLAS) with `handle` (D5). Inside a kernel the handle
 * must belong to the kernel's device (D8): pass blas_handle(call.device). */
void gemm(const BlasHandle& handle, const Tensor& a, const Tensor& b, const Tensor& c,
          double alpha = 1.0, double beta = 0.0);

}  // namespace kiln
