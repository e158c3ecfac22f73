#include "kiln/api/linalg.h"

#include <cmath>
#include <limits>

#include "kiln/ops/meta.h"

namespace kiln::linalg {
namespace {

IntList shape_of(const Tensor& t) { return IntList(t.shape().begin(), t.shape().end()); }
IntList batch_of(const Tensor& t) { return IntList(t.shape().begin(), t.shape().end() - 2); }
TensorOptions index_options(const Tensor& like) {
  return {.dtype = DType::i64, .device = like.device()};
}

void check_matrix(const Tensor& a, const char* op, bool square = true) {
  KILN_CHECK(a.dim() >= 2, shape, "[{}] expects a (batch of) matrix, got {}", op, a.meta_str());
  KILN_CHECK(!square || a.size(-1) == a.size(-2), shape, "[{}] expects square matrices, got {}", op,
             a.meta_str());
  KILN_CHECK(a.dtype() == DType::f32 || a.dtype() == DType::f64, dtype,
             "[{}] expects a float or double tensor, got {}", op, a.dtype());
}

// Row i of a matrix batch as [..., 1, cols] and entry (i, j) as [..., 1, 1].
Tensor row(const Tensor& m, int64_t i) { return narrow(m, -2, i, 1); }
Tensor entry(const Tensor& m, int64_t i, int64_t j) { return narrow(row(m, i), -1, j, 1); }

// The rows of m reordered: row r of the result is row index[..., r] of m.
Tensor gather_rows(const Tensor& m, const Tensor& index) {
  IntList shape = shape_of(m);
  return gather(m, -2, expand(unsqueeze(index, -1), shape));
}

struct LU {
  Tensor w;       // L below the diagonal (unit diagonal implied), U on and above it
  Tensor perm;    // [..., n]: row r of L U is row perm[r] of a
  Tensor pivots;  // [..., n] i64, 0-based: the row swapped with row k at step k
  Tensor sign;    // [...]: the permutation's sign
};

// Doolittle with partial pivoting, one column per step (LAPACK's getrf choices: the first
// largest |pivot|; a zero column leaves its multipliers 0); [..., m, n] takes min(m, n)
// steps (L [m, k] below the diagonal, U [k, n] on and above it).
LU factor(const Tensor& a) {
  int64_t m = a.size(-2), n = a.size(-1), steps = std::min(m, n);
  IntList batch = batch_of(a), vec = batch, pivot_shape = batch;
  vec.push_back(m);
  pivot_shape.push_back(steps);
  Tensor rows = arange(0, m, 1, index_options(a));
  LU lu{a, expand(rows, vec), Tensor(), ones(batch, {.dtype = a.dtype(), .device = a.device()})};
  TensorList pivots;
  for (int64_t k = 0; k < steps; ++k) {
    Tensor column = narrow(select(lu.w, -1, k), -1, k, m - k);
    Tensor p = argmax(abs(column), -1, /*keepdim=*/true) + k;  // [..., 1]
    Tensor swap = where(rows == k, p, where(rows == p, Scalar(k), rows));
    lu.w = gather_rows(lu.w, swap);
    lu.perm = gather(lu.perm, -1, swap);
    pivots.push_back(p);
    lu.sign = lu.sign * (1.0 - 2.0 * to(squeeze(p, -1) != k, a.dtype()));
    if (k == m - 1) break;  // no rows below
    Tensor pivot = entry(lu.w, k, k);
    Tensor below = narrow(lu.w, -2, k + 1, m - k - 1);
    Tensor f = narrow(below, -1, k, 1) / where(pivot == 0.0, ones_like(pivot), pivot);
    Tensor right =
        narrow(below, -1, k + 1, n - k - 1) - f * narrow(row(lu.w, k), -1, k + 1, n - k - 1);
    lu.w = cat({narrow(lu.w, -2, 0, k + 1), cat({narrow(below, -1, 0, k), f, right}, -1)}, -2);
  }
  lu.pivots = steps ? cat(pivots, -1) : zeros(pivot_shape, index_options(a));
  return lu;
}

Tensor diagonal_of(const Tensor& m) { return diagonal(m, 0, -2, -1); }

// Eager only (a host read): refuses a zero on U's diagonal.
void check_invertible(const Tensor& u, const char* op) {
  if (u.is_fake() || u.numel() == 0) return;
  KILN_CHECK(!item<bool>(any(diagonal_of(u) == 0.0)), value,
             "[{}] the input matrix is singular (a zero pivot in its LU factorization)", op);
}

// x with t x = b for triangular t (the other triangle is not read), b [..., n, k]; one
// row of x per step, from the top (lower) or the bottom (upper).
Tensor substitute(const Tensor& t, const Tensor& b, bool upper, bool unit) {
  int64_t n = t.size(-1);
  Tensor done;  // the rows solved so far, in row order
  for (int64_t s = 0; s < n; ++s) {
    int64_t i = upper ? n - 1 - s : s;
    Tensor rhs = row(b, i);
    if (s > 0) {
      Tensor coeffs = upper ? narrow(row(t, i), -1, i + 1, n - i - 1) : narrow(row(t, i), -1, 0, i);
      rhs = rhs - matmul(coeffs, done);
    }
    Tensor xi = unit ? rhs : rhs / entry(t, i, i);
    done = !done.defined() ? xi : upper ? cat({xi, done}, -2) : cat({done, xi}, -2);
  }
  return done.defined() ? done : b;
}

// a and b with their batch dims broadcast together.
std::pair<Tensor, Tensor> broadcast_batches(const Tensor& a, const Tensor& b, const char* op) {
  Dims batch = ops::broadcast_shapes(Dims(batch_of(a)), Dims(batch_of(b)), op);
  IntList as(batch.begin(), batch.end()), bs = as;
  as.insert(as.end(), {a.size(-2), a.size(-1)});
  bs.insert(bs.end(), {b.size(-2), b.size(-1)});
  return {expand(a, as), expand(b, bs)};
}

}  // namespace

std::pair<Tensor, Tensor> lu_factor(const Tensor& a) {
  check_matrix(a, "linalg.lu_factor", false);
  LU lu = factor(a);
  check_invertible(lu.w, "linalg.lu_factor");  // as PyTorch: linalg.lu takes singular matrices
  return {lu.w, to(lu.pivots + 1, DType::i32)};
}

namespace {

Tensor cholesky_factor(const Tensor& a, bool check, Tensor* info);  // below, with cholesky

// The row permutation of LAPACK pivots (1-based, [..., k]) as [..., m]: row r of L U is
// row perm[r] of A (the swaps applied in order, as tensor ops, so they trace).
Tensor permutation_of(const Tensor& pivots, int64_t m, const Tensor& like) {
  Tensor rows = arange(0, m, 1, index_options(like));
  IntList shape(pivots.shape().begin(), pivots.shape().end() - 1);
  shape.push_back(m);
  Tensor perm = expand(rows, shape), piv = to(pivots, DType::i64) - 1;
  for (int64_t i = 0; i < pivots.size(-1); ++i) {
    Tensor p = narrow(piv, -1, i, 1);
    perm = gather(perm, -1, where(rows == i, p, where(rows == p, Scalar(i), rows)));
  }
  return perm;
}

// The 1-based position of the first zero on U's diagonal ([...], i32), 0 when none:
// LAPACK getrf's info.
Tensor first_zero_pivot(const Tensor& u) {
  Tensor zero = diagonal_of(u) == 0.0;
  if (zero.size(-1) == 0)
    return zeros(IntList(zero.shape().begin(), zero.shape().end() - 1),
                 {.dtype = DType::i32, .device = u.device()});
  Tensor first = argmax(to(zero, DType::i32), -1) + 1;
  return to(where(any(zero, -1), first, zeros_like(first)), DType::i32);
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& a, bool check_errors) {
  check_matrix(a, "linalg.lu_factor_ex", false);
  LU lu = factor(a);
  if (check_errors) check_invertible(lu.w, "linalg.lu_factor_ex");
  return {lu.w, to(lu.pivots + 1, DType::i32), first_zero_pivot(lu.w)};
}

std::tuple<Tensor, Tensor, Tensor> lu_unpack(const Tensor& lu_data, const Tensor& pivots) {
  KILN_CHECK(lu_data.dim() >= 2, shape,
             "[lu_unpack] expects LU_data as a (batch of) matrix, got {}", lu_data.meta_str());
  int64_t m = lu_data.size(-2), n = lu_data.size(-1), k = std::min(m, n);
  KILN_CHECK(pivots.dim() == lu_data.dim() - 1 && pivots.size(-1) == k, shape,
             "[lu_unpack] expects pivots [..., {}], got {}", k, pivots.meta_str());
  TensorOptions o{.dtype = lu_data.dtype(), .device = lu_data.device()};
  Tensor l = tril(narrow(lu_data, -1, 0, k), -1) + eye(m, k, o);
  Tensor u = triu(narrow(lu_data, -2, 0, k));
  Tensor perm = permutation_of(pivots, m, lu_data);
  Tensor p = to(unsqueeze(perm, -2) == unsqueeze(arange(0, m, 1, index_options(lu_data)), -1),
                lu_data.dtype());
  return {p, l, u};
}

Tensor lu_solve(const Tensor& lu_data, const Tensor& pivots, const Tensor& b, bool left,
                bool adjoint) {
  check_matrix(lu_data, "linalg.lu_solve");
  KILN_CHECK(b.dim() >= 2 && b.dtype() == lu_data.dtype(), shape,
             "[linalg.lu_solve] expects B as a (batch of) matrix of LU's dtype, got {}",
             b.meta_str());
  if (!left)  // X A = B  <=>  A^T X^T = B^T
    return transpose(lu_solve(lu_data, pivots, transpose(b, -2, -1), true, !adjoint), -2, -1);
  int64_t n = lu_data.size(-1);
  KILN_CHECK(b.size(-2) == n, shape, "[linalg.lu_solve] incompatible shapes of LU {} and B {}",
             lu_data.meta_str(), b.meta_str());
  auto [f, bb] = broadcast_batches(lu_data, b, "linalg.lu_solve");
  IntList pshape = batch_of(f);
  pshape.push_back(n);
  Tensor perm = permutation_of(expand(pivots, pshape), n, f);
  Tensor index = expand(unsqueeze(perm, -1), shape_of(bb));
  if (!adjoint) {  // A = P L U: x = U^-1 L^-1 P^T b, P^T b the rows perm of b
    Tensor y = substitute(f, gather(bb, -2, index), false, true);
    return substitute(f, y, true, false);
  }
  // A^T x = b: U^T L^T P^T x = b; then x = P z puts row r of z at row perm[r].
  Tensor ft = transpose(f, -2, -1);
  Tensor z = substitute(ft, substitute(ft, bb, false, false), true, true);
  return scatter(zeros_like(z), -2, index, z);
}

std::pair<Tensor, Tensor> cholesky_ex(const Tensor& a, bool upper, bool check_errors) {
  check_matrix(a, "linalg.cholesky_ex");
  Tensor info;
  Tensor l = cholesky_factor(a, check_errors, &info);
  return {upper ? transpose(l, -2, -1) : l, info};
}

std::pair<Tensor, Tensor> inv_ex(const Tensor& a, bool check_errors) {
  check_matrix(a, "linalg.inv_ex");
  LU f = factor(a);
  if (check_errors) check_invertible(f.w, "linalg.inv_ex");
  int64_t n = a.size(-1);
  Tensor eye_n =
      expand(eye(n, std::nullopt, {.dtype = a.dtype(), .device = a.device()}), shape_of(a));
  Tensor y = substitute(f.w, gather_rows(eye_n, f.perm), false, true);
  return {substitute(f.w, y, true, false), first_zero_pivot(f.w)};
}

std::pair<Tensor, Tensor> solve_ex(const Tensor& a, const Tensor& b, bool left, bool check_errors) {
  check_matrix(a, "linalg.solve_ex");
  auto [lu_data, pivots, info] = lu_factor_ex(a, check_errors);
  bool vector = b.dim() == 1 ||
                (b.dim() == a.dim() - 1 && IntList(b.shape().begin(), b.shape().end()) ==
                                               IntList(a.shape().begin(), a.shape().end() - 1));
  Tensor bm = vector ? unsqueeze(b, left ? -1 : -2) : b;
  Tensor x = lu_solve(lu_data, pivots, bm, left);
  return {vector ? squeeze(x, left ? -1 : -2) : x, info};
}

Tensor tensorinv(const Tensor& a, int64_t ind) {
  KILN_CHECK(ind > 0 && ind <= a.dim(), value, "[linalg.tensorinv] ind must be in [1, {}], got {}",
             a.dim(), ind);
  int64_t rows = 1, cols = 1;
  IntList out;
  for (int64_t d = ind; d < a.dim(); ++d) out.push_back(a.size(d)), cols *= a.size(d);
  for (int64_t d = 0; d < ind; ++d) out.push_back(a.size(d)), rows *= a.size(d);
  KILN_CHECK(rows == cols, shape,
             "[linalg.tensorinv] expects the product of the first ind dims ({}) to equal that of "
             "the rest ({}), got {}",
             rows, cols, a.meta_str());
  return reshape(inv(reshape(a, {rows, cols})), out);
}

Tensor tensorsolve(const Tensor& a, const Tensor& b, std::optional<IntList> dims) {
  Tensor am = a;
  if (dims) {  // the given dims of a move to the end, in order
    int64_t end = a.dim() - 1;
    for (auto it = dims->rbegin(); it != dims->rend(); ++it) am = movedim(am, *it, end--);
  }
  int64_t rows = b.numel(), cols = 1;
  IntList out;
  for (int64_t d = b.dim(); d < am.dim(); ++d) out.push_back(am.size(d)), cols *= am.size(d);
  int64_t leading = 1;
  for (int64_t d = 0; d < std::min(b.dim(), am.dim()); ++d) leading *= am.size(d);
  KILN_CHECK(am.dim() >= b.dim() && rows == cols && leading == rows, shape,
             "[linalg.tensorsolve] expects A's leading dims to hold B's {} elements and the rest "
             "as many, got A {}",
             b.meta_str(), a.meta_str());
  return reshape(solve(reshape(am, {rows, cols}), reshape(b, {rows})), out);
}

std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& a) {
  check_matrix(a, "linalg.lu", false);
  LU f = factor(a);
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  Tensor rows = arange(0, m, 1, index_options(a));
  // P[r, c] = 1 where r == perm[c]: a = P L U, L [m, k] unit lower, U [k, n] upper.
  Tensor p = to(unsqueeze(f.perm, -2) == unsqueeze(rows, -1), a.dtype());
  Tensor l =
      tril(narrow(f.w, -1, 0, k), -1) + eye(m, k, {.dtype = a.dtype(), .device = a.device()});
  return {p, l, triu(narrow(f.w, -2, 0, k))};
}

std::pair<Tensor, Tensor> slogdet(const Tensor& a) {
  check_matrix(a, "linalg.slogdet");
  LU f = factor(a);
  Tensor d = diagonal_of(f.w);
  return {f.sign * prod(sign(d), -1), sum(log(abs(d)), {-1})};
}

Tensor det(const Tensor& a) {
  check_matrix(a, "linalg.det");
  LU f = factor(a);
  return f.sign * prod(diagonal_of(f.w), -1);
}

Tensor solve(const Tensor& a, const Tensor& b) {
  check_matrix(a, "linalg.solve");
  KILN_CHECK(b.dtype() == a.dtype(), dtype, "[linalg.solve] expects b ({}) of a's dtype ({})",
             b.dtype(), a.dtype());
  // b is a (batch of) vector(s) when it is 1-D or has a's batch shape plus n.
  bool vector = b.dim() == 1 ||
                (b.dim() == a.dim() - 1 && IntList(b.shape().begin(), b.shape().end()) ==
                                               IntList(a.shape().begin(), a.shape().end() - 1));
  Tensor bm = vector ? unsqueeze(b, -1) : b;
  KILN_CHECK(bm.dim() >= 2 && bm.size(-2) == a.size(-1), shape,
             "[linalg.solve] incompatible shapes of a {} and b {}", a.meta_str(), b.meta_str());
  auto [am, bb] = broadcast_batches(a, bm, "linalg.solve");
  LU f = factor(am);
  check_invertible(f.w, "linalg.solve");
  Tensor y =
      substitute(f.w, gather(bb, -2, expand(unsqueeze(f.perm, -1), shape_of(bb))), false, true);
  Tensor x = substitute(f.w, y, true, false);
  return vector ? squeeze(x, -1) : x;
}

Tensor inv(const Tensor& a) {
  check_matrix(a, "linalg.inv");
  LU f = factor(a);
  check_invertible(f.w, "linalg.inv");
  int64_t n = a.size(-1);
  IntList shape = shape_of(a);
  Tensor eye_n = expand(eye(n, std::nullopt, {.dtype = a.dtype(), .device = a.device()}), shape);
  Tensor y = substitute(f.w, gather_rows(eye_n, f.perm), false, true);
  return substitute(f.w, y, true, false);
}

Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left,
                        bool unitriangular) {
  check_matrix(a, "linalg.solve_triangular");
  KILN_CHECK(b.dim() >= 2 && b.dtype() == a.dtype(), shape,
             "[linalg.solve_triangular] expects b as a (batch of) matrix of a's dtype, got {}",
             b.meta_str());
  if (!left)  // x a = b  <=>  a^T x^T = b^T
    return transpose(
        solve_triangular(transpose(a, -2, -1), transpose(b, -2, -1), !upper, true, unitriangular),
        -2, -1);
  KILN_CHECK(b.size(-2) == a.size(-1), shape,
             "[linalg.solve_triangular] incompatible shapes of a {} and b {}", a.meta_str(),
             b.meta_str());
  auto [am, bb] = broadcast_batches(a, b, "linalg.solve_triangular");
  return substitute(am, bb, upper, unitriangular);
}

