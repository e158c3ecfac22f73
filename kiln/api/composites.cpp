// Composites written with table ops, as PyTorch defines (or decomposes) them: elementwise
// functions, NaN-aware and paired reductions, differences and contractions, grids,
// rotations, triangle indices, bucketing. They differentiate, trace and export as the
// ops they are made of.
#include <cmath>
#include <limits>
#include <map>
#include <numbers>

#include "kiln/api/functional.h"
#include "kiln/api/linalg.h"
#include "kiln/dispatch/grad_mode.h"
#include "kiln/ops/meta.h"

namespace kiln {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// a + log(1 + base^-|a - b|) on the larger side; equal infinities give themselves.
Tensor log_add(const Tensor& a, const Tensor& b, bool base2) {
  Tensor hi = maximum(a, b), gap = neg(abs(a - b));
  Tensor sum = base2 ? hi + log1p(exp2(gap)) / std::numbers::ln2 : hi + log1p(exp(gap));
  return where(logical_and(isinf(a), eq(a, b)), a + zeros_like(sum), sum);
}
}  // namespace

// f16/bf16 in f32, rounded once (PyTorch's opmath)
Tensor logaddexp(const Tensor& a, const Tensor& b) {
  return in_opmath({a, b}, [](const TensorList& t) { return log_add(t[0], t[1], false); });
}
Tensor logaddexp2(const Tensor& a, const Tensor& b) {
  return in_opmath({a, b}, [](const TensorList& t) { return log_add(t[0], t[1], true); });
}

Tensor hypot(const Tensor& a, const Tensor& b) {
  if (wants_opmath({a, b}))
    return in_opmath({a, b}, [](const TensorList& t) { return hypot(t[0], t[1]); });
  Tensor x = abs(a), y = abs(b);
  Tensor hi = maximum(x, y), lo = minimum(x, y);
  Tensor safe = where(hi == 0.0, ones_like(hi), hi);  // 0 / 0 would leave NaN in the gradient
  Tensor r = lo / safe;
  return where(logical_or(isinf(x), isinf(y)), full_like(hi, kInf), hi * sqrt(r * r + 1.0));
}

namespace {
// Both operands in their promoted floating dtype (a wrapped number joins without raising it).
std::pair<Tensor, Tensor> promoted_float(const Tensor& x, const Tensor& y) {
  DType rt = ops::result_type(x, y);
  if (!is_floating(rt)) rt = DType::f32;
  return {to(x, rt), to(y, rt)};
}
}  // namespace

Tensor xlogy(const Tensor& x_in, const Tensor& y_in) {
  auto [x, y] = promoted_float(x_in, y_in);
  Tensor product = x * log(y);
  return where(logical_and(x == 0.0, logical_not(isnan(y))), zeros_like(product), product);
}

Tensor special_xlog1py(const Tensor& x_in, const Tensor& y_in) {
  auto [x, y] = promoted_float(x_in, y_in);
  Tensor product = x * log1p(y);
  return where(logical_and(x == 0.0, logical_not(isnan(y))), zeros_like(product), product);
}

// The torch.special functions of special_unary / special_binary. Those PyTorch gives no
// derivative run under NoGradGuard: their results need no gradient, as PyTorch's.
Tensor i0(const Tensor& x) { return special_unary(x, "i0"); }
Tensor special_i0e(const Tensor& x) { return special_unary(x, "i0e"); }
Tensor special_i1(const Tensor& x) { return special_unary(x, "i1"); }
Tensor special_i1e(const Tensor& x) { return special_unary(x, "i1e"); }
Tensor special_erfcx(const Tensor& x) { return special_unary(x, "erfcx"); }
Tensor special_log_ndtr(const Tensor& x) { return special_unary(x, "log_ndtr"); }

namespace {
Tensor without_grad(const Tensor& x, const char* fn) {
  autograd::NoGradGuard no_grad;
  return special_unary(x, fn);
}
Tensor without_grad(const Tensor& x, const Tensor& n, const char* fn) {
  autograd::NoGradGuard no_grad;
  return special_binary(x, n, fn);
}
}  // namespace

Tensor special_modified_bessel_i0(const Tensor& x) { return without_grad(x, "i0"); }
Tensor special_modified_bessel_i1(const Tensor& x) { return without_grad(x, "i1"); }
Tensor special_bessel_j0(const Tensor& x) { return without_grad(x, "bessel_j0"); }
Tensor special_bessel_j1(const Tensor& x) { return without_grad(x, "bessel_j1"); }
Tensor special_bessel_y0(const Tensor& x) { return without_grad(x, "bessel_y0"); }
Tensor special_bessel_y1(const Tensor& x) { return without_grad(x, "bessel_y1"); }
Tensor special_modified_bessel_k0(const Tensor& x) { return without_grad(x, "modified_bessel_k0"); }
Tensor special_modified_bessel_k1(const Tensor& x) { return without_grad(x, "modified_bessel_k1"); }
Tensor special_scaled_modified_bessel_k0(const Tensor& x) {
  return without_grad(x, "scaled_modified_bessel_k0");
}
Tensor special_scaled_modified_bessel_k1(const Tensor& x) {
  return without_grad(x, "scaled_modified_bessel_k1");
}
Tensor special_airy_ai(const Tensor& x) { return without_grad(x, "airy_ai"); }
Tensor special_spherical_bessel_j0(const Tensor& x) {
  return without_grad(x, "spherical_bessel_j0");
}
Tensor special_zeta(const Tensor& x, const Tensor& q) { return special_binary(x, q, "zeta"); }
Tensor special_gammainc(const Tensor& a, const Tensor& x) {
  return special_binary(a, x, "gammainc");
}
Tensor special_gammaincc(const Tensor& a, const Tensor& x) {
  return special_binary(a, x, "gammaincc");
}
Tensor igamma(const Tensor& a, const Tensor& x) { return special_gammainc(a, x); }
Tensor igammac(const Tensor& a, const Tensor& x) { return special_gammaincc(a, x); }
Tensor special_chebyshev_polynomial_t(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "chebyshev_polynomial_t");
}
Tensor special_chebyshev_polynomial_u(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "chebyshev_polynomial_u");
}
Tensor special_chebyshev_polynomial_v(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "chebyshev_polynomial_v");
}
Tensor special_chebyshev_polynomial_w(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "chebyshev_polynomial_w");
}
Tensor special_shifted_chebyshev_polynomial_t(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "shifted_chebyshev_polynomial_t");
}
Tensor special_shifted_chebyshev_polynomial_u(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "shifted_chebyshev_polynomial_u");
}
Tensor special_shifted_chebyshev_polynomial_v(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "shifted_chebyshev_polynomial_v");
}
Tensor special_shifted_chebyshev_polynomial_w(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "shifted_chebyshev_polynomial_w");
}
Tensor special_hermite_polynomial_h(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "hermite_polynomial_h");
}
Tensor special_hermite_polynomial_he(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "hermite_polynomial_he");
}
Tensor special_laguerre_polynomial_l(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "laguerre_polynomial_l");
}
Tensor special_legendre_polynomial_p(const Tensor& x, const Tensor& n) {
  return without_grad(x, n, "legendre_polynomial_p");
}

