#include "gated_mlp.h"

#include <cmath>

namespace kx {

using namespace kiln;

namespace {

// Shapes and dtypes only: what fake tensors, tracing and the executor's memory plan
// see. Every error names the op and the argument.
void gated_mlp_meta(const ops::OpCall& call, ops::MetaOut& out) {
  const Args& a = call.args;
  const Tensor &x = a.tensor(0), &w_gate = a.tensor(1), &w_up = a.tensor(2), &w_down = a.tensor(3),
               &ws = a.tensor(4);
  for (size_t i = 0; i < 5; ++i)
    KILN_CHECK(a.tensor(i).dtype() == DType::f32, dtype,
               "[kx::gated_mlp] argument {} must be f32, got {}", i, a.tensor(i).dtype());
  KILN_CHECK(x.dim() == 2 && w_gate.dim() == 2 && w_up.dim() == 2 && w_down.dim() == 2, shape,
             "[kx::gated_mlp] expected 2-D x and weights, got x {}, w_gate {}, w_up {}, w_down {}",
             x.shape().str(), w_gate.shape().str(), w_up.shape().str(), w_down.shape().str());
  int64_t rows = x.shape()[0], dim = x.shape()[1], hidden = w_gate.shape()[0];
  KILN_CHECK(
      w_gate.shape()[1] == dim && w_up.shape() == w_gate.shape() && w_down.shape()[1] == hidden,
      shape, "[kx::gated_mlp] weights do not fit x {}: w_gate {}, w_up {}, w_down {}",
      x.shape().str(), w_gate.shape().str(), w_up.shape().str(), w_down.shape().str());
  KILN_CHECK(ws.numel() >= 2 * rows * hidden, shape,
             "[kx::gated_mlp] the workspace holds {} elements; {} rows need {}", ws.numel(), rows,
             2 * rows * hidden);
  out.fresh(Dims{rows, w_down.shape()[0]}, DType::f32);
}

// `t` ([r, c], any strides) transposed, as a view: what gemm reads as w^T.
Tensor t_view(const Tensor& t) {
  return make_view(t, Dims{t.shape()[1], t.shape()[0]}, Dims{t.strides()[1], t.strides()[0]},
                   t.offset());
}

// The CPU kernel. It runs under kiln's KernelScope for the op's device: that device is
// current, blas_handle(call.device) is its pooled handle bound to its current stream,
// and current_stream(call.device) is where its work goes (D3-D5). Nothing here is
// global or tied to one device.
void gated_mlp_cpu(const ops::OpCall& call, std::span<Tensor> outs) {
  detail::gated_mlp_cpu(call, outs, blas_handle(call.device), current_stream(call.device));
}

// d/dx of silu(g) * u and the three weight gradients, in kiln ops (so a captured
// training step records them like any backward).
void gated_mlp_backward(autograd::GradCtx& c) {
  const Tensor &x = c.t(0), &w_gate = c.t(1), &w_up = c.t(2), &w_down = c.t(3);
  Tensor g = matmul(x, t(w_gate)), u = matmul(x, t(w_up));
  Tensor s = sigmoid(g), act = g * s, h = act * u;
  const Tensor& d_out = c.grad();
  Tensor d_h = matmul(d_out, w_down);
  Tensor d_u = d_h * act;
  Tensor d_g = d_h * u * (s * (1.0 + g * (1.0 - s)));
  c.set(0, matmul(d_g, w_gate) + matmul(d_u, w_up));
  c.set(1, matmul(t(d_g), x));
  c.set(2, matmul(t(d_u), x));
  c.set(3, matmul(t(d_out), h));
}

}  // namespace

void detail::gated_mlp_cpu(const ops::OpCall& call, std::span<Tensor> outs, const BlasHandle& blas,
                           const Stream& stream) {
  const Args& a = call.args;
  const Tensor &x = a.tensor(0), &ws = a.tensor(4);
  int64_t rows = x.shape()[0], hidden = a.tensor(1).shape()[0];
  Tensor g = make_view(ws, Dims{rows, hidden}, Dims{hidden, 1}, ws.offset());
  Tensor u = make_view(ws, Dims{rows, hidden}, Dims{hidden, 1}, ws.offset() + rows * hidden);
  gemm(blas, x, t_view(a.tensor(1)), g);
  gemm(blas, x, t_view(a.tensor(2)), u);
  // Inside a CPU kernel the kernel's own stream runs work inline (the kernel already is
  // that stream's work); any other device's stream is a D8 error.
  stream.enqueue([n = rows * hidden, pg = g.data<float>(), pu = u.data<float>()] {
    for (int64_t i = 0; i < n; ++i) pg[i] = pg[i] / (1.0f + std::exp(-pg[i])) * pu[i];
  });
  gemm(blas, g, t_view(a.tensor(3)), outs[0]);
}

#if KX_WITH_CUDA
int launch_silu_mul(float* g, const float* u, int64_t n, void* stream);  // silu_mul.cu

namespace {
// The CUDA kernel: the same three GEMMs through the device's pooled cuBLAS handle, the
// elementwise part on the device's current stream (never the default stream of device 0).
void gated_mlp_cuda(const ops::OpCall& call, std::span<Tensor> outs) {
  const Args& a = call.args;
  const Tensor &x = a.tensor(0), &ws = a.tensor(4);
  int64_t rows = x.shape()[0], hidden = a.tensor(1).shape()[0];
  Tensor g = make_view(ws, Dims{rows, hidden}, Dims{hidden, 1}, ws.offset());
  Tensor u = make_view(ws, Dims{rows, hidden}, Dims{hidden, 1}, ws.offset() + rows * hidden);
  const BlasHandle& blas = blas_handle(call.device);
  gemm(blas, x, t_view(a.tensor(1)), g);
  gemm(blas, x, t_view(a.tensor(2)), u);
  int err = launch_silu_mul(g.data<float>(), u.data<float>(), rows * hidden,
                            current_stream(call.device).native_handle());
  KILN_CHECK(err == 0, backend, "[kx::gated_mlp] CUDA launch failed on {}: error {}", call.device,
             err);
  gemm(blas, g, t_view(a.tensor(3)), outs[0]);
}
}  // namespace
#endif

ops::OpKind gated_mlp_op() {
  static const ops::OpKind kind = define_op({
    .schema =
        "kx::gated_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, Tensor workspace) -> "
        "Tensor",
    .meta = gated_mlp_meta, .library = "kx (examples/extension)", .cpu = gated_mlp_cpu,
#if KX_WITH_CUDA
    .cuda = gated_mlp_cuda,
#endif
    .backward = gated_mlp_backward,
    .backward_saves = 0b1111,  // x and the three weights; never the workspace
  });
  return kind;
}

void register_ops() { gated_mlp_op(); }

Tensor gated_mlp(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down,
                 const Tensor& workspace) {
  return call_op(gated_mlp_op(), {contiguous(x), w_gate, w_up, w_down, workspace})[0];
}

GatedMLP::GatedMLP(int64_t dim, int64_t hidden, int64_t out, int64_t max_rows, Device device)
    : w_gate(register_parameter("w_gate", randn({hidden, dim}, {.device = device}) * 0.2)),
      w_up(register_parameter("w_up", randn({hidden, dim}, {.device = device}) * 0.2)),
      w_down(register_parameter("w_down", randn({out, hidden}, {.device = device}) * 0.2)),
      workspace(register_workspace("workspace", {2 * max_rows * hidden}, DType::f32, device)) {}

TensorList GatedMLP::forward(const TensorList& inputs) {
  return {gated_mlp(inputs[0], w_gate, w_up, w_down, workspace)};
}

}  // namespace kx
