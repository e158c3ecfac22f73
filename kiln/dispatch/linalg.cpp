#include "kiln/dispatch/linalg.h"

#include <cmath>
#include <limits>

#include "kiln/ops/meta.h"

namespace kiln::linalg {
namespace {

IntList shape_of(const Tensor& t) { return IntList(t.shape().begin(), t.shape().end()); }
IntList batch_of(const Tensor& t) { return IntList(t.shape().begin(), t.shape().end() - 2); }
TensorOptions index_options(const Tensor& like) { return {.dtype = DType::i64, .device = like.device()}; }

void check_matrix(const Tensor& a, const char* op, bool square = true) {
  KILN_CHECK(a.dim() >= 2, shape, "[{}] expects a (batch of) matrix, got {}", op, a.meta_str());
  KILN_CHECK(!square || a.size(-1) == a.size(-2), shape, "[{}] expects square matrices, got {}", op, a.meta_str());
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
// largest |pivot|; a zero column leaves its multipliers 0).
LU factor(const Tensor& a) {
  int64_t n = a.size(-1);
  IntList batch = batch_of(a), vec = batch;
  vec.push_back(n);
  Tensor rows = arange(0, n, 1, index_options(a));
  LU lu{a, expand(rows, vec), Tensor(), ones(batch, {.dtype = a.dtype(), .device = a.device()})};
  TensorList pivots;
  for (int64_t k = 0; k < n; ++k) {
    Tensor column = narrow(select(lu.w, -1, k), -1, k, n - k);
    Tensor p = argmax(abs(column), -1, /*keepdim=*/true) + k;  // [..., 1]
    Tensor swap = where(rows == k, p, where(rows == p, Scalar(k), rows));
    lu.w = gather_rows(lu.w, swap);
    lu.perm = gather(lu.perm, -1, swap);
    pivots.push_back(p);
    lu.sign = lu.sign * (1.0 - 2.0 * to(squeeze(p, -1) != k, a.dtype()));
    if (k == n - 1) break;
    Tensor pivot = entry(lu.w, k, k);
    Tensor below = narrow(lu.w, -2, k + 1, n - k - 1);
    Tensor f = narrow(below, -1, k, 1) / where(pivot == 0.0, ones_like(pivot), pivot);
    Tensor right = narrow(below, -1, k + 1, n - k - 1) - f * narrow(row(lu.w, k), -1, k + 1, n - k - 1);
    lu.w = cat({narrow(lu.w, -2, 0, k + 1), cat({narrow(below, -1, 0, k), f, right}, -1)}, -2);
  }
  lu.pivots = n ? cat(pivots, -1) : zeros(vec, index_options(a));
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
  check_matrix(a, "linalg.lu_factor");
  LU lu = factor(a);
  check_invertible(lu.w, "linalg.lu_factor");  // as PyTorch: linalg.lu takes singular matrices
  return {lu.w, to(lu.pivots + 1, DType::i32)};
}

std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& a) {
  check_matrix(a, "linalg.lu");
  LU f = factor(a);
  int64_t n = a.size(-1);
  Tensor eye_n = eye(n, std::nullopt, {.dtype = a.dtype(), .device = a.device()});
  Tensor rows = arange(0, n, 1, index_options(a));
  // P[r, c] = 1 where r == perm[c]: a = P L U.
  Tensor p = to(unsqueeze(f.perm, -2) == unsqueeze(rows, -1), a.dtype());
  return {p, tril(f.w, -1) + eye_n, triu(f.w)};
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
  KILN_CHECK(b.dtype() == a.dtype(), dtype, "[linalg.solve] expects b ({}) of a's dtype ({})", b.dtype(), a.dtype());
  // b is a (batch of) vector(s) when it is 1-D or has a's batch shape plus n.
  bool vector = b.dim() == 1 || (b.dim() == a.dim() - 1 && IntList(b.shape().begin(), b.shape().end()) ==
                                                               IntList(a.shape().begin(), a.shape().end() - 1));
  Tensor bm = vector ? unsqueeze(b, -1) : b;
  KILN_CHECK(bm.dim() >= 2 && bm.size(-2) == a.size(-1), shape,
             "[linalg.solve] incompatible shapes of a {} and b {}", a.meta_str(), b.meta_str());
  auto [am, bb] = broadcast_batches(a, bm, "linalg.solve");
  LU f = factor(am);
  check_invertible(f.w, "linalg.solve");
  Tensor y = substitute(f.w, gather(bb, -2, expand(unsqueeze(f.perm, -1), shape_of(bb))), false, true);
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

Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left, bool unitriangular) {
  check_matrix(a, "linalg.solve_triangular");
  KILN_CHECK(b.dim() >= 2 && b.dtype() == a.dtype(), shape,
             "[linalg.solve_triangular] expects b as a (batch of) matrix of a's dtype, got {}", b.meta_str());
  if (!left)  // x a = b  <=>  a^T x^T = b^T
    return transpose(solve_triangular(transpose(a, -2, -1), transpose(b, -2, -1), !upper, true, unitriangular), -2,
                     -1);
  KILN_CHECK(b.size(-2) == a.size(-1), shape, "[linalg.solve_triangular] incompatible shapes of a {} and b {}",
             a.meta_str(), b.meta_str());
  auto [am, bb] = broadcast_batches(a, b, "linalg.solve_triangular");
  return substitute(am, bb, upper, unitriangular);
}

Tensor cholesky(const Tensor& a, bool upper) {
  check_matrix(a, "linalg.cholesky");
  int64_t n = a.size(-1);
  // The lower triangle, mirrored, is what is factored; the gradient is PyTorch's
  // symmetric one (through (a + a^T) / 2), the value exactly the lower triangle's.
  Tensor sym = (a + transpose(a, -2, -1)) * 0.5;
  Tensor m = sym + (tril(a) + transpose(tril(a, -1), -2, -1) - sym).detach();
  Tensor rows = arange(0, n, 1, index_options(a));
  TensorList cols;
  for (int64_t j = 0; j < n; ++j) {
    Tensor c = select(m, -1, j);  // [..., n]: rows >= j are read
    if (j > 0) {
      Tensor l = stack(cols, -1);  // [..., n, j]
      c = c - squeeze(matmul(l, unsqueeze(select(l, -2, j), -1)), -1);
    }
    Tensor d = sqrt(select(c, -1, j));  // [...]
    if (!a.is_fake())
      KILN_CHECK(item<bool>(all(d > 0.0)), value,
                 "[linalg.cholesky] the factorization could not be completed because the input is not "
                 "positive-definite (the leading minor of order {} is not positive-definite)",
                 j + 1);
    Tensor dj = unsqueeze(d, -1);
    cols.push_back(where(rows < j, zeros_like(c), where(rows == j, expand(dj, shape_of(c)), c / dj)));
  }
  Tensor l = n ? stack(cols, -1) : m;
  return upper ? transpose(l, -2, -1) : l;
}

std::pair<Tensor, Tensor> qr(const Tensor& a, const std::string& mode) {
  check_matrix(a, "linalg.qr", false);
  KILN_CHECK(mode == "reduced" || mode == "complete" || mode == "r", value,
             "[linalg.qr] mode must be 'reduced', 'complete' or 'r', got '{}'", mode);
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  IntList qshape = batch_of(a);
  qshape.insert(qshape.end(), {m, m});
  Tensor r = a, q = expand(eye(m, std::nullopt, {.dtype = a.dtype(), .device = a.device()}), qshape);
  // Householder reflections H = I - 2 v v^T / |v|^2 with LAPACK's choices: beta =
  // -sign(x0) |x| (sign(0) = +), and no reflection when x is zero below its first entry.
  for (int64_t j = 0; j < k; ++j) {
    Tensor x = narrow(select(r, -1, j), -1, j, m - j);  // [..., m - j]
    Tensor x0 = select(x, -1, 0), tail = narrow(x, -1, 1, m - j - 1);
    Tensor tail_sq = sum(tail * tail, {-1});
    Tensor beta = neg(where(x0 >= 0.0, ones_like(x0), full_like(x0, -1.0))) * sqrt(x0 * x0 + tail_sq);
    Tensor v = cat({unsqueeze(x0 - beta, -1), tail}, -1);
    Tensor v_sq = sum(v * v, {-1});
    Tensor reflect = tail_sq > 0.0;
    Tensor coef = unsqueeze(unsqueeze(where(reflect, 2.0 / where(reflect, v_sq, ones_like(v_sq)), zeros_like(v_sq)), -1), -1);
    Tensor vc = unsqueeze(v, -1), vr = unsqueeze(v, -2);  // [..., m - j, 1], [..., 1, m - j]
    Tensor rs = narrow(r, -2, j, m - j);
    r = cat({narrow(r, -2, 0, j), rs - coef * vc * matmul(vr, rs)}, -2);
    Tensor qs = narrow(q, -1, j, m - j);
    q = cat({narrow(q, -1, 0, j), qs - coef * matmul(qs, vc) * vr}, -1);
  }
  r = triu(r);  // exact zeros below the diagonal, as LAPACK's R
  if (mode == "complete") return {q, r};
  Tensor rk = narrow(r, -2, 0, k);
  if (mode == "r") return {Tensor(), rk};
  return {narrow(q, -1, 0, k), rk};
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
Tensor tolerance(const Tensor& values, int64_t m, int64_t n, std::optional<double> atol, std::optional<double> rtol) {
  double eps = values.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                            : std::numeric_limits<float>::epsilon();
  double r = rtol ? *rtol : atol && *atol > 0 ? 0.0 : eps * static_cast<double>(std::max(m, n));
  Tensor largest = values.size(-1) ? amax(abs(values), {-1}, true) : sum(values, {-1}, true);  // 0 for none
  return clamp_min(largest * r, atol.value_or(0.0));
}

}  // namespace

Tensor pinv(const Tensor& a, std::optional<double> atol, std::optional<double> rtol, bool hermitian) {
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

Tensor matrix_rank(const Tensor& a, std::optional<double> atol, std::optional<double> rtol, bool hermitian) {
  check_matrix(a, "linalg.matrix_rank", hermitian);
  Tensor s = hermitian ? abs(eigvalsh(a)) : svdvals(a);
  return sum(s > tolerance(s, a.size(-2), a.size(-1), atol, rtol), {-1});
}

Lstsq lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond, const std::string& driver) {
  check_matrix(a, "linalg.lstsq", false);
  KILN_CHECK(driver == "gelsy" || driver == "gelsd" || driver == "gelss" || driver == "gels", value,
             "[linalg.lstsq] parameter `driver` should be one of (gels, gelsy, gelsd, gelss), got '{}'", driver);
  KILN_CHECK(b.dtype() == a.dtype(), dtype, "[linalg.lstsq] expects b ({}) of a's dtype ({})", b.dtype(), a.dtype());
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
Tensor matrix_norm_over(const Tensor& a, const std::string& ord, const IntList& dim, bool keepdim, const char* op) {
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
  if (ord == 1 || ord == -1 || ord == 2 || ord == -2) return fmt::format("{}", static_cast<int>(ord));
  if (std::isinf(ord)) return ord > 0 ? "inf" : "-inf";
  fail(ErrorKind::value, "[{}] order {} is not supported for matrices (1, -1, 2, -2, inf, -inf are)", op, ord);
}

}  // namespace

Tensor norm(const Tensor& a, std::optional<double> ord, std::optional<IntList> dim, bool keepdim) {
  const char* op = "linalg.norm";
  if (!ord) {
    if (dim && dim->size() == 2) return matrix_norm_over(a, "fro", *dim, keepdim, op);
    return vector_norm(a, 2.0, dim.value_or(IntList{}), keepdim);
  }
  if ((dim && dim->size() == 1) || (!dim && a.dim() == 1)) return vector_norm(a, *ord, dim.value_or(IntList{}), keepdim);
  KILN_CHECK(dim || a.dim() == 2, shape, "[{}] if dim is not given but ord is, the input must be 1-D or 2-D, got {}",
             op, a.meta_str());
  return matrix_norm_over(a, matrix_ord(*ord, op), dim.value_or(IntList{-2, -1}), keepdim, op);
}

Tensor norm(const Tensor& a, const std::string& ord, std::optional<IntList> dim, bool keepdim) {
  KILN_CHECK(ord == "fro" || ord == "nuc", value, "[linalg.norm] order '{}' is not supported ('fro' and 'nuc' are)",
             ord);
  return matrix_norm_over(a, ord, dim.value_or(IntList{-2, -1}), keepdim, "linalg.norm");
}

Tensor matrix_exp(const Tensor& a) {
  check_matrix(a, "linalg.matrix_exp");
  int64_t n = a.size(-1);
  if (n == 0 || a.numel() == 0) return a;
  int64_t s = 10;
  if (!a.is_fake() && !a.is_dtensor()) {
    double largest = item<double>(amax(matrix_norm(a, "1")));
    s = std::isfinite(largest) && largest > 0.5 ? static_cast<int64_t>(std::ceil(std::log2(largest / 0.5))) : 0;
  }
  Tensor x = a * std::ldexp(1.0, static_cast<int>(-s));
  Tensor eye_n = eye(n, std::nullopt, {.dtype = a.dtype(), .device = a.device()});
  Tensor p = eye_n + x / 18.0;  // Horner: I + x (I + x/2 (... (I + x/18)))
  for (int k = 17; k >= 1; --k) p = eye_n + matmul(x, p) / static_cast<double>(k);
  for (int64_t i = 0; i < s; ++i) p = matmul(p, p);
  return p;
}

Tensor matrix_power(const Tensor& a, int64_t n) {
  KILN_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2), shape, "[linalg.matrix_power] expects square matrices, got {}",
             a.meta_str());
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
  check_matrix(a, "linalg.matrix_norm", false);
  Tensor x = abs(a);
  Tensor out;
  if (ord == "fro") out = sqrt(sum(x * x, {-2, -1}, true));
  else if (ord == "1") out = amax(sum(x, {-2}, true), {-1}, true);
  else if (ord == "-1") out = amin(sum(x, {-2}, true), {-1}, true);
  else if (ord == "inf") out = amax(sum(x, {-1}, true), {-2}, true);
  else if (ord == "-inf") out = amin(sum(x, {-1}, true), {-2}, true);
  else if (ord == "2" || ord == "-2" || ord == "nuc") {
    Tensor s = svdvals(a);
    out = ord == "nuc" ? sum(s, {-1}, true) : ord == "2" ? amax(s, {-1}, true) : amin(s, {-1}, true);
    out = unsqueeze(out, -1);
  }
  else fail(ErrorKind::unsupported, "[linalg.matrix_norm] ord '{}' is not supported (fro, nuc, 1, -1, 2, -2, inf, -inf are)", ord);
  return keepdim ? out : squeeze(squeeze(out, -1), -1);
}