Tensor special_i0(const Tensor& x) { return i0(x); }
Tensor special_expit(const Tensor& x) { return sigmoid(x); }
Tensor special_logit(const Tensor& x, std::optional<double> eps) { return logit(x, eps); }
Tensor special_exp2(const Tensor& x) { return exp2(x); }
Tensor special_expm1(const Tensor& x) { return expm1(x); }
Tensor special_log1p(const Tensor& x) { return log1p(x); }
Tensor special_erf(const Tensor& x) { return erf(x); }
Tensor special_erfc(const Tensor& x) { return erfc(x); }
Tensor special_erfinv(const Tensor& x) { return erfinv(x); }
Tensor special_gammaln(const Tensor& x) { return lgamma(x); }
Tensor special_digamma(const Tensor& x) { return digamma(x); }
Tensor special_psi(const Tensor& x) { return digamma(x); }
Tensor special_polygamma(int64_t n, const Tensor& x) { return polygamma(n, x); }
Tensor special_multigammaln(const Tensor& x, int64_t p) { return mvlgamma(x, p); }
Tensor special_round(const Tensor& x) { return round(x); }
Tensor special_sinc(const Tensor& x) { return sinc(x); }
Tensor special_xlogy(const Tensor& x, const Tensor& y) { return xlogy(x, y); }
Tensor special_logsumexp(const Tensor& x, const IntList& dims, bool keepdim) {
  return logsumexp(x, dims, keepdim);
}
Tensor special_softmax(const Tensor& x, int64_t dim) { return softmax(x, dim); }
Tensor special_log_softmax(const Tensor& x, int64_t dim) { return log_softmax(x, dim); }

Tensor mvlgamma(const Tensor& x, int64_t p) {
  KILN_CHECK(p >= 1, value, "[mvlgamma] p must be >= 1, got {}", p);
  Tensor fx = is_floating(x.dtype()) ? x : to(x, f32);  // integers compute in f32, as PyTorch 1.13
  // Σ_i lgamma(x - i/2) over a trailing dim of p offsets, + p (p - 1) / 4 ln π.
  Tensor offsets = arange(0, p, 1, {.dtype = fx.dtype(), .device = fx.device()}) * -0.5;
  Tensor terms = lgamma(unsqueeze(fx, -1) + offsets);
  return sum(terms, {-1}) + static_cast<double>(p * (p - 1)) / 4 * std::log(std::numbers::pi);
}

Tensor special_ndtr(const Tensor& x) {
  // f16/bf16: PyTorch's (1 + erf(x / sqrt 2)) / 2, rounded step by step in the dtype, so
  // the results agree; f32/f64 take erfc, which keeps the lower tail's relative precision.
  if (x.dtype() == DType::f16 || x.dtype() == DType::bf16)
    return (erf(x * (std::numbers::sqrt2 / 2)) + 1.0) * 0.5;
  return erfc(x * -std::numbers::sqrt2 / 2) * 0.5;
}

