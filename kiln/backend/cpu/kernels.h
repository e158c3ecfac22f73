#pragma once
// The CPU backend's kernels and its kernel table.

#include "kiln/backend/shared.h"
#include "kiln/ops/op_table.h"

namespace kiln::cpu {

/** The CPU kernel of every op that has one; null entries are unsupported. */
const ops::KernelTable& kernels();

KILN_KERNELS(KILN_DECLARE_KERNEL)

/** c = beta * c + alpha * a @ b for 2-D tensors on the current device, c's rows
 * contiguous (what mm/addmm/linear and extension kernels call, kiln::gemm), plus `bias`
 * ([m], optional; only with beta = 0) on every row of c. */
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta,
          const Tensor& bias = Tensor());

/** out = relu?(x @ w^T + bias) + residual? (linear with a product epilogue: ReLU, then a
 * residual of out's shape, done before the product's tiles are written), f32 through
 * oneDNN; false, with nothing written, for a product oneDNN does not run (the caller runs
 * the ops one by one). */
bool linear_with_epilogue(const Tensor& x, const Tensor& w, const Tensor& bias, bool relu,
                          const Tensor& residual, const Tensor& out);

/** Which library f32 products use (Note [oneDNN for f32 GEMM]): automatic (oneDNN
 * above a size, OpenBLAS below), or one of them for everything. KILN_GEMM=openblas or
 * =onednn sets the initial choice. */
enum class GemmLibrary { automatic, openblas, onednn };
void set_gemm_library(GemmLibrary library);
GemmLibrary gemm_library();
/** A value Error when KILN_GEMM is malformed or names a library this build lacks. */
void check_gemm_environment();

}  // namespace kiln::cpu