namespace {

// The lower Cholesky factor of a's lower triangle. A pivot that is not positive is a value
// Error when `check` (eager), else its order goes into *info (1-based, the first; 0 for
// none) and the factor has NaN from there on.
Tensor cholesky_factor(const Tensor& a, bool check, Tensor* info) {
  int64_t n = a.size(-1);
  // The lower triangle, mirrored, is what is factored; the gradient is PyTorch's
  // symmetric one (through (a + a^T) / 2), the value exactly the lower triangle's.
  Tensor sym = (a + transpose(a, -2, -1)) * 0.5;
  Tensor m = sym + (tril(a) + transpose(tril(a, -1), -2, -1) - sym).detach();
  Tensor rows = arange(0, n, 1, index_options(a));
  TensorList cols;
  if (info) *info = zeros(batch_of(a), {.dtype = DType::i32, .device = a.device()});
  for (int64_t j = 0; j < n; ++j) {
    Tensor c = select(m, -1, j);  // [..., n]: rows >= j are read
    if (j > 0) {
      Tensor l = stack(cols, -1);  // [..., n, j]
      c = c - squeeze(matmul(l, unsqueeze(select(l, -2, j), -1)), -1);
    }
    Tensor d = sqrt(select(c, -1, j));  // [...]
    if (check && !a.is_fake())
      KILN_CHECK(
          item<bool>(all(d > 0.0)), value,
          "[linalg.cholesky] the factorization could not be completed because the input is not "
          "positive-definite (the leading minor of order {} is not positive-definite)",
          j + 1);
    if (info)
      *info = where(logical_and(*info == 0, logical_not(d > 0.0)), full_like(*info, j + 1), *info);
    Tensor dj = unsqueeze(d, -1);
    cols.push_back(
        where(rows < j, zeros_like(c), where(rows == j, expand(dj, shape_of(c)), c / dj)));
  }
  return n ? stack(cols, -1) : m;
}

}  // namespace