Tensor special_ndtri(const Tensor& p) {
  // Solved in the lower tail, q = min(p, 1 - p) (ndtr keeps its relative precision
  // there, erfinv(2p - 1) would not): Abramowitz & Stegun 26.2.23 as the start (error
  // < 4.5e-4), three Newton steps on ndtr(y) = q, then the sign.
  Tensor fp = is_floating(p.dtype()) ? p : to(p, f32);
  Tensor q = minimum(fp, 1.0 - fp);
  Tensor safe = where(q > 0.0, q, full_like(q, 0.5));
  Tensor t = sqrt(log(safe) * -2.0);
  Tensor y = neg(t - (2.515517 + t * (0.802853 + t * 0.010328)) /
                         (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
  for (int i = 0; i < 3; ++i) {
    Tensor pdf = exp(y * y * -0.5) * (1 / std::sqrt(2 * std::numbers::pi));
    y = y - (special_ndtr(y) - safe) / pdf;
  }
  Tensor x = where(fp < 0.5, y, neg(y));
  const double inf = std::numeric_limits<double>::infinity();
  Tensor edge = where(q == 0.0, where(fp < 0.5, full_like(fp, -inf), full_like(fp, inf)),
                      full_like(fp, std::numeric_limits<double>::quiet_NaN()));
  return where(q > 0.0, x, edge);
}

Tensor special_entr(const Tensor& x) {
  Tensor fx = is_floating(x.dtype()) ? x : to(x, f32);
  Tensor safe = where(fx > 0.0, fx, ones_like(fx));
  Tensor inner =
      where(fx == 0.0, zeros_like(fx), full_like(fx, -std::numeric_limits<double>::infinity()));
  return where(fx > 0.0, neg(safe * log(safe)), where(isnan(fx), fx, inner));
}

Tensor sinc(const Tensor& x) {
  // pi as the dtype holds it (PyTorch multiplies by pi of the element type: 3.140625 in bf16).
  double pi = x.dtype() == DType::bf16  ? float(BFloat16(float(std::numbers::pi)))
              : x.dtype() == DType::f16 ? float(Half(float(std::numbers::pi)))
                                        : std::numbers::pi;
  Tensor px = x * pi;
  Tensor safe = where(x == 0.0, ones_like(px), px);
  return where(x == 0.0, ones_like(px), sin(safe) / safe);
}

Tensor logit(const Tensor& x, std::optional<double> eps) {
  Tensor z = eps ? clamp(x, *eps, 1.0 - *eps) : x;
  return log(z / (1.0 - z));
}

Tensor deg2rad(const Tensor& x) { return x * (std::numbers::pi / 180.0); }
Tensor rad2deg(const Tensor& x) { return x * (180.0 / std::numbers::pi); }
Tensor frac(const Tensor& x) { return x - trunc(x); }
Tensor square(const Tensor& x) {
  Tensor t = x.dtype() == DType::b8 ? to(x, DType::i64) : x;  // pow(x, 2): bool promotes to i64
  return t * t;
}

Tensor signbit(const Tensor& x) {
  if (!is_floating(x.dtype())) return x < 0;
  return logical_or(x < 0.0, logical_and(x == 0.0, reciprocal(x) < 0.0));
}

Tensor copysign(const Tensor& a, const Tensor& b) {
  Tensor magnitude = abs(is_floating(a.dtype()) ? a : to(a, DType::f32));
  return where(signbit(b), neg(magnitude), magnitude);
}

Tensor heaviside(const Tensor& x, const Tensor& values) {
  return where(x == 0, values + zeros_like(x), to(x > 0, ops::result_type(x, values)));
}

Tensor float_power(const Tensor& a, const Tensor& exponent) {
  return pow(to(a, DType::f64), to(exponent, DType::f64));
}
Tensor float_power(const Tensor& a, Scalar exponent) {
  return pow(to(a, DType::f64), exponent.to_double());
}

Tensor nansum(const Tensor& x, const IntList& dims, bool keepdim) {
  return sum(is_floating(x.dtype()) ? masked_fill(x, isnan(x), 0) : x, dims, keepdim);
}
Tensor nanmean(const Tensor& x, const IntList& dims, bool keepdim) {
  return nansum(x, dims, keepdim) / sum(logical_not(isnan(x)), dims, keepdim);
}

std::pair<Tensor, Tensor> var_mean(const Tensor& x, const IntList& dims, int64_t correction,
                                   bool keepdim) {
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}
std::pair<Tensor, Tensor> std_mean(const Tensor& x, const IntList& dims, int64_t correction,
                                   bool keepdim) {
  return {std(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::pair<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  IntList dims = dim ? IntList{*dim} : IntList{};
  if (x.dim() == 0 && dim && keepdim) {  // PyTorch reads a 0-dim input as [1] here
    wrap_dim(*dim, 1, "aminmax");
    return {reshape(clone(x), {1}), reshape(clone(x), {1})};
  }
  return {amin(x, dims, keepdim), amax(x, dims, keepdim)};
}

Tensor diff(const Tensor& x, int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) {
  KILN_CHECK(x.dim() > 0, shape, "[diff] expects a tensor of at least 1 dim");
  KILN_CHECK(n >= 0, value, "[diff] order must be non-negative, got {}", n);
  int64_t d = wrap_dim(dim, x.dim(), "diff");
  if (n == 0) return clone(x);  // PyTorch returns the input, leaving prepend and append out
  TensorList parts;
  if (prepend.defined()) parts.push_back(prepend);
  parts.push_back(x);
  if (append.defined()) parts.push_back(append);
  Tensor y = parts.size() > 1 ? cat(parts, d) : x;
  for (int64_t i = 0; i < n && y.sym_size(d) > 0; ++i) {  // (Y2) the length may be symbolic
    SymInt len = y.sym_size(d) - 1;
    Tensor later = slice(y, d, SymInt(1), std::nullopt), earlier = slice(y, d, SymInt(0), len);
    y = y.dtype() == DType::b8 ? logical_xor(later, earlier) : later - earlier;
  }
  return y;
}

Tensor tensordot(const Tensor& a, const Tensor& b, const IntList& dims_a, const IntList& dims_b) {
  KILN_CHECK(dims_a.size() == dims_b.size(), value,
             "[tensordot] both sides need as many dims to contract ({} vs {})", dims_a.size(),
             dims_b.size());
  std::vector<bool> ca(static_cast<size_t>(a.dim()), false),
      cb(static_cast<size_t>(b.dim()), false);
  IntList perm_a, perm_b, out;
  int64_t k = 1, m = 1, n = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    int64_t da = wrap_dim(dims_a[i], a.dim(), "tensordot"),
            db = wrap_dim(dims_b[i], b.dim(), "tensordot");
    KILN_CHECK(a.size(da) == b.size(db), shape,
               "[tensordot] contracted dims differ in size: {} (dim {} of {}) vs {} (dim {} of {})",
               a.size(da), da, a.meta_str(), b.size(db), db, b.meta_str());
    ca[static_cast<size_t>(da)] = cb[static_cast<size_t>(db)] = true;
    k *= a.size(da);
  }
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!ca[static_cast<size_t>(d)]) perm_a.push_back(d), out.push_back(a.size(d)), m *= a.size(d);
  for (int64_t d : dims_a) perm_a.push_back(wrap_dim(d, a.dim(), "tensordot"));
  for (int64_t d : dims_b) perm_b.push_back(wrap_dim(d, b.dim(), "tensordot"));
  for (int64_t d = 0; d < b.dim(); ++d)
    if (!cb[static_cast<size_t>(d)]) perm_b.push_back(d), out.push_back(b.size(d)), n *= b.size(d);
  Tensor product = mm(reshape(permute(a, perm_a), {m, k}), reshape(permute(b, perm_b), {k, n}));
  return reshape(product, out);
}
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  KILN_CHECK(dims >= 0 && dims <= a.dim() && dims <= b.dim(), value,
             "[tensordot] cannot contract {} dims of {} and {}", dims, a.meta_str(), b.meta_str());
  IntList da, db;
  for (int64_t i = 0; i < dims; ++i) {
    da.push_back(a.dim() - dims + i);
    db.push_back(i);
  }
  return tensordot(a, b, da, db);
}

Tensor block_diag(const TensorList& tensors) {
  KILN_CHECK(!tensors.empty(), value, "[block_diag] needs at least one tensor");
  DType dtype = tensors[0].dtype();
  for (const Tensor& t : tensors) dtype = promote_types(dtype, t.dtype());
  TensorList blocks;
  int64_t cols = 0;
  for (const Tensor& t : tensors) {
    KILN_CHECK(t.dim() <= 2, shape, "[block_diag] takes tensors of at most 2 dims, got {}",
               t.meta_str());
    blocks.push_back(t.dim() == 2 ? t : reshape(t, {1, t.dim() == 1 ? t.size(0) : 1}));
    cols += blocks.back().size(1);
  }
  TensorList rows;
  int64_t left = 0;
  TensorOptions o{.dtype = dtype, .device = tensors[0].device()};
  for (const Tensor& b : blocks) {
    int64_t r = b.size(0), c = b.size(1);
    rows.push_back(cat({zeros({r, left}, o), to(b, dtype), zeros({r, cols - left - c}, o)}, 1));
    left += c;
  }
  return cat(rows, 0);
}

TensorList meshgrid(const TensorList& tensors, std::string_view indexing) {
  KILN_CHECK(indexing == "ij" || indexing == "xy", value,
             "[meshgrid] indexing must be 'ij' or 'xy', got '{}'", indexing);
  IntList shape;
  for (const Tensor& t : tensors) {
    KILN_CHECK(t.dim() <= 1, shape, "[meshgrid] expects 0-D or 1-D tensors, got {}", t.meta_str());
    KILN_CHECK(t.dtype() == tensors[0].dtype(), dtype,
               "[meshgrid] expects all tensors to have the same dtype, got {} and {}",
               tensors[0].dtype(), t.dtype());
    shape.push_back(t.numel());
  }
  bool xy = indexing == "xy" && tensors.size() >= 2;
  if (xy) std::swap(shape[0], shape[1]);
  TensorList out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t at = xy && i < 2 ? 1 - i : i;
    IntList view_shape(tensors.size(), 1);
    view_shape[at] = tensors[i].numel();
    out.push_back(expand(reshape(tensors[i], view_shape), shape));
  }
  return out;
}

Tensor cartesian_prod(const TensorList& tensors) {
  if (tensors.size() == 1) return tensors[0];
  TensorList grids = meshgrid(tensors);
  for (Tensor& g : grids) g = flatten(g);
  return stack(grids, 1);
}

Tensor tile(const Tensor& x, const IntList& reps) {
  IntList r = reps;
  while (static_cast<int64_t>(r.size()) < x.dim()) r.insert(r.begin(), 1);
  return repeat(x, r);
}

