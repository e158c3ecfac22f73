#pragma once
// torch.linalg's factorizations and solvers for square (batched) matrices [..., n, n],
// written with table ops: LU with partial pivoting, Cholesky and Householder QR are
// loops of O(n) steps over whole batches, each step a few ops (so they differentiate,
// trace and export as those ops do; a traced program unrolls the loop for its n). Meant
// for the small and medium matrices of model code, not for LAPACK-sized work. Results
// follow LAPACK's conventions (pivot choice, the signs of QR's R), as PyTorch's do.

#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "kiln/api/functional.h"

namespace kiln::linalg {

/** (LU, pivots): L (unit lower, below the diagonal) and U (upper) in one matrix, and the
 * 1-based row swapped with row i at step i (i32), as torch.linalg.lu_factor. */
std::pair<Tensor, Tensor> lu_factor(const Tensor& a);
/** (P, L, U) with a = P L U. */
std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& a);
/** lu_factor with LAPACK's info ([...] i32): the 1-based index of the first zero pivot,
 * 0 when none; a singular matrix is an Error only when check_errors. */
std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& a, bool check_errors = false);
/** (P, L, U) from lu_factor's (LU, pivots), for [..., m, n] LU too (torch.lu_unpack). */
std::tuple<Tensor, Tensor, Tensor> lu_unpack(const Tensor& lu_data, const Tensor& pivots);
/** X with A X = B (left) or X A = B, of A^H when adjoint, from A's lu_factor. */
Tensor lu_solve(const Tensor& lu_data, const Tensor& pivots, const Tensor& b, bool left = true,
                bool adjoint = false);
/** cholesky / inv / solve with LAPACK's info instead of an Error ([...] i32: cholesky: the
 * order of the first leading minor that is not positive-definite; inv, solve: the first
 * zero pivot; 0 when none); check_errors raises as the plain functions do. */
std::pair<Tensor, Tensor> cholesky_ex(const Tensor& a, bool upper = false,
                                      bool check_errors = false);
std::pair<Tensor, Tensor> inv_ex(const Tensor& a, bool check_errors = false);
std::pair<Tensor, Tensor> solve_ex(const Tensor& a, const Tensor& b, bool left = true,
                                   bool check_errors = false);
/** The cross product along dim (-1), broadcasting (torch.linalg.cross; kiln::cross is the same). */
Tensor cross(const Tensor& a, const Tensor& b, int64_t dim = -1);
/** torch.linalg.vander: [..., n, N] of increasing powers x^0 ... x^(N-1) of x [..., n] (a
 * 0-dim x as [1]), N > 1 (default n); integers give i64, bools are refused. The powers
 * are running products, as PyTorch's (so x^0 has gradient 0 at x = 0). */
Tensor vander(const Tensor& x, std::optional<int64_t> n = std::nullopt);
/** The inverse of a as a tensor of the first `ind` dims by the rest: reshaped to the rest's
 * dims then the first ones (torch.linalg.tensorinv). */
Tensor tensorinv(const Tensor& a, int64_t ind = 2);
/** X with tensordot(A, X, X.dim()) = B; dims of A (when given) move to the end first. */
Tensor tensorsolve(const Tensor& a, const Tensor& b, std::optional<IntList> dims = std::nullopt);
/** The product H_0 ... H_{k-1} of the Householder reflectors I - tau_j v_j v_j^T whose
 * v_j (1 at j, zeros above) are a's columns below the diagonal: [..., m, n], m >= n. */
Tensor householder_product(const Tensor& a, const Tensor& tau);
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
Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left = true,
                        bool unitriangular = false);
/** L (lower) with a = L L^T, or U = L^T with upper; a matrix that is not positive
 * definite is a value Error (eager). */
Tensor cholesky(const Tensor& a, bool upper = false);
/** (Q, R) of [..., m, n]: mode "reduced" (Q [m, k], R [k, n], k = min(m, n)),
 * "complete" (Q [m, m], R [m, n]) or "r" (R only; Q undefined). */
std::pair<Tensor, Tensor> qr(const Tensor& a, const std::string& mode = "reduced");
/** (eigenvalues ascending, eigenvectors as columns) of symmetric matrices; only the
 * triangle named by uplo ("L" or "U") is read. LAPACK's vectors (and signs), as PyTorch's
 * CPU results. The gradient is PyTorch's: defined for symmetric perturbations. */
std::pair<Tensor, Tensor> eigh(const Tensor& a, const std::string& uplo = "L");
Tensor eigvalsh(const Tensor& a, const std::string& uplo = "L");
/** (U, S, Vh) with a = U diag(S) Vh, S descending; full_matrices: U [m, m] and Vh [n, n],
 * else k = min(m, n) columns / rows. */
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& a, bool full_matrices = true);
Tensor svdvals(const Tensor& a);
/** The Moore-Penrose inverse through the SVD (eigh when hermitian): singular values at
 * or below max(atol, rtol * largest) are dropped. Without atol and rtol, rtol is
 * eps(dtype) * max(m, n); with only atol, rtol is 0 (PyTorch's defaults). */
Tensor pinv(const Tensor& a, std::optional<double> atol = std::nullopt,
            std::optional<double> rtol = std::nullopt, bool hermitian = false);
/** The number of singular values above the same tolerance as pinv's (i64). */
Tensor matrix_rank(const Tensor& a, std::optional<double> atol = std::nullopt,
                   std::optional<double> rtol = std::nullopt, bool hermitian = false);
/** matrix_rank with per-matrix tolerances (tensors broadcast against the batch; either may
 * be undefined). */