Tensor cholesky(const Tensor& a, bool upper) {
  check_matrix(a, "linalg.cholesky");
  Tensor l = cholesky_factor(a, true, nullptr);
  return upper ? transpose(l, -2, -1) : l;
}

namespace {

// Householder QR with LAPACK's (geqrf's) choices: H_j = I - tau_j v_j v_j^T, v_j = [1,
// tail / (x0 - beta)], beta = -sign(x0) |x| (sign(0) = +), tau_j = (beta - x0) / beta; no
// reflection (tau 0) when x is zero below its first entry.
struct Householder {
  Tensor r;       // [..., m, n]: R on and above the diagonal (zeros below)
  Tensor q;       // [..., m, m] (when asked for)
  Tensor packed;  // [..., m, n]: R, and each v_j's tail below the diagonal (geqrf's a)
  Tensor tau;     // [..., min(m, n)]
};

Householder householder(const Tensor& a, bool with_q) {
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  IntList qshape = batch_of(a);
  qshape.insert(qshape.end(), {m, m});
  Householder h{a, Tensor(), Tensor(), Tensor()};
  if (with_q)
    h.q = expand(eye(m, std::nullopt, {.dtype = a.dtype(), .device = a.device()}), qshape);
  TensorList taus, tails;
  for (int64_t j = 0; j < k; ++j) {
    Tensor x = narrow(select(h.r, -1, j), -1, j, m - j);  // [..., m - j]
    Tensor x0 = select(x, -1, 0), tail = narrow(x, -1, 1, m - j - 1);
    Tensor tail_sq = sum(tail * tail, {-1});
    Tensor beta =
        neg(where(x0 >= 0.0, ones_like(x0), full_like(x0, -1.0))) * sqrt(x0 * x0 + tail_sq);
    Tensor reflect = tail_sq > 0.0;
    Tensor scale = where(reflect, x0 - beta, ones_like(x0));  // v = [x0 - beta, tail] / scale
    Tensor tau =
        where(reflect, (beta - x0) / where(reflect, beta, ones_like(beta)), zeros_like(x0));
    Tensor v = cat({ones_like(unsqueeze(x0, -1)), tail / unsqueeze(scale, -1)}, -1);
    taus.push_back(unsqueeze(tau, -1));
    tails.push_back(narrow(v, -1, 1, m - j - 1));
    Tensor coef = unsqueeze(unsqueeze(tau, -1), -1);
    Tensor vc = unsqueeze(v, -1), vr = unsqueeze(v, -2);  // [..., m - j, 1], [..., 1, m - j]
    Tensor rs = narrow(h.r, -2, j, m - j);
    h.r = cat({narrow(h.r, -2, 0, j), rs - coef * vc * matmul(vr, rs)}, -2);
    if (with_q) {
      Tensor qs = narrow(h.q, -1, j, m - j);
      h.q = cat({narrow(h.q, -1, 0, j), qs - coef * matmul(qs, vc) * vr}, -1);
    }
  }
  h.r = triu(h.r);  // exact zeros below the diagonal, as LAPACK's R
  IntList tshape = batch_of(a);
  tshape.push_back(0);
  h.tau = k ? cat(taus, -1) : zeros(tshape, {.dtype = a.dtype(), .device = a.device()});
  // The tails as columns below the diagonal: column j holds tails[j] in rows j+1..m-1.
  Tensor below = zeros_like(a);
  for (int64_t j = 0; j < k; ++j) {
    if (m - j - 1 == 0) continue;
    Tensor col = cat(
        {zeros_like(narrow(select(a, -1, j), -1, 0, j + 1)), tails[static_cast<size_t>(j)]}, -1);
    below = below + unsqueeze(col, -1) * to(arange(0, n, 1, index_options(a)) == j, a.dtype());
  }
  h.packed = h.r + below;
  return h;
}

// v_j of packed reflectors a [..., m, n] as [..., m]: zeros above row j, 1 at j, a's column
// j below.
Tensor reflector(const Tensor& a, int64_t j) {
  int64_t m = a.size(-2);
  Tensor col = select(a, -1, j);
  Tensor rows = arange(0, m, 1, index_options(a));
  return where(rows < j, zeros_like(col), where(rows == j, ones_like(col), col));
}

}  // namespace