Tensor rot90(const Tensor& x, int64_t k, const IntList& dims) {
  KILN_CHECK(dims.size() == 2, value, "[rot90] expects two dims, got {}", dims.size());
  int64_t d0 = wrap_dim(dims[0], x.dim(), "rot90"), d1 = wrap_dim(dims[1], x.dim(), "rot90");
  KILN_CHECK(x.dim() >= 2 && d0 != d1, value,
             "[rot90] expects two different dims of a tensor of at least 2 dims");
  switch (((k % 4) + 4) % 4) {
    case 1: return transpose(flip(x, {d1}), d0, d1);
    case 2: return flip(x, {d0, d1});
    case 3: return flip(transpose(x, d0, d1), {d1});
    default: return clone(x);
  }
}
Tensor fliplr(const Tensor& x) {
  KILN_CHECK(x.dim() >= 2, shape, "[fliplr] expects a tensor of at least 2 dims, got {}",
             x.meta_str());
  return flip(x, {1});
}
Tensor flipud(const Tensor& x) {
  KILN_CHECK(x.dim() >= 1, shape, "[flipud] expects a tensor of at least 1 dim, got {}",
             x.meta_str());
  return flip(x, {0});
}

namespace {
Tensor triangle_indices(int64_t rows, int64_t cols, int64_t offset, TensorOptions options,
                        bool lower, const char* op) {
  KILN_CHECK(rows >= 0 && cols >= 0, value,
             "[{}] rows and cols must be non-negative, got {} and {}", op, rows, cols);
  std::vector<int64_t> r, c;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (lower ? j - i <= offset : j - i >= offset) r.push_back(i), c.push_back(j);
  r.insert(r.end(), c.begin(), c.end());
  auto n = static_cast<int64_t>(c.size());
  return to(from_vector(r, {2, n}), options.device.value_or(Device(DeviceType::cpu, 0)),
            options.dtype);
}
}  // namespace
Tensor tril_indices(int64_t rows, int64_t cols, int64_t offset, TensorOptions options) {
  return triangle_indices(rows, cols, offset, options, true, "tril_indices");
}
Tensor triu_indices(int64_t rows, int64_t cols, int64_t offset, TensorOptions options) {
  return triangle_indices(rows, cols, offset, options, false, "triu_indices");
}

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right, bool out_int32,
                    const Tensor& sorter) {
  if (sorter.defined()) {
    KILN_CHECK(sorter.shape() == sorted_sequence.shape(), shape,
               "[searchsorted] sorter {} must have the shape of sorted_sequence {}",
               sorter.meta_str(), sorted_sequence.meta_str());
    return searchsorted(take_along_dim(sorted_sequence, sorter, -1), values, right, out_int32);
  }
  const Tensor& s = sorted_sequence;
  KILN_CHECK(s.dim() >= 1, shape, "[searchsorted] sorted_sequence needs at least 1 dim, got {}",
             s.meta_str());
  KILN_CHECK(
      s.dim() == 1 || (values.dim() == s.dim() &&
                       std::equal(s.shape().begin(), s.shape().end() - 1, values.shape().begin())),
      shape,
      "[searchsorted] sorted_sequence {} and values {} must share all but the last dim (or the "
      "sequence be 1-D)",
      s.meta_str(), values.meta_str());
  Tensor seq = unsqueeze(s, -2);  // [..., 1, M] against values [..., K, 1]
  Tensor v = unsqueeze(values, -1);
  Tensor positions = sum(right ? le(seq, v) : lt(seq, v), {-1});
  return out_int32 ? to(positions, DType::i32) : positions;
}
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool right, bool out_int32) {
  KILN_CHECK(boundaries.dim() == 1, shape, "[bucketize] boundaries must be 1-D, got {}",
             boundaries.meta_str());
  if (x.dim() == 0) return reshape(searchsorted(boundaries, reshape(x, {1}), right, out_int32), {});
  return searchsorted(boundaries, x, right, out_int32);
}

Tensor histc(const Tensor& x, int64_t bins, double min, double max) {
  KILN_CHECK(bins > 0, value, "[histc] bins must be > 0, got {}", bins);
  KILN_CHECK(is_floating(x.dtype()), dtype, "[histc] expects a floating input, got {}", x.dtype());
  KILN_CHECK(min <= max, value, "[histc] max must be larger than min, got {} and {}", min, max);
  if (min == max && x.numel() > 0) {  // the data's range (a host read)
    min = item<double>(amin(x));
    max = item<double>(amax(x));
  }
  if (min == max) {
    min -= 1;
    max += 1;
  }
  Tensor flat = flatten(x);
  // The edges as x's dtype holds them, and the bin (x - lo) * bins / (hi - lo) rounded step
  // by step in that dtype (f64 for f16/bf16): PyTorch's f32/f64 kernel, so elements near an
  // edge fall in its bin.
  DType step_type = x.dtype() == DType::f16 || x.dtype() == DType::bf16 ? DType::f64 : x.dtype();
  // (on the host: under tracing x is fake, and the edges are the call's numbers)
  double lo = min, hi = max, width = max - min;
  if (step_type == DType::f32) {
    float lo32 = static_cast<float>(min), hi32 = static_cast<float>(max);
    lo = lo32, hi = hi32, width = static_cast<double>(hi32 - lo32);
  }
  Tensor wide = to(flat, step_type);
  Tensor inside = logical_and(wide >= lo, wide <= hi);
  Tensor bin = clamp(to(trunc((wide - lo) * bins / width), DType::i64), 0, bins - 1);
  Tensor counts = to(inside, x.dtype());
  return scatter_add(zeros({bins}, {.dtype = x.dtype(), .device = x.device()}), 0, bin, counts);
}

std::pair<Tensor, Tensor> histogram(const Tensor& x, const Tensor& bin_edges, const Tensor& weight,
                                    bool density) {
  KILN_CHECK(is_floating(x.dtype()), dtype, "[histogram] expects a floating input, got {}",
             x.dtype());
  KILN_CHECK(bin_edges.dim() == 1 && bin_edges.numel() >= 2 && bin_edges.dtype() == x.dtype(),
             value,
             "[histogram] expects bin edges as a 1-D tensor of at least 2 elements of the input's "
             "dtype, got {}",
             bin_edges.meta_str());
  KILN_CHECK(!weight.defined() || weight.shape() == x.shape(), shape,
             "[histogram] expects weight of the input's shape {}, got {}", x.meta_str(),
             weight.meta_str());
  int64_t bins = bin_edges.numel() - 1;
  Tensor flat = flatten(x);
  Tensor lo = select(bin_edges, 0, 0), hi = select(bin_edges, 0, bins);
  Tensor inside = logical_and(flat >= lo, flat <= hi);
  // The bin whose [left, right) holds the element; the right edge joins the last bin.
  Tensor bin = clamp(searchsorted(bin_edges, flat, /*right=*/true) - 1, 0, bins - 1);
  Tensor w = weight.defined() ? flatten(to(weight, x.dtype())) : ones_like(flat);
  Tensor hist = scatter_add(zeros({bins}, {.dtype = x.dtype(), .device = x.device()}), 0, bin,
                            where(inside, w, zeros_like(w)));
  if (density) hist = hist / (sum(hist) * diff(bin_edges));
  return {hist, bin_edges};
}

