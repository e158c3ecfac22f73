#pragma once
// torch.linalg's factorizations and solvers for square (batched) matrices [..., n, n],
// written with table ops: LU with partial pivoting, Cholesky and Householder QR are
// loops of O(n) steps over whole batches, each step a few ops (so they differentiate,
// trace and export as those ops do; a traced program unrolls the loop for its n). Meant
// for the small and medium matrices of model code, not for LAPACK-sized work. Results
// follow LAPACK's conventions (pivot choice, the signs of QR's R), as PyTorch's do.

#include <string>
#include <utility>

#include "kiln/dispatch/functional.h"

namespace kiln::linalg {

/** (LU, pivots): L (unit lower, below the diagonal) and U (upper) in one matrix, and the
 * 1-based row swapped with row i at step i (i32), as torch.linalg.lu_factor. */
std::pair<Tensor, Tensor> lu_factor(const Tensor& a);
/** (P, L, U) with a = P L U. */
std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& a);
Tensor det(const Tensor& a);
/** (sign, log|det|); a singular matrix gives (0, -inf). */
std::pair<Tensor, Tensor> slogdet(const Tensor& a);
/** The inverse; a singular matrix is a value Error (eager; traced code gives inf/NaN). */
Tensor inv(const Tensor& a);
/** x with a x = b: b [..., n] (a batch of vectors, when b.dim() == a.dim() - 1) or
 * [..., n, k]; batch dims broadcast. A singular a is a value Error (eager). */
Tensor solve(const Tensor& a, const Tensor& b);
/** x with a x = b (left) or x a = b for triangular a (only its upper or lower triangle is
 * read; unitriangular: its diagonal is taken as ones). */
Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left = true, bool unitriangular = false);
/** L (lower) with a = L L^T, or U = L^T with upper; a matrix that is not positive
 * definite is a value Error (eager). */
Tensor cholesky(const Tensor& a, bool upper = false);
/** (Q, R) of [..., m, n]: mode "reduced" (Q [m, k], R [k, n], k = min(m, n)),
 * "complete" (Q [m, m], R [m, n]) or "r" (R only; Q undefined). */
std::pair<Tensor, Tensor> qr(const Tensor& a, const std::string& mode = "reduced");
/** a^n by repeated squaring (n < 0: of the inverse; n == 0: the identity). */
Tensor matrix_power(const Tensor& a, int64_t n);
/** "fro", 1, -1, inf, -inf norms over the last two dims (ord as a string: "fro", "1",
 * "-1", "inf", "-inf"). */
Tensor matrix_norm(const Tensor& a, const std::string& ord = "fro", bool keepdim = false);
/** The product of the matrices, left to right (1-D first / last: a row / column). */
Tensor multi_dot(const TensorList& tensors);
/** sum(x * y) over dim. */
Tensor vecdot(const Tensor& x, const Tensor& y, int64_t dim = -1);

}  // namespace kiln::linalg

namespace kiln {
/** torch.det, torch.logdet (NaN for a negative determinant), torch.inverse. */
Tensor det(const Tensor& a);
Tensor logdet(const Tensor& a);
Tensor inverse(const Tensor& a);
Tensor matrix_power(const Tensor& a, int64_t n);
}  // namespace kiln