std::pair<Tensor, Tensor> qr(const Tensor& a, const std::string& mode) {
  check_matrix(a, "linalg.qr", false);
  KILN_CHECK(mode == "reduced" || mode == "complete" || mode == "r", value,
             "[linalg.qr] mode must be 'reduced', 'complete' or 'r', got '{}'", mode);
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  Householder h = householder(a, mode != "r");
  if (mode == "complete") return {h.q, h.r};
  Tensor rk = narrow(h.r, -2, 0, k);
  if (mode == "r") return {Tensor(), rk};
  return {narrow(h.q, -1, 0, k), rk};
}

Tensor householder_product(const Tensor& a, const Tensor& tau) {
  check_matrix(a, "linalg.householder_product", false);
  int64_t m = a.size(-2), n = a.size(-1), k = tau.size(-1);
  KILN_CHECK(m >= n && k <= n && tau.dim() == a.dim() - 1, shape,
             "[linalg.householder_product] expects A [..., m, n] with m >= n and tau [..., k] with "
             "k <= n, got {} "
             "and {}",
             a.meta_str(), tau.meta_str());
  Tensor q = eye(m, n, {.dtype = a.dtype(), .device = a.device()});
  IntList shape = batch_of(a);
  shape.insert(shape.end(), {m, n});
  q = expand(q, shape);
  for (int64_t j = k - 1; j >= 0; --j) {        // Q = H_0 (H_1 (... (H_{k-1} I)))
    Tensor v = unsqueeze(reflector(a, j), -1);  // [..., m, 1]
    Tensor t = unsqueeze(narrow(tau, -1, j, 1), -1);
    q = q - t * v * matmul(transpose(v, -2, -1), q);
  }
  return q;
}