Tensor matrix_rank(const Tensor& a, const Tensor& atol, const Tensor& rtol, bool hermitian = false);
/** torch.linalg.lstsq's answer: the least-squares (minimum-norm) solution, the squared
 * residuals (drivers other than gelsy, when m > n and every matrix has full rank, else
 * empty), the rank (not for gels) and the singular values (gelsd, gelss). */
struct Lstsq {
  Tensor solution, residuals, rank, singular_values;
};
/** driver: "gelsy" (the default), "gelsd", "gelss" or "gels"; rcond: singular values below
 * rcond * the largest count as zero (default eps * max(m, n)). b: [..., m, k] or [..., m]. */
Lstsq lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond = std::nullopt,
            const std::string& driver = "gelsy");
/** The condition number: p "2" (default) or "-2" from the singular values, else
 * matrix_norm(a, p) * matrix_norm(inv(a), p) for "fro", "nuc", "1", "-1", "inf", "-inf". */
Tensor cond(const Tensor& a, const std::string& p = "2");
/** a^n by repeated squaring (n < 0: of the inverse; n == 0: the identity). */
Tensor matrix_power(const Tensor& a, int64_t n);
/** "fro", "nuc", 1, -1, 2, -2, inf, -inf norms over the last two dims (ord as a string:
 * "fro", "nuc", "1", "-1", "2", "-2", "inf", "-inf"; 2 / -2 / nuc from the singular
 * values). */
Tensor matrix_norm(const Tensor& a, const std::string& ord = "fro", bool keepdim = false);
/** torch.linalg.norm: ord absent: the 2-norm of the elements over dim (all of them when
 * absent; two dims: Frobenius); a number: a vector norm when dim has one entry (or a is
 * 1-D), a matrix norm (1, -1, 2, -2, inf, -inf) when it has two (or a is 2-D); a string
 * ("fro", "nuc"): a matrix norm over dim (default the last two). */
Tensor norm(const Tensor& a, std::optional<double> ord = std::nullopt,
            std::optional<IntList> dim = std::nullopt, bool keepdim = false);
Tensor norm(const Tensor& a, const std::string& ord, std::optional<IntList> dim = std::nullopt,
            bool keepdim = false);
/** The matrix exponential: a Taylor polynomial of degree 18 of a / 2^s, squared s times,
 * with s from the largest 1-norm (eager; a traced call, which cannot read it, uses s = 10:
 * exact for 1-norms up to ~500). */
Tensor matrix_exp(const Tensor& a);
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
/** torch.svd: (U, S, V) (V, not Vh); some: k columns, else full; !compute_uv: U and V
 * zeros (PyTorch's). */
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& a, bool some = true, bool compute_uv = true);
/** torch.pinverse: linalg.pinv with rtol = rcond. */
Tensor pinverse(const Tensor& a, double rcond = 1e-15);
/** x with A x = b for A = L L^T (L lower) or U^T U (upper) given the factor. */
Tensor cholesky_solve(const Tensor& b, const Tensor& factor, bool upper = false);
/** The inverse of A from its Cholesky factor. */
Tensor cholesky_inverse(const Tensor& factor, bool upper = false);
/** torch.triangular_solve: (x with A x = b (A^T x = b with transpose), a copy of A). */
std::pair<Tensor, Tensor> triangular_solve(const Tensor& b, const Tensor& a, bool upper = true,
                                           bool transpose = false, bool unitriangular = false);
/** torch.norm: a vector norm of order p over dims (all when empty). */
Tensor norm(const Tensor& x, double p = 2.0, const IntList& dims = {}, bool keepdim = false);
/** torch.norm with p "fro" (the 2-norm of the elements over dims) or "nuc" (the nuclear
 * norm over two dims, default the last two). */
Tensor norm(const Tensor& x, const std::string& p, const IntList& dims = {}, bool keepdim = false);
Tensor matrix_exp(const Tensor& a);
/** torch.geqrf: (a, tau), LAPACK's packed QR: R on and above the diagonal, the reflectors'
 * tails below it (see linalg::householder_product). */
std::pair<Tensor, Tensor> geqrf(const Tensor& a);
/** Q C (left), C Q (right), or with Q^T (transpose), Q = householder_product(a, tau),
 * without forming Q (torch.ormqr). */
Tensor ormqr(const Tensor& a, const Tensor& tau, const Tensor& c, bool left = true,
             bool transpose = false);
/** torch.lu_solve(b, LU_data, LU_pivots) = linalg::lu_solve(LU_data, LU_pivots, b). */
Tensor lu_solve(const Tensor& b, const Tensor& lu_data, const Tensor& lu_pivots);
/** torch.lu_unpack. */
std::tuple<Tensor, Tensor, Tensor> lu_unpack(const Tensor& lu_data, const Tensor& pivots);
/** torch.svd_lowrank: (U [..., m, q], S [..., q], V [..., n, q]) with A - M ~ U diag(S) V^T
 * from a randomized range finder (kiln's generator draws the test matrix; `niter` power
 * iterations, each re-orthogonalized by QR), as Halko, Martinsson and Tropp's algorithm
 * and PyTorch's. Exact (to rounding) when rank(A - M) <= q. */
std::tuple<Tensor, Tensor, Tensor> svd_lowrank(const Tensor& a, int64_t q = 6, int64_t niter = 2,
                                               const Tensor& m = Tensor());
/** torch.pca_lowrank: svd_lowrank of A minus its column means (center), q defaulting to
 * min(6, m, n). */
std::tuple<Tensor, Tensor, Tensor> pca_lowrank(const Tensor& a,
                                               std::optional<int64_t> q = std::nullopt,
                                               bool center = true, int64_t niter = 2);
}  // namespace kiln