std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins,
                                    std::optional<std::pair<double, double>> range,
                                    const Tensor& weight, bool density) {
  KILN_CHECK(bins > 0, value, "[histogram] bins must be > 0, got {}", bins);
  KILN_CHECK(is_floating(x.dtype()), dtype, "[histogram] expects a floating input, got {}",
             x.dtype());
  double lo = 0, hi = 1;  // the range of no data, as PyTorch's
  if (range) {
    std::tie(lo, hi) = *range;
    KILN_CHECK(lo <= hi, value, "[histogram] max must be larger than min, got {} and {}", lo, hi);
  } else if (x.numel() > 0) {  // the data's range (a host read)
    lo = item<double>(amin(x));
    hi = item<double>(amax(x));
  }
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  return histogram(x, linspace(lo, hi, bins + 1, {.dtype = x.dtype(), .device = x.device()}),
                   weight, density);
}

std::pair<Tensor, TensorList> histogramdd(const Tensor& x, const TensorList& bin_edges,
                                          const Tensor& weight, bool density) {
  KILN_CHECK(is_floating(x.dtype()), dtype, "[histogramdd] expects a floating input, got {}",
             x.dtype());
  KILN_CHECK(x.dim() >= 1 && static_cast<int64_t>(bin_edges.size()) == x.size(-1), shape,
             "[histogramdd] expects points [..., D] with D ({}) bin-edge tensors, got {}",
             bin_edges.size(), x.meta_str());
  IntList leading(x.shape().begin(), x.shape().end() - 1);
  KILN_CHECK(!weight.defined() || IntList(weight.shape().begin(), weight.shape().end()) == leading,
             shape, "[histogramdd] expects one weight per point of {}, got {}", x.meta_str(),
             weight.meta_str());
  int64_t dims = x.size(-1);
  Tensor points = reshape(x, {-1, dims});
  Tensor w = weight.defined() ? flatten(to(weight, x.dtype()))
                              : ones({points.size(0)}, {.dtype = x.dtype(), .device = x.device()});
  Tensor inside, cell;  // per point: within every dim's edges; the flat index of its cell
  IntList counts;
  for (int64_t d = 0; d < dims; ++d) {
    const Tensor& e = bin_edges[static_cast<size_t>(d)];
    KILN_CHECK(e.dim() == 1 && e.numel() >= 2 && e.dtype() == x.dtype(), value,
               "[histogramdd] expects the bin edges of dim {} as a 1-D tensor of at least 2 "
               "elements of the input's "
               "dtype, got {}",
               d, e.meta_str());
    int64_t bins = e.numel() - 1;
    Tensor col = select(points, 1, d);
    Tensor in_d = logical_and(col >= select(e, 0, 0), col <= select(e, 0, bins));
    Tensor bin = clamp(searchsorted(e, col, /*right=*/true) - 1, 0,
                       bins - 1);  // the right edge joins the last bin
    inside = inside.defined() ? logical_and(inside, in_d) : in_d;
    cell = cell.defined() ? cell * bins + bin : bin;
    counts.push_back(bins);
  }
  int64_t cells = 1;
  for (int64_t c : counts) cells *= c;
  Tensor hist = scatter_add(zeros({cells}, {.dtype = x.dtype(), .device = x.device()}), 0, cell,
                            where(inside, w, zeros_like(w)));
  hist = reshape(hist, counts);
  if (density) {  // the total times each cell's volume, the product of its widths
    Tensor volume;
    for (int64_t d = 0; d < dims; ++d) {
      IntList view(static_cast<size_t>(dims), 1);
      view[static_cast<size_t>(d)] = counts[static_cast<size_t>(d)];
      Tensor widths = reshape(diff(bin_edges[static_cast<size_t>(d)]), view);
      volume = volume.defined() ? volume * widths : widths;
    }
    hist = hist / (sum(hist) * volume);
  }
  return {hist, bin_edges};
}

std::pair<Tensor, TensorList> histogramdd(const Tensor& x, const IntList& bins,
                                          const std::vector<double>& range, const Tensor& weight,
                                          bool density) {
  KILN_CHECK(is_floating(x.dtype()), dtype, "[histogramdd] expects a floating input, got {}",
             x.dtype());
  KILN_CHECK(x.dim() >= 1, shape, "[histogramdd] expects points [..., D], got {}", x.meta_str());
  int64_t dims = x.size(-1);
  KILN_CHECK(bins.size() == 1 || static_cast<int64_t>(bins.size()) == dims, value,
             "[histogramdd] expects one bin count or {} (one per dim), got {}", dims, bins.size());
  KILN_CHECK(range.empty() || static_cast<int64_t>(range.size()) == 2 * dims, value,
             "[histogramdd] expects range as {} numbers (min and max per dim), got {}", 2 * dims,
             range.size());
  Tensor points = reshape(x, {-1, dims}), lows, highs;
  if (range.empty() && points.size(0) > 0) {  // each coordinate's data range (a host read)
    lows = to(amin(points, {0}), DType::f64);
    highs = to(amax(points, {0}), DType::f64);
  }
  TensorList edges;
  for (int64_t d = 0; d < dims; ++d) {
    int64_t b = bins.size() == 1 ? bins[0] : bins[static_cast<size_t>(d)];
    KILN_CHECK(b > 0, value, "[histogramdd] bins must be > 0, got {} for dim {}", b, d);
    double lo = 0, hi = 0;
    if (!range.empty()) {
      lo = range[static_cast<size_t>(2 * d)], hi = range[static_cast<size_t>(2 * d + 1)];
      KILN_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, value,
                 "[histogramdd] expects a finite range with min <= max, got [{}, {}] for dim {}",
                 lo, hi, d);
    } else if (lows.defined()) {
      lo = item<double>(select(lows, 0, d)), hi = item<double>(select(highs, 0, d));
    }
    if (lo == hi) {
      lo -= 0.5;
      hi += 0.5;
    }
    edges.push_back(linspace(lo, hi, b + 1, {.dtype = x.dtype(), .device = x.device()}));
  }
  return histogramdd(x, edges, weight, density);
}