std::pair<Tensor, Tensor> eigh(const Tensor& a, const std::string& uplo) {
  Value args[] = {a, Str(uplo)};
  Outputs o = dispatch(ops::OpKind::linalg_eigh, args);
  return {o[0], o[1]};
}

Tensor eigvalsh(const Tensor& a, const std::string& uplo) { return eigh(a, uplo).first; }

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& a, bool full_matrices) {
  Value args[] = {a, full_matrices};
  Outputs o = dispatch(ops::OpKind::linalg_svd, args);
  return {o[0], o[1], o[2]};
}

Tensor svdvals(const Tensor& a) { return std::get<1>(linalg::svd(a, false)); }

namespace {

// max(atol, rtol * largest) per matrix, [..., 1], from values sorted either way.
Tensor tolerance(const Tensor& values, int64_t m, int64_t n, std::optional<double> atol,
                 std::optional<double> rtol) {
  double eps = values.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                            : std::numeric_limits<float>::epsilon();
  double r = rtol ? *rtol : atol && *atol > 0 ? 0.0 : eps * static_cast<double>(std::max(m, n));
  Tensor largest =
      values.size(-1) ? amax(abs(values), {-1}, true) : sum(values, {-1}, true);  // 0 for none
  return clamp_min(largest * r, atol.value_or(0.0));
}

}  // namespace

Tensor pinv(const Tensor& a, std::optional<double> atol, std::optional<double> rtol,
            bool hermitian) {
  check_matrix(a, "linalg.pinv", hermitian);
  int64_t m = a.size(-2), n = a.size(-1);
  if (hermitian) {
    auto [l, v] = eigh(a);
    Tensor keep = abs(l) > tolerance(l, m, n, atol, rtol);
    Tensor inv_l = where(keep, reciprocal(where(keep, l, ones_like(l))), zeros_like(l));
    return matmul(v * unsqueeze(inv_l, -2), transpose(v, -2, -1));
  }
  auto [u, s, vh] = linalg::svd(a, false);
  Tensor keep = s > tolerance(s, m, n, atol, rtol);
  Tensor inv_s = where(keep, reciprocal(where(keep, s, ones_like(s))), zeros_like(s));
  return matmul(transpose(vh, -2, -1) * unsqueeze(inv_s, -2), transpose(u, -2, -1));
}

Tensor matrix_rank(const Tensor& a, std::optional<double> atol, std::optional<double> rtol,
                   bool hermitian) {
  check_matrix(a, "linalg.matrix_rank", hermitian);
  Tensor s = hermitian ? abs(eigvalsh(a)) : svdvals(a);
  return sum(s > tolerance(s, a.size(-2), a.size(-1), atol, rtol), {-1});
}

Tensor matrix_rank(const Tensor& a, const Tensor& atol, const Tensor& rtol, bool hermitian) {
  check_matrix(a, "linalg.matrix_rank", hermitian);
  Tensor s = hermitian ? abs(eigvalsh(a)) : svdvals(a);
  double eps = s.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                       : std::numeric_limits<float>::epsilon();
  Tensor largest = s.size(-1) ? amax(s, {-1}) : sum(s, {-1});  // 0 for none
  Tensor at = atol.defined() ? to(atol, s.dtype()) : zeros_like(largest);
  // rtol absent: 0 where atol > 0, else eps max(m, n) (PyTorch's rule, per matrix)
  Tensor rt =
      rtol.defined()
          ? to(rtol, s.dtype())
          : where(at > 0.0, zeros_like(at),
                  full_like(at, eps * static_cast<double>(std::max(a.size(-2), a.size(-1)))));
  return sum(s > unsqueeze(maximum(at, rt * largest), -1), {-1});
}

