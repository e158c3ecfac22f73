#pragma once
// kx: a sample kernel library for kiln. One fused op, kx::gated_mlp, the feed-forward
// block of Llama-style transformers:
//
//   out = (silu(x @ w_gate^T) * (x @ w_up^T)) @ w_down^T
//
// Its kernels need scratch memory for the two [rows, hidden] intermediates (a
// workspace the module owns as a non-persistent buffer) and three GEMMs: the shape of
// the multi-device bugs kiln was founded on. Registering the op is all it takes to get
// the device discipline right (see README.md next to this file).

#include <kiln/kiln.h>

namespace kx {

/** Registers the library's ops with kiln (idempotent; the functions below call it).
 * Call it before loading a program that uses them. */
void register_ops();
/** The op's kind, registered on first use. */
kiln::ops::OpKind gated_mlp_op();

/** x [rows, dim], w_gate and w_up [hidden, dim], w_down [out, hidden], workspace f32
 * with at least 2 * rows * hidden elements -> [rows, out]. All f32, on one device. */
kiln::Tensor gated_mlp(const kiln::Tensor& x, const kiln::Tensor& w_gate, const kiln::Tensor& w_up,
                       const kiln::Tensor& w_down, const kiln::Tensor& workspace);

/** The module: three weights and a workspace sized for `max_rows` rows (D6: it follows
 * the module through `to`, is never saved, and programs re-create it where they run). */
class GatedMLP : public kiln::nn::Module {
 public:
  GatedMLP(int64_t dim, int64_t hidden, int64_t out, int64_t max_rows, kiln::Device device);
  kiln::TensorList forward(const kiln::TensorList& inputs) override;

  kiln::Tensor& w_gate;
  kiln::Tensor& w_up;
  kiln::Tensor& w_down;
  kiln::Tensor& workspace;
};

namespace detail {
/** The CPU kernel with what it takes from its context made explicit: the BLAS handle of
 * its GEMMs and the stream of its elementwise step. The registered kernel passes
 * blas_handle(call.device) and current_stream(call.device); mistakes.cpp passes wrong
 * ones, the way multi-device bugs do, to show kiln stopping each. */
void gated_mlp_cpu(const kiln::ops::OpCall& call, std::span<kiln::Tensor> outs,
                   const kiln::BlasHandle& blas, const kiln::Stream& stream);
}  // namespace detail

}  // namespace kx