namespace {

// f's derivative along dim d from sample coordinates x ([n], x's dtype) or, when x is
// undefined, the uniform spacing h: numpy's second-order-accurate formulas inside,
// first- or second-order one-sided ones at the two ends.
Tensor gradient_along(const Tensor& f, int64_t d, const Tensor& x, double h, int64_t edge_order) {
  int64_t n = f.size(d);
  KILN_CHECK(n >= edge_order + 1, value,
             "[gradient] torch.gradient expected each dimension size to be at least edge_order+1, "
             "got {} along dim {}",
             n, d);
  auto part = [&](int64_t start, int64_t length) { return narrow(f, d, start, length); };
  // The spacings as tensors broadcasting along dim d ([n - 1] reshaped), or numbers.
  IntList shape(static_cast<size_t>(f.dim()), 1);
  shape[static_cast<size_t>(d)] = -1;
  auto spacing = [&](int64_t start, int64_t length) {
    Tensor dx = narrow(diff(x), 0, start, length);
    return reshape(dx, shape);
  };
  bool uniform = !x.defined();
  auto sp = [&](int64_t start, int64_t length) {
    return uniform ? full({1}, h, {.dtype = f.dtype(), .device = f.device()})
                   : spacing(start, length);
  };
  Tensor inner;
  if (n > 2) {
    Tensor hl = sp(0, n - 2), hr = sp(1, n - 2);
    inner = (hl * hl * part(2, n - 2) - hr * hr * part(0, n - 2) +
             (hr * hr - hl * hl) * part(1, n - 2)) /
            (hl * hr * (hl + hr));
  }
  Tensor first, last;
  if (edge_order == 1) {
    first = (part(1, 1) - part(0, 1)) / sp(0, 1);
    last = (part(n - 1, 1) - part(n - 2, 1)) / sp(n - 2, 1);
  } else {
    Tensor d1 = sp(0, 1), d2 = sp(1, 1);
    first = part(0, 1) * (neg(d1 * 2.0 + d2) / (d1 * (d1 + d2))) +
            part(1, 1) * ((d1 + d2) / (d1 * d2)) - part(2, 1) * (d1 / (d2 * (d1 + d2)));
    Tensor e1 = sp(n - 3, 1), e2 = sp(n - 2, 1);
    last = part(n - 3, 1) * (e2 / (e1 * (e1 + e2))) - part(n - 2, 1) * ((e1 + e2) / (e1 * e2)) +
           part(n - 1, 1) * ((e2 * 2.0 + e1) / (e2 * (e1 + e2)));
  }
  return inner.defined() ? cat({first, inner, last}, d) : cat({first, last}, d);
}

IntList gradient_dims(const Tensor& f, const IntList& dims) {
  IntList out;
  if (dims.empty())
    for (int64_t d = 0; d < f.dim(); ++d) out.push_back(d);
  for (int64_t d : dims) out.push_back(d < 0 ? d + f.dim() : d);
  for (size_t i = 0; i < out.size(); ++i) {
    KILN_CHECK(out[i] >= 0 && out[i] < f.dim(), index, "[gradient] dim out of range for {}",
               f.meta_str());
    KILN_CHECK(std::find(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(i), out[i]) ==
                   out.begin() + static_cast<std::ptrdiff_t>(i),
               value, "[gradient] dim {} appears multiple times in the list of dims", out[i]);
  }
  return out;
}

Tensor gradient_input(const Tensor& f, int64_t edge_order) {
  KILN_CHECK(edge_order == 1 || edge_order == 2, value,
             "[gradient] torch.gradient only supports edge_order=1 and "
             "edge_order=2, got {}",
             edge_order);
  return is_floating(f.dtype()) ? f : to(f, DType::f32);
}

}  // namespace

TensorList gradient(const Tensor& f, const std::vector<double>& spacing, const IntList& dims,
                    int64_t edge_order) {
  Tensor ff = gradient_input(f, edge_order);
  IntList ds = gradient_dims(f, dims);
  KILN_CHECK(
      spacing.size() == 1 || spacing.size() == ds.size(), value,
      "[gradient] expected spacing to be unspecified, a scalar or one value per dim ({}), got {}",
      ds.size(), spacing.size());
  TensorList out;
  for (size_t i = 0; i < ds.size(); ++i)
    out.push_back(
        gradient_along(ff, ds[i], Tensor(), spacing[spacing.size() == 1 ? 0 : i], edge_order));
  return out;
}

TensorList gradient(const Tensor& f, const TensorList& coordinates, const IntList& dims,
                    int64_t edge_order) {
  Tensor ff = gradient_input(f, edge_order);
  IntList ds = gradient_dims(f, dims);
  KILN_CHECK(coordinates.size() == ds.size(), value,
             "[gradient] expected one coordinate tensor per dim ({}), got {}", ds.size(),
             coordinates.size());
  TensorList out;
  for (size_t i = 0; i < ds.size(); ++i) {
    const Tensor& x = coordinates[i];
    KILN_CHECK(
        x.dim() == 1 && x.size(0) == f.size(ds[i]), shape,
        "[gradient] expected the coordinates of dim {} as a 1-D tensor of {} elements, got {}",
        ds[i], f.size(ds[i]), x.meta_str());
    out.push_back(gradient_along(ff, ds[i], to(x, ff.dtype()), 1.0, edge_order));
  }
  return out;
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x,
                                                     const IntList& normalized_shape,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps) {
  Tensor y = layer_norm(x, normalized_shape, weight, bias, eps);
  IntList dims;
  for (size_t i = 0; i < normalized_shape.size(); ++i)
    dims.push_back(x.dim() - 1 - static_cast<int64_t>(i));
  Tensor m = mean(x, dims, true);
  return {y, m, rsqrt(var(x, dims, /*correction=*/0, true) + eps)};
}

Tensor segment_reduce(const Tensor& data, const std::string& reduce, const Tensor& lengths,
                      const Tensor& offsets, int64_t axis, std::optional<double> initial) {
  static const std::map<std::string, std::string> kScatter = {
      {"sum", "sum"}, {"mean", "sum"}, {"max", "amax"}, {"min", "amin"}, {"prod", "prod"}};
  auto it = kScatter.find(reduce);
  KILN_CHECK(it != kScatter.end(), value,
             "[segment_reduce] reduce must be sum, mean, max, min or prod, got '{}'", reduce);
  KILN_CHECK(lengths.defined() != offsets.defined(), value,
             "[segment_reduce] expects exactly one of lengths and offsets");
  Tensor lens = lengths.defined() ? lengths : diff(offsets);
  KILN_CHECK(lens.dim() == 1 && !is_floating(lens.dtype()), value,
             "[segment_reduce] expects 1-D integer lengths (or offsets), got {}", lens.meta_str());
  KILN_CHECK(axis == 0 && data.dim() >= 1, value,
             "[segment_reduce] expected axis to be the last dimension of lengths (0), got {}",
             axis);
  KILN_CHECK(item<int64_t>(sum(lens)) == data.size(0) && !item<bool>(any(lens < 0)), value,
             "[segment_reduce] expects non-negative lengths that sum to data's size along axis "
             "({}), got {}",
             data.size(0), lens.meta_str());
  int64_t segments = lens.size(0);
  double identity = reduce == "max"    ? -std::numeric_limits<double>::infinity()
                    : reduce == "min"  ? std::numeric_limits<double>::infinity()
                    : reduce == "prod" ? 1.0
                                       : 0.0;
  IntList shape(data.shape().begin(), data.shape().end());
  shape[0] = segments;
  Tensor start =
      full(shape, initial.value_or(identity), {.dtype = data.dtype(), .device = data.device()});
  Tensor ids = repeat_interleave(
      arange(0, segments, 1, {.dtype = DType::i64, .device = data.device()}), to(lens, DType::i64));
  IntList view(static_cast<size_t>(data.dim()), 1);
  view[0] = -1;
  Tensor index = expand(reshape(ids, view), IntList(data.shape().begin(), data.shape().end()));
  Tensor out = scatter_reduce(start, 0, index, data, it->second, /*include_self=*/true);
  if (reduce != "mean") return out;
  Tensor count = reshape(to(lens, data.dtype()), view);
  Tensor nan = full_like(out, std::numeric_limits<double>::quiet_NaN());
  return where(count > 0.0, out / where(count > 0.0, count, ones_like(count)), initial ? out : nan);
}