Lstsq lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond,
            const std::string& driver) {
  check_matrix(a, "linalg.lstsq", false);
  KILN_CHECK(
      driver == "gelsy" || driver == "gelsd" || driver == "gelss" || driver == "gels", value,
      "[linalg.lstsq] parameter `driver` should be one of (gels, gelsy, gelsd, gelss), got '{}'",
      driver);
  KILN_CHECK(b.dtype() == a.dtype(), dtype, "[linalg.lstsq] expects b ({}) of a's dtype ({})",
             b.dtype(), a.dtype());
  bool vector = b.dim() == a.dim() - 1;
  Tensor bm = vector ? unsqueeze(b, -1) : b;
  KILN_CHECK(bm.dim() == a.dim() && bm.size(-2) == a.size(-2), shape,
             "[linalg.lstsq] incompatible shapes of A {} and B {}", a.meta_str(), b.meta_str());
  int64_t m = a.size(-2), n = a.size(-1);
  auto [am, bb] = broadcast_batches(a, bm, "linalg.lstsq");
  auto [u, s, vh] = linalg::svd(am, false);
  Tensor keep = s > tolerance(s, m, n, std::nullopt, rcond);
  Tensor inv_s = where(keep, reciprocal(where(keep, s, ones_like(s))), zeros_like(s));
  Lstsq r;
  Tensor x = matmul(transpose(vh, -2, -1), unsqueeze(inv_s, -1) * matmul(transpose(u, -2, -1), bb));
  r.solution = vector ? squeeze(x, -1) : x;
  TensorOptions o{.dtype = a.dtype(), .device = a.device()};
  Tensor rank = sum(keep, {-1});
  r.rank = driver == "gels" ? empty({0}, {.dtype = DType::i64, .device = a.device()}) : rank;
  r.singular_values = driver == "gelsd" || driver == "gelss" ? s : empty({0}, o);
  r.residuals = empty({0}, o);
  if (driver != "gelsy" && m > n && !a.is_fake() && item<bool>(all(rank == n))) {
    Tensor res = matmul(am, x) - bb;
    r.residuals = sum(res * res, {-2});
    if (vector) r.residuals = squeeze(r.residuals, -1);
  }
  return r;
}

Tensor cond(const Tensor& a, const std::string& p) {
  check_matrix(a, "linalg.cond", p != "2" && p != "-2");
  if (p == "2" || p == "-2") {
    Tensor s = svdvals(a);
    Tensor hi = narrow(s, -1, 0, 1), lo = narrow(s, -1, s.size(-1) - 1, 1);
    return squeeze(p == "2" ? hi / lo : lo / hi, -1);
  }
  return matrix_norm(a, p) * matrix_norm(inv(a), p);
}

namespace {

// The matrix norm over dims (d0, d1) of any rank: those dims moved last.
Tensor matrix_norm_over(const Tensor& a, const std::string& ord, const IntList& dim, bool keepdim,
                        const char* op) {
  KILN_CHECK(dim.size() == 2, shape, "[{}] a matrix norm needs two dims, got {}", op, dim.size());
  int64_t d0 = wrap_dim(dim[0], a.dim(), op), d1 = wrap_dim(dim[1], a.dim(), op);
  KILN_CHECK(d0 != d1, value, "[{}] dims must be different, got ({}, {})", op, dim[0], dim[1]);
  IntList order;
  for (int64_t i = 0; i < a.dim(); ++i)
    if (i != d0 && i != d1) order.push_back(i);
  order.insert(order.end(), {d0, d1});
  Tensor out = matrix_norm(permute(a, order), ord, false);
  if (keepdim)
    for (int64_t d : {std::min(d0, d1), std::max(d0, d1)}) out = unsqueeze(out, d);
  return out;
}

std::string matrix_ord(double ord, const char* op) {
  if (ord == 1 || ord == -1 || ord == 2 || ord == -2)
    return fmt::format("{}", static_cast<int>(ord));
  if (std::isinf(ord)) return ord > 0 ? "inf" : "-inf";
  fail(ErrorKind::value,
       "[{}] order {} is not supported for matrices (1, -1, 2, -2, inf, -inf are)", op, ord);
}

}  // namespace

Tensor norm(const Tensor& a, std::optional<double> ord, std::optional<IntList> dim, bool keepdim) {
  const char* op = "linalg.norm";
  if (!ord) {
    if (dim && dim->size() == 2) return matrix_norm_over(a, "fro", *dim, keepdim, op);
    return vector_norm(a, 2.0, dim.value_or(IntList{}), keepdim);
  }
  if ((dim && dim->size() == 1) || (!dim && a.dim() == 1))
    return vector_norm(a, *ord, dim.value_or(IntList{}), keepdim);
  KILN_CHECK(dim || a.dim() == 2, shape,
             "[{}] if dim is not given but ord is, the input must be 1-D or 2-D, got {}", op,
             a.meta_str());
  return matrix_norm_over(a, matrix_ord(*ord, op), dim.value_or(IntList{-2, -1}), keepdim, op);
}

Tensor norm(const Tensor& a, const std::string& ord, std::optional<IntList> dim, bool keepdim) {
  KILN_CHECK(ord == "fro" || ord == "nuc", value,
             "[linalg.norm] order '{}' is not supported ('fro' and 'nuc' are)", ord);
  return matrix_norm_over(a, ord, dim.value_or(IntList{-2, -1}), keepdim, "linalg.norm");
}

Tensor matrix_exp(const Tensor& a) {
  KILN_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2) && is_floating(a.dtype()), shape,
             "[linalg.matrix_exp] expects square floating matrices, got {}", a.meta_str());
  if (a.dtype() != DType::f64)  // the series and the squarings in f64, one rounding (the squarings
                                // amplify error)
    return to(linalg::matrix_exp(to(a, DType::f64)), a.dtype());
  check_matrix(a, "linalg.matrix_exp");
  int64_t n = a.size(-1);
  if (n == 0 || a.numel() == 0) return a;
  int64_t s = 10;
  if (!a.is_fake() && !a.is_dtensor()) {
    double largest = item<double>(amax(matrix_norm(a, "1")));
    s = std::isfinite(largest) && largest > 0.5
            ? static_cast<int64_t>(std::ceil(std::log2(largest / 0.5)))
            : 0;
  }
  Tensor x = a * std::ldexp(1.0, static_cast<int>(-s));
  Tensor eye_n = eye(n, std::nullopt, {.dtype = a.dtype(), .device = a.device()});
  Tensor p = eye_n + x / 18.0;  // Horner: I + x (I + x/2 (... (I + x/18)))
  for (int k = 17; k >= 1; --k) p = eye_n + matmul(x, p) / static_cast<double>(k);
  for (int64_t i = 0; i < s; ++i) p = matmul(p, p);
  return p;
}