Tensor multi_dot(const TensorList& ts) {
  KILN_CHECK(ts.size() >= 2, value, "[linalg.multi_dot] expected at least 2 tensors but got {}", ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    bool end = i == 0 || i + 1 == ts.size();
    KILN_CHECK(ts[i].dim() == 2 || (end && ts[i].dim() == 1), shape,
               "[linalg.multi_dot] tensor {} must be 2-D{}, got {}", i, end ? " (or 1-D)" : "", ts[i].meta_str());
  }
  Tensor out = ts[0].dim() == 1 ? unsqueeze(ts[0], 0) : ts[0];
  for (size_t i = 1; i < ts.size(); ++i) out = matmul(out, ts[i].dim() == 1 ? unsqueeze(ts[i], -1) : ts[i]);
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
  auto [u, s, vh] = linalg::svd(a, some);
  return {u, s, transpose(vh, -2, -1)};
}
Tensor pinverse(const Tensor& a, double rcond) { return linalg::pinv(a, std::nullopt, rcond); }

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
  Tensor eye_n = eye(factor.size(-1), std::nullopt, {.dtype = factor.dtype(), .device = factor.device()});
  return cholesky_solve(contiguous(expand(eye_n, shape)), factor, upper);
}

std::pair<Tensor, Tensor> triangular_solve(const Tensor& b, const Tensor& a, bool upper, bool transpose_a,
                                           bool unitriangular) {
  Tensor coefficients = transpose_a ? transpose(a, -2, -1) : a;
  return {linalg::solve_triangular(coefficients, b, transpose_a ? !upper : upper, true, unitriangular), clone(a)};
}

Tensor norm(const Tensor& x, double p, const IntList& dims, bool keepdim) { return vector_norm(x, p, dims, keepdim); }

Tensor norm(const Tensor& x, const std::string& p, const IntList& dims, bool keepdim) {
  if (p == "fro") return vector_norm(x, 2.0, dims, keepdim);
  KILN_CHECK(p == "nuc", value, "[norm] p '{}' is not supported (a number, 'fro' or 'nuc' are)", p);
  return linalg::norm(x, p, dims.empty() ? std::nullopt : std::optional<IntList>(dims), keepdim);
}

Tensor matrix_exp(const Tensor& a) { return linalg::matrix_exp(a); }

}  // namespace kiln