// NaN loses to a number; a tie goes to `a`, and so does its gradient (PyTorch's rule).
Tensor fmax(const Tensor& a, const Tensor& b) { return where(logical_or(a >= b, isnan(b)), a, b); }
Tensor fmin(const Tensor& a, const Tensor& b) { return where(logical_or(a <= b, isnan(b)), a, b); }

namespace {

void check_integers(const Tensor& a, const Tensor& b, const char* op) {
  KILN_CHECK(is_integral(a.dtype(), false) && is_integral(b.dtype(), false), dtype,
             "[{}] is only defined for integer tensors, got {} and {}", op, a.dtype(), b.dtype());
}

}  // namespace

Tensor gcd(const Tensor& a, const Tensor& b) {
  check_integers(a, b, "gcd");
  Tensor x = abs(a) + b * 0, y = abs(b) + a * 0;  // broadcast and promoted together
  // Euclid's steps, as many as the worst case of the dtype needs (Fibonacci neighbours:
  // ~1.44 steps per bit); eagerly, until every pair is done.
  int64_t limit = static_cast<int64_t>(itemsize(x.dtype())) * 8 * 3 / 2 + 2;
  for (int64_t i = 0; i < limit; ++i) {
    if (!y.is_fake() && !y.is_dtensor() && i % 4 == 0 && !item<bool>(any(y != 0))) break;
    Tensor done = y == 0;
    Tensor r = remainder(x, where(done, ones_like(y), y));
    x = where(done, x, y);
    y = where(done, zeros_like(y), r);
  }
  return x;
}

Tensor lcm(const Tensor& a, const Tensor& b) {
  check_integers(a, b, "lcm");
  Tensor g = gcd(a, b);
  return where(g == 0, zeros_like(g), abs(floor_divide(a, where(g == 0, ones_like(g), g)) * b));
}

namespace {

Tensor shift(const Tensor& a, const Tensor& b, bool left) {
  const char* op = left ? "bitwise_left_shift" : "bitwise_right_shift";
  DType rt = ops::result_type(a, b);
  KILN_CHECK(is_integral(rt, false), dtype, "[{}] expects integer tensors, got {} and {}", op,
             a.dtype(), b.dtype());
  Tensor x = to(a, rt), s = to(b, rt);
  int64_t bits = static_cast<int64_t>(itemsize(rt)) * 8;
  bool is_signed = rt != DType::u8;
  // x * 2^s wraps as x << s does; x >> s is floor(x / 2^s) while 2^s fits the type.
  int64_t top = left ? bits - 1 : (is_signed ? bits - 2 : bits - 1);
  Tensor in_range = logical_and(s >= 0, s <= top);
  Tensor power = pow(full_like(s, 2), where(in_range, s, zeros_like(s)));
  Tensor shifted = left ? x * power : floor_divide(x, power);
  Tensor fill = !left && is_signed ? where(x < 0, full_like(x, -1), zeros_like(x)) : zeros_like(x);
  return where(in_range, shifted, fill);
}

}  // namespace

Tensor bitwise_left_shift(const Tensor& a, const Tensor& b) { return shift(a, b, true); }
Tensor bitwise_left_shift(const Tensor& a, Scalar b) { return shift(a, wrapped_number(b), true); }
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b) { return shift(a, b, false); }
Tensor bitwise_right_shift(const Tensor& a, Scalar b) { return shift(a, wrapped_number(b), false); }

std::pair<Tensor, Tensor> frexp(const Tensor& x) {
  KILN_CHECK(is_floating(x.dtype()), dtype, "[frexp] only supports floating-point dtypes, got {}",
             x.dtype());
  // In f64 (every kiln float is exact there): e = floor(log2 |x|) + 1, corrected by one
  // where log2 rounded across a power of two; 2^-e in two halves so subnormals don't
  // overflow it.
  Tensor d = to(x, DType::f64);
  Tensor finite = logical_and(isfinite(d), d != 0.0);
  Tensor safe = where(finite, abs(d), ones_like(d));
  Tensor e = floor(log2(safe)) + 1.0;
  auto scaled = [&](const Tensor& ex) {
    Tensor half = trunc(ex * 0.5);
    return safe * exp2(neg(half)) * exp2(half - ex);
  };
  Tensor m = scaled(e);
  e = where(m >= 1.0, e + 1.0, where(m < 0.5, e - 1.0, e));
  m = scaled(e);
  Tensor mantissa = where(finite, m * sign(d), d);
  return {to(mantissa, x.dtype()), to(where(finite, e, zeros_like(e)), DType::i32)};
}

Tensor nextafter(const Tensor& a, const Tensor& b) {
  // (D2) One of PyTorch's per-op exceptions: nextafter takes no 0-dim CPU tensor beside a
  // tensor on another device. A composite, so eager and fake tensors refuse alike.
  KILN_CHECK(a.device() == b.device(), device_mismatch,
             "[nextafter] Expected all tensors to be on the same device, but found at least two "
             "devices, {} "
             "(argument 'self') and {} (argument 'other'); nextafter has no CPU-scalar exception",
             a.device(), b.device());
  DType rt = ops::result_type(a, b);
  KILN_CHECK(is_floating(rt), dtype, "[nextafter] expects floating tensors, got {} and {}",
             a.dtype(), b.dtype());
  Tensor x = to(a, rt), y = to(b, rt);
  // The format: significand digits, frexp's exponent of the smallest normal, the smallest
  // subnormal and the largest finite value.
  struct Format {
    int64_t digits, min_exp;
    double tiny, largest;
  };
  Format f = rt == DType::f64    ? Format{53, -1021, std::numeric_limits<double>::denorm_min(),
                                       std::numeric_limits<double>::max()}
             : rt == DType::f32  ? Format{24, -125, std::numeric_limits<float>::denorm_min(),
                                         std::numeric_limits<float>::max()}
             : rt == DType::bf16 ? Format{8, -125, std::ldexp(1.0, -133), 3.3895313892515355e38}
                                 : Format{11, -13, std::ldexp(1.0, -24), 65504.0};
  int64_t digits = f.digits, min_exp = f.min_exp;
  double tiny = f.tiny, largest = f.largest;
  auto [m, e] = frexp(x);
  Tensor ef = to(e, rt);
  Tensor up = y > x;                       // the direction
  Tensor away = logical_xor(up, x < 0.0);  // away from zero
  // One unit in the last place at x's binade (clamped to the subnormals'); going toward
  // zero from a power of two, the binade below's.
  Tensor power_of_two = abs(m) == 0.5;
  Tensor ulp_exp =
      where(logical_and(logical_not(away), logical_and(power_of_two, ef > min_exp)), ef - 1.0, ef);
  Tensor step = exp2(maximum(ulp_exp, full_like(ef, static_cast<double>(min_exp))) -
                     static_cast<double>(digits));
  Tensor moved = x + where(up, step, neg(step));
  Tensor from_zero = where(up, full_like(x, tiny), full_like(x, -tiny));
  Tensor from_inf = where(x > 0.0, full_like(x, largest), full_like(x, -largest));
  Tensor r = where(x == 0.0, from_zero, where(isinf(x), from_inf, moved));
  Tensor nan = full_like(x, std::numeric_limits<double>::quiet_NaN());
  return where(logical_or(isnan(x), isnan(y)), nan, where(x == y, y, r));
}