Tensor matrix_power(const Tensor& a, int64_t n) {
  KILN_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2), shape,
             "[linalg.matrix_power] expects square matrices, got {}", a.meta_str());
  if (n == 0) {
    TensorOptions o{.dtype = a.dtype(), .device = a.device()};
    return contiguous(expand(eye(a.size(-1), std::nullopt, o), shape_of(a)));
  }
  Tensor base = n < 0 ? inv(a) : a, result;
  for (uint64_t e = n < 0 ? -static_cast<uint64_t>(n) : static_cast<uint64_t>(n); e; e >>= 1) {
    if (e & 1) result = result.defined() ? matmul(result, base) : base;
    if (e > 1) base = matmul(base, base);
  }
  return result;
}

Tensor matrix_norm(const Tensor& a, const std::string& ord, bool keepdim) {
  if (wants_opmath({a}) &&
      (ord == "fro" || ord == "1" || ord == "-1" || ord == "inf" || ord == "-inf"))
    return in_opmath({a}, [&](const TensorList& t) {
      return matrix_norm(t[0], ord, keepdim);
    });  // as PyTorch: f16 too
  check_matrix(a, "linalg.matrix_norm", false);
  Tensor x = abs(a);
  Tensor out;
  if (ord == "fro")
    out = sqrt(sum(x * x, {-2, -1}, true));
  else if (ord == "1")
    out = amax(sum(x, {-2}, true), {-1}, true);
  else if (ord == "-1")
    out = amin(sum(x, {-2}, true), {-1}, true);
  else if (ord == "inf")
    out = amax(sum(x, {-1}, true), {-2}, true);
  else if (ord == "-inf")
    out = amin(sum(x, {-1}, true), {-2}, true);
  else if (ord == "2" || ord == "-2" || ord == "nuc") {
    Tensor s = svdvals(a);
    out = ord == "nuc" ? sum(s, {-1}, true)
          : ord == "2" ? amax(s, {-1}, true)
                       : amin(s, {-1}, true);
    out = unsqueeze(out, -1);
  } else
    fail(ErrorKind::unsupported,
         "[linalg.matrix_norm] ord '{}' is not supported (fro, nuc, 1, -1, 2, -2, inf, -inf are)",
         ord);
  return keepdim ? out : squeeze(squeeze(out, -1), -1);
}

Tensor multi_dot(const TensorList& ts) {
  KILN_CHECK(ts.size() >= 2, value, "[linalg.multi_dot] expected at least 2 tensors but got {}",
             ts.size());
  if (wants_opmath(ts)) return in_opmath(ts, [](const TensorList& t) { return multi_dot(t); });
  for (size_t i = 0; i < ts.size(); ++i) {
    bool end = i == 0 || i + 1 == ts.size();
    KILN_CHECK(ts[i].dim() == 2 || (end && ts[i].dim() == 1), shape,
               "[linalg.multi_dot] tensor {} must be 2-D{}, got {}", i, end ? " (or 1-D)" : "",
               ts[i].meta_str());
  }
  Tensor out = ts[0].dim() == 1 ? unsqueeze(ts[0], 0) : ts[0];
  for (size_t i = 1; i < ts.size(); ++i)
    out = matmul(out, ts[i].dim() == 1 ? unsqueeze(ts[i], -1) : ts[i]);
  if (ts.back().dim() == 1) out = squeeze(out, -1);
  if (ts.front().dim() == 1) out = squeeze(out, 0);
  return out;
}

Tensor vecdot(const Tensor& x, const Tensor& y, int64_t dim) { return sum(x * y, {dim}); }

}  // namespace kiln::linalg

namespace kiln {

Tensor det(const Tensor& a) { return linalg::det(a); }
Tensor logdet(const Tensor& a) {
  auto [s, logabs] = linalg::slogdet(a);
  return where(s < 0.0, full_like(logabs, std::numeric_limits<double>::quiet_NaN()), logabs);
}
Tensor inverse(const Tensor& a) { return linalg::inv(a); }
Tensor matrix_power(const Tensor& a, int64_t n) { return linalg::matrix_power(a, n); }

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& a, bool some, bool compute_uv) {
  if (!compute_uv) {  // zero U [..., m, m] and V [..., n, n], whatever `some` says
    auto [u, s, vh] = linalg::svd(a, true);
    return {zeros_like(u), s, zeros_like(vh)};
  }
  auto [u, s, vh] = linalg::svd(a, /*full_matrices=*/!some);
  return {u, s, transpose(vh, -2, -1)};
}
Tensor linalg::cross(const Tensor& a, const Tensor& b, int64_t dim) {
  return kiln::cross(a, b, dim);
}
Tensor pinverse(const Tensor& a, double rcond) { return linalg::pinv(a, std::nullopt, rcond); }

namespace {

// A x - M x, given A x (M may be undefined: A x).
Tensor minus_m(const Tensor& ax, const Tensor& m, const Tensor& x) {
  return m.defined() ? ax - matmul(m, x) : ax;
}

// An orthonormal basis Q [..., m, q] of the range of A - M: Q of (A - M) R for a Gaussian
// R [n, q], refined by niter power iterations.
Tensor approximate_basis(const Tensor& a, int64_t q, int64_t niter, const Tensor& m) {
  Tensor r = randn({a.size(-1), q}, {.dtype = a.dtype(), .device = a.device()});
  Tensor a_t = transpose(a, -2, -1), m_t = m.defined() ? transpose(m, -2, -1) : m;
  Tensor basis = linalg::qr(minus_m(matmul(a, r), m, r)).first;
  for (int64_t i = 0; i < niter; ++i) {
    basis = linalg::qr(minus_m(matmul(a_t, basis), m_t, basis)).first;
    basis = linalg::qr(minus_m(matmul(a, basis), m, basis)).first;
  }
  return basis;
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> svd_lowrank(const Tensor& a, int64_t q, int64_t niter,
                                               const Tensor& m) {
  KILN_CHECK(a.dim() >= 2 && is_floating(a.dtype()), shape,
             "[svd_lowrank] expects a floating [..., m, n] input, got {}", a.meta_str());
  KILN_CHECK(q >= 0 && niter >= 0, value,
             "[svd_lowrank] q and niter must be non-negative, got {} and {}", q, niter);
  int64_t rows = a.size(-2), cols = a.size(-1);
  Tensor a_t = transpose(a, -2, -1), m_t = m.defined() ? transpose(m, -2, -1) : m;
  // PyTorch's branch: a basis of the row space unless the matrix is tall and narrow.
  if (rows < cols || cols > q) {
    Tensor basis = approximate_basis(a_t, q, niter, m_t);                       // [..., n, q]
    auto [u, s, vh] = linalg::svd(minus_m(matmul(a, basis), m, basis), false);  // B^T = (A - M) Q
    return {u, s, matmul(basis, transpose(vh, -2, -1))};
  }
  Tensor basis = approximate_basis(a, q, niter, m);  // [..., m, q]
  auto [u, s, vh] = linalg::svd(transpose(minus_m(matmul(a_t, basis), m_t, basis), -2, -1),
                                false);  // Q^T (A - M)
  return {matmul(basis, u), s, transpose(vh, -2, -1)};
}

std::tuple<Tensor, Tensor, Tensor> pca_lowrank(const Tensor& a, std::optional<int64_t> q,
                                               bool center, int64_t niter) {
  KILN_CHECK(a.dim() >= 2, shape, "[pca_lowrank] expects a [..., m, n] input, got {}",
             a.meta_str());
  int64_t limit = std::min(a.size(-2), a.size(-1));
  int64_t k = q.value_or(std::min<int64_t>(6, limit));
  KILN_CHECK(k >= 0 && k <= limit, value,
             "[pca_lowrank] q(={}) must be non-negative integer and not greater than "
             "min(m, n)={}",
             k, limit);
  KILN_CHECK(niter >= 0, value, "[pca_lowrank] niter(={}) must be non-negative integer", niter);
  if (!center) return svd_lowrank(a, k, niter);
  return svd_lowrank(a - mean(a, {-2}, true), k, niter);
}

Tensor cholesky_solve(const Tensor& b, const Tensor& factor, bool upper) {
  KILN_CHECK(factor.dim() >= 2 && factor.size(-1) == factor.size(-2), shape,
             "[cholesky_solve] expects square factors, got {}", factor.meta_str());
  // The factor's value is its named triangle; its gradient is PyTorch's, of the whole
  // matrix (as if A = L L^T were formed from all of it): the solve goes through A.
  Tensor tri = upper ? triu(factor) : tril(factor);
  Tensor f = factor - (factor - tri).detach();
  Tensor ft = transpose(f, -2, -1);
  return linalg::solve(upper ? matmul(ft, f) : matmul(f, ft), b);
}

Tensor cholesky_inverse(const Tensor& factor, bool upper) {
  KILN_CHECK(factor.dim() >= 2 && factor.size(-1) == factor.size(-2), shape,
             "[cholesky_inverse] expects square matrices, got {}", factor.meta_str());
  IntList shape(factor.shape().begin(), factor.shape().end());
  Tensor eye_n =
      eye(factor.size(-1), std::nullopt, {.dtype = factor.dtype(), .device = factor.device()});
  return cholesky_solve(contiguous(expand(eye_n, shape)), factor, upper);
}

std::pair<Tensor, Tensor> triangular_solve(const Tensor& b, const Tensor& a, bool upper,
                                           bool transpose_a, bool unitriangular) {
  Tensor coefficients = transpose_a ? transpose(a, -2, -1) : a;
  return {
      linalg::solve_triangular(coefficients, b, transpose_a ? !upper : upper, true, unitriangular),
      clone(a)};
}

Tensor norm(const Tensor& x, double p, const IntList& dims, bool keepdim) {
  return vector_norm(x, p, dims, keepdim);
}

Tensor norm(const Tensor& x, const std::string& p, const IntList& dims, bool keepdim) {
  if (p == "fro") return vector_norm(x, 2.0, dims, keepdim);
  KILN_CHECK(p == "nuc", value, "[norm] p '{}' is not supported (a number, 'fro' or 'nuc' are)", p);
  return linalg::norm(x, p, dims.empty() ? std::nullopt : std::optional<IntList>(dims), keepdim);
}

Tensor matrix_exp(const Tensor& a) { return linalg::matrix_exp(a); }

std::pair<Tensor, Tensor> geqrf(const Tensor& a) {
  linalg::check_matrix(a, "geqrf", false);
  linalg::Householder h = linalg::householder(a, false);
  return {h.packed, h.tau};
}

Tensor ormqr(const Tensor& a, const Tensor& tau, const Tensor& c, bool left, bool transpose_q) {
  linalg::check_matrix(a, "ormqr", false);
  int64_t k = tau.size(-1);
  int64_t rows = left ? c.size(-2) : c.size(-1);
  KILN_CHECK(c.dim() >= 2 && a.size(-2) == rows && k <= a.size(-1), shape,
             "[ormqr] incompatible shapes of A {}, tau {} and C {}", a.meta_str(), tau.meta_str(),
             c.meta_str());
  // Q = H_0 ... H_{k-1}: Q C applies the last reflector first; Q^T C the first; on the
  // right, C Q the first, C Q^T the last.
  bool last_first = left != transpose_q;
  Tensor out = c;
  for (int64_t s = 0; s < k; ++s) {
    int64_t j = last_first ? k - 1 - s : s;
    Tensor v = unsqueeze(linalg::reflector(a, j), -1);  // [..., m, 1]
    Tensor t = unsqueeze(narrow(tau, -1, j, 1), -1);
    Tensor vt = transpose(v, -2, -1);
    out = left ? out - t * v * matmul(vt, out) : out - t * matmul(out, v) * vt;
  }
  return out;
}

Tensor lu_solve(const Tensor& b, const Tensor& lu_data, const Tensor& lu_pivots) {
  return linalg::lu_solve(lu_data, lu_pivots, b);
}
std::tuple<Tensor, Tensor, Tensor> lu_unpack(const Tensor& lu_data, const Tensor& pivots) {
  return linalg::lu_unpack(lu_data, pivots);
}

}  // namespace kiln