Tensor isin(const Tensor& elements, const Tensor& test_elements, bool /*assume_unique*/,
            bool invert) {
  Tensor hit = any(eq(unsqueeze(elements, -1), reshape(test_elements, {-1})), -1);
  if (test_elements.numel() == 0) hit = zeros_like(elements, {.dtype = DType::b8});
  return invert ? logical_not(hit) : hit;
}

Tensor combinations(const Tensor& x, int64_t r, bool with_replacement) {
  KILN_CHECK(x.dim() == 1, shape, "[combinations] expects a 1-D tensor, got {}", x.meta_str());
  KILN_CHECK(r >= 0, value, "[combinations] r must be non-negative, got {}", r);
  if (r == 0) return empty({0}, {.dtype = x.dtype(), .device = x.device()});
  // The position tuples, enumerated on the host (they depend on the length only).
  int64_t n = x.size(0);
  std::vector<int64_t> flat, pick(static_cast<size_t>(r), 0);
  if (!with_replacement)
    for (int64_t i = 0; i < r; ++i) pick[static_cast<size_t>(i)] = i;
  auto valid = [&] { return !pick.empty() && pick.back() < n; };
  while (valid()) {
    flat.insert(flat.end(), pick.begin(), pick.end());
    int64_t i = r - 1;  // the rightmost position that can still move
    while (i >= 0 && pick[static_cast<size_t>(i)] == (with_replacement ? n - 1 : n - r + i)) --i;
    if (i < 0) break;
    ++pick[static_cast<size_t>(i)];
    for (int64_t j = i + 1; j < r; ++j)
      pick[static_cast<size_t>(j)] = pick[static_cast<size_t>(j - 1)] + (with_replacement ? 0 : 1);
  }
  int64_t count = static_cast<int64_t>(flat.size()) / r;
  Tensor index = to(from_vector<int64_t>(flat, {count * r}), x.device());
  return reshape(index_select(x, 0, index), {count, r});
}

Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta,
              Scalar alpha) {
  KILN_CHECK(batch1.dim() == 3 && batch2.dim() == 3 && batch1.size(0) == batch2.size(0) &&
                 batch1.size(2) == batch2.size(1),
             shape, "[addbmm] expects batches [b, n, m] and [b, m, p], got {} and {}",
             batch1.meta_str(), batch2.meta_str());
  // sum_i batch1[i] batch2[i] is one product: the batches side by side along the inner dim.
  int64_t b = batch1.size(0), n = batch1.size(1), m = batch1.size(2);
  Tensor left = reshape(permute(batch1, {1, 0, 2}), {n, b * m}),
         right = reshape(batch2, {b * m, batch2.size(2)});
  return addmm(input, left, right, beta, alpha);
}

Tensor renorm(const Tensor& x, double p, int64_t dim, double maxnorm) {
  KILN_CHECK(p > 0, value, "[renorm] non-positive norm not supported, got p = {}", p);
  KILN_CHECK(maxnorm >= 0, value, "[renorm] expected maxnorm to be >= 0, got {}", maxnorm);
  KILN_CHECK(x.dim() > 1, shape, "[renorm] needs at least 2 dimensions, got {}", x.meta_str());
  int64_t d = wrap_dim(dim, x.dim(), "renorm");
  IntList others;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d) others.push_back(i);
  // f16/bf16: the norms and factors in f32, one rounding at the end (PyTorch's opmath)
  return in_opmath({x}, [&](const TensorList& t) {
    Tensor norms = vector_norm(t[0], p, others, true);
    return t[0] * where(norms > maxnorm, maxnorm / (norms + 1e-7), ones_like(norms));
  });
}

Tensor distance(const Tensor& a, const Tensor& b, double p) { return vector_norm(a - b, p); }
Tensor frobenius_norm(const Tensor& x, const IntList& dims, bool keepdim) {
  return vector_norm(x, 2.0, dims, keepdim);
}
Tensor nuclear_norm(const Tensor& x, bool keepdim) {
  return linalg::matrix_norm(x, "nuc", keepdim);
}

namespace {

// k = 0 .. n - 1 of a window of `n` points whose formula sees the length n + 1 when
// periodic; `f(k, denominator)` with denominator = (that length) - 1.
template <typename F>
Tensor window(int64_t n, bool periodic, TensorOptions options, const char* op, F f) {
  KILN_CHECK(n >= 0, value, "[{}] requires non-negative window length, got {}", op, n);
  TensorOptions o{.dtype = options.dtype.value_or(DType::f32), .device = options.device};
  KILN_CHECK(is_floating(*o.dtype), dtype, "[{}] expects a floating point dtype, got {}", op,
             *o.dtype);
  if (n == 0) return empty({0}, o);
  if (n == 1) return ones({1}, o);
  double denominator = static_cast<double>(periodic ? n : n - 1);
  return f(arange(0, n, 1, o), denominator);
}

}  // namespace

Tensor hamming_window(int64_t n, bool periodic, double alpha, double beta, TensorOptions options) {
  return window(n, periodic, options, "hamming_window", [&](const Tensor& k, double m) {
    return alpha - beta * cos(k * (2 * std::numbers::pi / m));
  });
}
Tensor hann_window(int64_t n, bool periodic, TensorOptions options) {
  return hamming_window(n, periodic, 0.5, 0.5, options);
}
Tensor blackman_window(int64_t n, bool periodic, TensorOptions options) {
  return window(n, periodic, options, "blackman_window", [](const Tensor& k, double m) {
    return 0.42 - 0.5 * cos(k * (2 * std::numbers::pi / m)) +
           0.08 * cos(k * (4 * std::numbers::pi / m));
  });
}
Tensor bartlett_window(int64_t n, bool periodic, TensorOptions options) {
  return window(n, periodic, options, "bartlett_window",
                [](const Tensor& k, double m) { return 1.0 - abs(k * (2.0 / m) - 1.0); });
}
Tensor kaiser_window(int64_t n, bool periodic, double beta, TensorOptions options) {
  return window(n, periodic, options, "kaiser_window", [&](const Tensor& k, double m) {
    Tensor t = (k - m / 2) / (m / 2);
    return i0(beta * sqrt(clamp_min(1.0 - t * t, 0.0))) / i0(full_like(k, beta));
  });
}

}  // namespace kiln
