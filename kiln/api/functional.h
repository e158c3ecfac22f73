#pragma once
// kiln's functional API: free functions over tensors, each one dispatch() call (or a
// composition of them, like reshape or stack). Argument checks live in the meta
// functions, so every function here is a thin, readable wrapper.

#include <functional>
#include <iosfwd>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/device/registry.h"
#include "kiln/dispatch/dispatch.h"

namespace kiln {

/** Where and how a new tensor is made. Unset fields take the defaults: dtype f32
 * (or the data's type), device cpu:0 (D2). "cuda" resolves to the current cuda device. */
struct TensorOptions {
  std::optional<DType> dtype;
  std::optional<Device> device;
  /** (G1) The new tensor is a leaf that accumulates gradients (floating dtypes only). */
  bool requires_grad = false;
};

// ---- factories ----------------------------------------------------------------
/** A C++ number as a 0-dim host tensor flagged as a wrapped number: it ranks below
 * tensors in type promotion and joins ops on any device (D2). Traced graphs record it
 * as a scalar argument (`mul(%x, 0.125)`), as PyTorch's graphs do. */
Tensor wrapped_number(Scalar value);
/** The number a wrapped-number tensor holds. */
Scalar wrapped_value(const Tensor& t);

Tensor empty(const SymSizes& size, TensorOptions options = {});
Tensor zeros(const SymSizes& size, TensorOptions options = {});
Tensor ones(const SymSizes& size, TensorOptions options = {});
/** Filled with `value`; the default dtype follows the value as in torch.full: i64 for an
 * integer, bool for a bool, f32 for a floating value. */
Tensor full(const SymSizes& size, Scalar value, TensorOptions options = {});
/** [0, end), [start, end) with step; integral bounds give i64 unless a dtype is given. */
Tensor arange(Scalar end, TensorOptions options = {});
/** 0, 1, ..., n - 1 (i64 unless the options say) for a size n that may be symbolic (Y1). */
Tensor arange_of(const SymInt& n, TensorOptions options = {});
/** `n` as a 0-dim tensor (Y1): a size used as a value (a mean's count over a dynamic
 * batch). For a symbolic n, the sum of n ones, so a trace computes it from the run's
 * sizes; default dtype i64. */
Tensor size_as_tensor(const SymInt& n, TensorOptions options = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions options = {});
/** Uniform in [0, 1) / standard normal, from the device's seeded generator. */
Tensor rand(const SymSizes& size, TensorOptions options = {});
Tensor randn(const SymSizes& size, TensorOptions options = {});

/** A tensor holding `values` (shape defaults to 1-D); dtype from T unless given. */
template <typename T>
Tensor from_vector(const std::vector<T>& values, const IntList& shape = {},
                   TensorOptions options = {});
/** A tensor from floating literals, f32 unless a dtype is given: tensor({1, 2, 3}). */
Tensor tensor(std::initializer_list<double> values, const IntList& shape = {},
              TensorOptions options = {});
/** A 0-dim literal: tensor(0.5) is f32[] (PyTorch's default dtype), tensor(3) is
 * i64[], tensor(true) is bool[]. Inside FakeMode literals are fake (F1). */
Tensor tensor(Scalar value, TensorOptions options = {});
/** A 0-dim tensor. */
Tensor scalar_tensor(Scalar value, TensorOptions options = {});

// `*_like`: shape of `t`; dtype and device of `t` unless given (D2).
Tensor empty_like(const Tensor& t, TensorOptions options = {});
Tensor zeros_like(const Tensor& t, TensorOptions options = {});
Tensor ones_like(const Tensor& t, TensorOptions options = {});
Tensor full_like(const Tensor& t, Scalar value, TensorOptions options = {});
Tensor rand_like(const Tensor& t, TensorOptions options = {});
Tensor randn_like(const Tensor& t, TensorOptions options = {});

// ---- elementwise --------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
/** approximate: "none" (erf) or "tanh". */
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
/** grad * gelu'(x), gelu's gradient in one pass. */
Tensor gelu_backward(const Tensor& grad, const Tensor& x, std::string_view approximate = "none");
/** `grad` where `x > threshold`, else 0 (relu's gradient, with x its saved result). */
Tensor threshold_backward(const Tensor& grad, const Tensor& x, const Scalar& threshold);
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
/** 1 / x (float for an integer x). */
Tensor reciprocal(const Tensor& x);
/** Rounding: integer tensors are returned as they are (a copy); bool is refused. round
 * takes halves to even, as torch.round. */
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
/** x rounded to `decimals` decimal places (negative: to tens, hundreds, ...), halves to
 * even, computed in x's floating dtype as torch.round(x, decimals=d); integers refused. */
Tensor round(const Tensor& x, int64_t decimals);
Tensor trunc(const Tensor& x);
/** -1, 0 or 1 (0 for NaN); the identity on bool. */
Tensor sign(const Tensor& x);
/** Each element limited to [min, max] (either bound may be absent, not both); NaN in x or
 * in a bound gives NaN; min > max gives max. The dtype is x's promoted with the bounds
 * (an integer tensor with a float bound is float). */
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor logical_not(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
/** Special functions, as torch's: erfinv (NaN outside [-1, 1], ±inf at ±1), lgamma
 * (ln |Γ|), digamma (ψ; ∓inf at ±0, NaN at negative integers), polygamma(n, x) (ψ⁽ⁿ⁾,
 * n >= 0). Integer inputs compute in f32. */
Tensor erfinv(const Tensor& x);
Tensor lgamma(const Tensor& x);
Tensor digamma(const Tensor& x);
Tensor polygamma(int64_t n, const Tensor& x);
/** The multivariate log-gamma function of dimension p: Σ_{i<p} lgamma(x - i/2) +
 * p (p - 1) / 4 ln π (torch.mvlgamma); every element must exceed (p - 1) / 2. */
Tensor mvlgamma(const Tensor& x, int64_t p);
/** torch.special: the standard normal CDF and its inverse, the entropy term -x ln x (0
 * at 0, -inf below), and x log1p(y) (0 where x is 0 and y is not NaN). */
Tensor special_ndtr(const Tensor& x);
Tensor special_ndtri(const Tensor& p);
Tensor special_entr(const Tensor& x);
Tensor special_xlog1py(const Tensor& x, const Tensor& y);
/** The table ops behind the functions below: `fn` names a function of
 * kiln/ops/special_names.h (an unknown name is a `value` Error). Integer inputs compute in
 * f32; results are exact to a few units of double rounding, then rounded once. */
Tensor special_unary(const Tensor& x, std::string_view fn);
Tensor special_binary(const Tensor& x, const Tensor& y, std::string_view fn);
/** Modified Bessel functions of the first kind, I0 and I1, and their scaled forms
 * e^-|x| I(x) (torch.i0, torch.special.i0e/i1/i1e), differentiable as PyTorch's. */
Tensor i0(const Tensor& x);
Tensor special_i0e(const Tensor& x);
Tensor special_i1(const Tensor& x);
Tensor special_i1e(const Tensor& x);
/** e^{x²} erfc(x) and log Φ(x) (Φ the standard normal CDF), differentiable. */
Tensor special_erfcx(const Tensor& x);
Tensor special_log_ndtr(const Tensor& x);
/** Bessel functions without a derivative in PyTorch (their results need no gradient):
 * J0, J1, Y0, Y1 (NaN at ±inf and, for Y, below 0), I0, I1, K0, K1 and e^x K0, e^x K1
 * (inf at 0, NaN below), Airy Ai, and the spherical j0 = sin(x) / x. */
Tensor special_bessel_j0(const Tensor& x);
Tensor special_bessel_j1(const Tensor& x);
Tensor special_bessel_y0(const Tensor& x);
Tensor special_bessel_y1(const Tensor& x);
Tensor special_modified_bessel_i0(const Tensor& x);
Tensor special_modified_bessel_i1(const Tensor& x);
Tensor special_modified_bessel_k0(const Tensor& x);
Tensor special_modified_bessel_k1(const Tensor& x);
Tensor special_scaled_modified_bessel_k0(const Tensor& x);
Tensor special_scaled_modified_bessel_k1(const Tensor& x);
Tensor special_airy_ai(const Tensor& x);
Tensor special_spherical_bessel_j0(const Tensor& x);
/** The Hurwitz zeta function ζ(x, q) = Σ_k (q + k)^-x, and the regularized incomplete
 * gamma functions P(a, x) (gammainc, igamma) and Q(a, x) = 1 - P (gammaincc, igammac);
 * differentiable w.r.t. q and x only, as PyTorch's. */
Tensor special_zeta(const Tensor& x, const Tensor& q);
Tensor special_gammainc(const Tensor& a, const Tensor& x);
Tensor special_gammaincc(const Tensor& a, const Tensor& x);
Tensor igamma(const Tensor& a, const Tensor& x);
Tensor igammac(const Tensor& a, const Tensor& x);
/** Classical orthogonal polynomials of degree n at x (n truncated to an integer; 0 for
 * n < 0): Chebyshev T, U, V, W and their shifted forms on [0, 1], Hermite H
 * (physicists') and He (probabilists'), Laguerre L, Legendre P. Not differentiable, as
 * in PyTorch. */
Tensor special_chebyshev_polynomial_t(const Tensor& x, const Tensor& n);
Tensor special_chebyshev_polynomial_u(const Tensor& x, const Tensor& n);
Tensor special_chebyshev_polynomial_v(const Tensor& x, const Tensor& n);
Tensor special_chebyshev_polynomial_w(const Tensor& x, const Tensor& n);
Tensor special_shifted_chebyshev_polynomial_t(const Tensor& x, const Tensor& n);
Tensor special_shifted_chebyshev_polynomial_u(const Tensor& x, const Tensor& n);
Tensor special_shifted_chebyshev_polynomial_v(const Tensor& x, const Tensor& n);
Tensor special_shifted_chebyshev_polynomial_w(const Tensor& x, const Tensor& n);
Tensor special_hermite_polynomial_h(const Tensor& x, const Tensor& n);
Tensor special_hermite_polynomial_he(const Tensor& x, const Tensor& n);
Tensor special_laguerre_polynomial_l(const Tensor& x, const Tensor& n);
Tensor special_legendre_polynomial_p(const Tensor& x, const Tensor& n);
/** torch.special's names for functions kiln has under their torch names. */
Tensor special_i0(const Tensor& x);
Tensor special_expit(const Tensor& x);
Tensor special_logit(const Tensor& x, std::optional<double> eps = std::nullopt);
Tensor special_exp2(const Tensor& x);
Tensor special_expm1(const Tensor& x);
Tensor special_log1p(const Tensor& x);
Tensor special_erf(const Tensor& x);
Tensor special_erfc(const Tensor& x);
Tensor special_erfinv(const Tensor& x);
Tensor special_gammaln(const Tensor& x);
Tensor special_digamma(const Tensor& x);
Tensor special_psi(const Tensor& x);
Tensor special_polygamma(int64_t n, const Tensor& x);
Tensor special_multigammaln(const Tensor& x, int64_t p);
Tensor special_round(const Tensor& x);
Tensor special_sinc(const Tensor& x);
Tensor special_xlogy(const Tensor& x, const Tensor& y);
Tensor special_logsumexp(const Tensor& x, const IntList& dims, bool keepdim = false);
Tensor special_softmax(const Tensor& x, int64_t dim);
Tensor special_log_softmax(const Tensor& x, int64_t dim);
/** Bitwise ops of integer tensors (bool: the logical ops); floats are refused. */
Tensor bitwise_not(const Tensor& x);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, Scalar b);
Tensor bitwise_or(const Tensor& a, Scalar b);
Tensor bitwise_xor(const Tensor& a, Scalar b);

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor pow(const Tensor& a, Scalar exponent);
/** div with a rounding mode, "trunc" or "floor": the quotient rounded toward zero or
 * down, in the promoted dtype (integers stay integers, exact). */
Tensor div(const Tensor& a, const Tensor& b, std::string_view rounding_mode);
Tensor div(const Tensor& a, Scalar b, std::string_view rounding_mode);
/** The division family, with PyTorch's rules: remainder takes the divisor's sign
 * (Python's %), fmod the dividend's (C's fmod), floor_divide rounds the quotient down.
 * An integer divisor of 0 is a `value` Error; bool tensors are refused. */
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, Scalar b);
Tensor remainder(Scalar a, const Tensor& b);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, Scalar b);
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, Scalar b);
/** The angle of the point (b, a), in (-pi, pi]; integers promote to f32. */
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
/** where with numbers: they promote as wrapped numbers (an f32 tensor with 2.5 stays f32). */
Tensor where(const Tensor& condition, const Tensor& a, Scalar b);
Tensor where(const Tensor& condition, Scalar a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
/** masked_fill with a 0-dim tensor value (differentiable in it), cast to x's dtype. */
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
/** clamp with tensor bounds (either undefined): minimum(maximum(x, min), max), broadcasting. */
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
/** base ** exponent for a number base. */
Tensor pow(Scalar base, const Tensor& exponent);
/** Bitwise operators (bitwise_and / or / xor / not). */
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator&(const Tensor& a, Scalar b);
Tensor operator|(const Tensor& a, Scalar b);
Tensor operator^(const Tensor& a, Scalar b);
Tensor operator~(const Tensor& a);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a);
/** A number on the left: `2.0 * x`, `1 - x` (computed as PyTorch's rsub), `1 / x`. */
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
/** Elementwise comparisons, bool results (lt, le, gt, ge, eq, ne). */
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, Scalar b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, Scalar b);
/** The number on the left: compared as the tensor is compared with it, mirrored. */
Tensor operator<(Scalar a, const Tensor& b);
Tensor operator<=(Scalar a, const Tensor& b);
Tensor operator>(Scalar a, const Tensor& b);
Tensor operator>=(Scalar a, const Tensor& b);
Tensor operator==(Scalar a, const Tensor& b);
Tensor operator!=(Scalar a, const Tensor& b);
Tensor operator&(Scalar a, const Tensor& b);
Tensor operator|(Scalar a, const Tensor& b);
Tensor operator^(Scalar a, const Tensor& b);
/** Python's % (remainder: the divisor's sign) and the shifts (bitwise_left_shift /
 * bitwise_right_shift). */
Tensor operator%(const Tensor& a, const Tensor& b);
Tensor operator%(const Tensor& a, Scalar b);
Tensor operator%(Scalar a, const Tensor& b);
Tensor operator<<(const Tensor& a, const Tensor& b);
Tensor operator<<(const Tensor& a, Scalar b);
Tensor operator>>(const Tensor& a, const Tensor& b);
Tensor operator>>(const Tensor& a, Scalar b);
/** In place on `a` (add_, sub_, mul_, div_): the same device rules as those ops (D2). */
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, Scalar b);
Tensor& operator-=(Tensor& a, Scalar b);
Tensor& operator*=(Tensor& a, Scalar b);
Tensor& operator/=(Tensor& a, Scalar b);

// ---- in-place (return self) ---------------------------------------------------
Tensor& add_(Tensor& self, const Tensor& other, Scalar alpha = 1);
Tensor& add_(Tensor& self, Scalar other);
Tensor& sub_(Tensor& self, const Tensor& other, Scalar alpha = 1);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, Scalar other);
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& div_(Tensor& self, Scalar other);
Tensor& masked_fill_(Tensor& self, const Tensor& mask, Scalar value);
Tensor& relu_(Tensor& self);
/** Copies src (broadcast, converted, from any device) into self (D2). */
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false);
Tensor& fill_(Tensor& self, Scalar value);
Tensor& zero_(Tensor& self);
/** In-place metadata ops (Note [In-place metadata ops], inplace_views.cpp): the tensor
 * itself takes the view's shape, strides and offset (every handle on it sees them). */
Tensor& t_(Tensor& self);
Tensor& transpose_(Tensor& self, int64_t dim0, int64_t dim1);
Tensor& unsqueeze_(Tensor& self, int64_t dim);
Tensor& squeeze_(Tensor& self);
Tensor& squeeze_(Tensor& self, int64_t dim);
Tensor& as_strided_(Tensor& self, const IntList& size, const IntList& stride,
                    std::optional<int64_t> storage_offset = std::nullopt);
/** Gives the tensor `size` (contiguous), growing its storage in place when too small. */
Tensor& resize_(Tensor& self, const IntList& size);
/** Makes the tensor view exactly what `source` views (its storage, shape, strides, offset). */
Tensor& set_(Tensor& self, const Tensor& source);

// ---- reductions ---------------------------------------------------------------
/** dims empty = all dims. */
Tensor sum(const Tensor& x, const IntList& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
Tensor amax(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
/** (values, indices) along `dim`. */
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/** The maximum / minimum of all elements (0-dim). */
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
/** The product of all elements (0-dim), or along `dim`; integers and bools multiply into
 * i64 unless `dtype` is given (as torch.prod). */
Tensor prod(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
/** The lower median of all elements (NaN if any is NaN; an empty tensor gives NaN). */
Tensor median(const Tensor& x);
/** (values, indices) of the lower median along dim; a row with NaN gives NaN and the
 * position of its first NaN, as PyTorch. */
std::pair<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
/** (values, indices) of the k-th smallest element along dim (NaN above every number). */
std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1,
                                   bool keepdim = false);
/** (values, indices): the elements along `dim` in order, NaN above every number (last
 * ascending, first descending), ties in their original order (always stable). */
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                               bool stable = false);
/** sort's indices. */
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
/** (values, indices) of the k largest (smallest) elements along `dim`, in order (also
 * with sorted = false); NaN counts as the largest. */
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                               bool sorted = true);
/** Running sums / products along `dim`, shaped like x; integers and bools accumulate in
 * i64 unless `dtype` is given (as torch.cumsum / torch.cumprod). */
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
/** log(cumsum(exp(x))) along dim, without overflow (floats). */
Tensor logcumsumexp(const Tensor& x, int64_t dim);
/** (values, indices): the running maximum (minimum) along dim and where it was; NaN wins
 * and stays, ties take the later position (as PyTorch). */
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim);
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim);
/** cumprod's gradient w.r.t. x for the output gradient `grad` (x's dtype and shape):
 * one pass per row, exact where x has zeros. */
Tensor cumprod_backward(const Tensor& grad, const Tensor& x, int64_t dim);

// Composites: written with the ops above (so they differentiate, trace and export as
// those ops), as PyTorch decomposes them.
/** The index of the smallest element along `dim`, or of the flattened tensor without a
 * dim (then keepdim gives all-ones dims): the first on ties, the first NaN if any. */
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/** sqrt(var(x, dims, correction, keepdim)). */
Tensor std(const Tensor& x, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
/** log(sum(exp(x), dims)) without overflow: rows of -inf give -inf, a +inf gives +inf;
 * integer inputs give f32. */
Tensor logsumexp(const Tensor& x, const IntList& dims, bool keepdim = false);
Tensor clamp_min(const Tensor& x, Scalar min);
Tensor clamp_max(const Tensor& x, Scalar max);
/** Elementwise truth (non-zero is true) combined; bool results, broadcasting. */
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
/** Whether some (every) element is non-zero (NaN counts as non-zero), over all elements or
 * along `dim`; empty: false (true). bool results, u8 for u8 inputs (as PyTorch). */
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
/** The number of non-zero elements over `dims` (empty: all), as i64. */
Tensor count_nonzero(const Tensor& x, const IntList& dims = {});
/** |a - b| <= atol + rtol |b| elementwise, or a == b (equal infinities); NaNs are close to
 * each other only with equal_nan. a and b must have one dtype (integers compare in f64). */
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false);
/** Whether isclose holds everywhere (a and b broadcast). */
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
/** Whether a and b have one shape and equal elements (any dtypes; NaN is never equal). */
bool equal(const Tensor& a, const Tensor& b);
/** mat [n, m] times vec [m]; beta * self + alpha * that (beta == 0 ignores self, NaN too). */
Tensor mv(const Tensor& mat, const Tensor& vec);
Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, Scalar beta = 1,
             Scalar alpha = 1);
/** beta * self + alpha * bmm(b1, b2) (beta == 0 ignores self). */
Tensor baddbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, Scalar beta = 1,
               Scalar alpha = 1);
/** The Kronecker product: block (i, j, ...) is a[i, j, ...] * b (the fewer dims lead with 1s). */
Tensor kron(const Tensor& a, const Tensor& b);
/** The cross product of 3-vectors along dim (of size 3), broadcasting. */
Tensor cross(const Tensor& a, const Tensor& b, int64_t dim = -1);
/** p-norm distances between the rows of x1 [..., P, M] and x2 [..., R, M]: [..., P, R]. */
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0);
/** Sums of products over the subscripts of `equation` ("ij,jk->ik", "...ij,...jk", "ii->i";
 * without "->" the output is the subscripts seen once, in alphabetical order, after the
 * ellipsis dims). Operands are contracted left to right, each pair as one bmm; size-1
 * dims broadcast. */
Tensor einsum(std::string_view equation, const TensorList& operands);
/** Bool tests: NaN, +-inf, neither (integer tensors: never NaN or infinite). */
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
/** NaN, +inf and -inf replaced (by default with 0 and the dtype's largest and lowest
 * finite values); integer tensors are copied as they are. */
Tensor nan_to_num(const Tensor& x, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);
/** The lower (upper) triangle of the last two dims: elements with column - row <= diagonal
 * (>= diagonal) kept, the rest 0. */
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
/** x with the order of each of `dims` reversed (a copy). */
Tensor flip(const Tensor& x, const IntList& dims);
/** x tiled `repeats[i]` times along each dim (more repeats than dims add leading dims). */
Tensor repeat(const Tensor& x, const SymSizes& repeats);
/** i64 [..., num_classes] with a 1 at each index; num_classes < 0 takes max(index) + 1
 * (which reads the values). Indices must lie in [0, num_classes). */
Tensor one_hot(const Tensor& index, int64_t num_classes = -1);
/** a[i] * b[j] for 1-D a and b. */
Tensor outer(const Tensor& a, const Tensor& b);
/** sum(a * b) for 1-D a and b of one size and one dtype (0-dim result). */
Tensor dot(const Tensor& a, const Tensor& b);
/** self + value * a * b, and self + value * a / b (floating only, as PyTorch). */
/** Whether in_opmath widens: the inputs' promoted dtype is f16 or bf16. */
bool wants_opmath(const TensorList& inputs);
/** PyTorch's opmath for composites: `f` on the inputs with the floating ones converted to
 * their promoted dtype (f32 when that is f16/bf16), its floating result rounded back to the
 * promoted dtype once, as PyTorch's fused kernels compute. Undefined inputs pass through. */
Tensor in_opmath(const TensorList& inputs, const std::function<Tensor(const TensorList&)>& f);
Tensor addcmul(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value = 1);
Tensor addcdiv(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value = 1);
/** start + weight (end - start), computed from end's side where weight >= 0.5 as
 * PyTorch does (exact at weight 1). */
Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
/** (sum |x|^ord)^(1/ord) over dims (all when empty) for floating x; ord inf / -inf: the
 * largest / smallest |x|, 0: the count of non-zeros. The gradient at a zero vector is 0,
 * as PyTorch's (not the NaN of sqrt'(0) * 0). */
Tensor vector_norm(const Tensor& x, double ord = 2.0, const IntList& dims = {},
                   bool keepdim = false);
/** x / max(vector_norm(x, p, {dim}, keepdim), eps), as torch.nn.functional.normalize. */
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);
/** The n x m identity (m = n by default; f32 by default). */
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions options = {});
/** `steps` evenly spaced values from start to end inclusive (f32 by default), each
 * computed from the nearer end as PyTorch does. */
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
/** The diagonal of dims dim1 and dim2 (`offset` > 0: above the main one) as a view, its
 * elements the last dim. */
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
/** 1-D x: the square matrix with x on diagonal `offset`; 2-D x: a copy of that diagonal. */
Tensor diag(const Tensor& x, int64_t offset = 0);
/** The sum of a matrix's main diagonal. */
Tensor trace(const Tensor& x);
/** The slices of x along dim (views). */
TensorList unbind(const Tensor& x, int64_t dim = 0);
/** x with dim `source` moved to position `destination`, the others in order (a view). */
Tensor movedim(const Tensor& x, int64_t source, int64_t destination);
/** Several dims at once: source[i] lands at destination[i], the others keep their order. */
Tensor movedim(const Tensor& x, const IntList& source, const IntList& destination);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
/** With a dtype: x is converted to it first (torch.softmax(x, dim, dtype=...)). */
Tensor softmax(const Tensor& x, int64_t dim, DType dtype);
Tensor log_softmax(const Tensor& x, int64_t dim, DType dtype);
/** softmax's gradient from its output y: y (grad - sum(grad y)) along dim, one pass. */
Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim);
/** log_softmax's gradient from its output y: grad - exp(y) sum(grad) along dim. */
Tensor log_softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim);

// ---- linear algebra -----------------------------------------------------------
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
/** numpy matmul: 1-D operands, batch broadcasting. */
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta = 1,
             Scalar alpha = 1);
/** x @ weight^T + bias. */
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
/** torch.convolution (not transposed) of a batched input [N, C, *S] by weight
 * [O, C / groups, *K], 1 to 3 spatial dims (the weight's rank says how many); stride,
 * padding and dilation hold one value per spatial dim or one for all. One op; f16/bf16
 * computed in f32 and rounded once. */
Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const IntList& stride, const IntList& padding, const IntList& dilation,
                   int64_t groups);
/** The transposed convolution of a batched input [N, Cin, *S] by weight
 * [Cin, Cout / groups, *K], one value per spatial dim in each list: a convolution of the
 * input spread by stride (Note [Convolution's gradients]). */
Tensor conv_transpose(const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const IntList& stride, const IntList& padding, const IntList& output_padding,
                      int64_t groups, const IntList& dilation);
/** The gradient of convolution(input, weight of `weight_shape`, ...) for its weight, given
 * the output's gradient: each group's gradient times the input's windows. */
Tensor convolution_weight_grad(const Tensor& grad, const Tensor& input, const IntList& weight_shape,
                               const IntList& stride, const IntList& padding,
                               const IntList& dilation, int64_t groups);

// ---- views (share storage with the input) -------------------------------------
Tensor view(const Tensor& x, const SymSizes& size);
/** A view when the strides allow one, else a copy (like torch.reshape). */
Tensor reshape(const Tensor& x, const SymSizes& size);
Tensor permute(const Tensor& x, const IntList& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
/** transpose(0, 1) of a tensor with <= 2 dims. */
Tensor t(const Tensor& x);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const SymSizes& size);
Tensor slice(const Tensor& x, int64_t dim, std::optional<SymInt> start, std::optional<SymInt> end,
             int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
/** as_strided with sizes and strides that may be symbolic (Y2; PyTorch's SymInt[] form). */
Tensor sym_as_strided(const Tensor& x, const SymSizes& size, const SymSizes& stride,
                      std::optional<int64_t> offset = std::nullopt);
Tensor as_strided(const Tensor& x, const IntList& size, const IntList& stride,
                  std::optional<int64_t> storage_offset = std::nullopt);
/** A copy of x (read as a flat row-major array) with the strided region replaced by src. */
Tensor as_strided_scatter(const Tensor& x, const Tensor& src, const IntList& size,
                          const IntList& stride,
                          std::optional<int64_t> storage_offset = std::nullopt);
/** A new tensor viewing exactly what x views (PyTorch's alias). */
Tensor alias(const Tensor& x);
/** x itself when contiguous, else a contiguous copy. */
Tensor contiguous(const Tensor& x);

// ---- data movement ------------------------------------------------------------
Tensor cat(const TensorList& tensors, int64_t dim = 0);
Tensor stack(const TensorList& tensors, int64_t dim = 0);
/** Views of `split_size` along dim (the last may be smaller). */
TensorList split(const Tensor& x, int64_t split_size, int64_t dim = 0);
TensorList split(const Tensor& x, const IntList& sizes, int64_t dim = 0);
TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/** x with src[i] added at x[..., index[i], ...] along dim (repeated indices add up). */
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor clone(const Tensor& x);
/** x with src (value) written at the positions index names along dim (only index's
 * region of src is read; where indices repeat, which write wins is unspecified, as in
 * PyTorch: kiln's sum them). */
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
/** torch.scatter(..., reduce="add" | "multiply"): the writes added to (multiplied into) x. */
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
               const std::string& reduce);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value,
               const std::string& reduce);
/** x with alpha * source's slices added (copied, filled with value) at the 1-D index's
 * positions along dim. */
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha = 1);
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
/** x's elements shifted by shifts[i] along dims[i], wrapping around (dims empty: the
 * flattened tensor by one shift). */
Tensor roll(const Tensor& x, const IntList& shifts, const IntList& dims = {});
namespace fft {
/** torch.fft.fftshift: x rolled by n / 2 along each of dims (all when empty), moving the
 * zero frequency to the middle; ifftshift rolls back (by (n + 1) / 2). */
Tensor fftshift(const Tensor& x, const IntList& dims = {});
Tensor ifftshift(const Tensor& x, const IntList& dims = {});
}  // namespace fft

// ---- normalization ------------------------------------------------------------
Tensor layer_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
/** torch.native_layer_norm: (layer_norm's output, mean, rstd), the statistics per
 * normalized group, shaped like x with the normalized dims kept as 1. */
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x,
                                                     const IntList& normalized_shape,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps);
/** torch.segment_reduce along axis 0 of data: segments of consecutive rows given by 1-D
 * lengths (or offsets, lengths + 1 boundaries), reduced by "sum", "mean", "max", "min" or
 * "prod". `initial` joins every segment as one more element (mean: added to the sum, not
 * counted); without it an empty segment gives 0, NaN, -inf, inf and 1. */
Tensor segment_reduce(const Tensor& data, const std::string& reduce,
                      const Tensor& lengths = Tensor(), const Tensor& offsets = Tensor(),
                      int64_t axis = 0, std::optional<double> initial = std::nullopt);
/** The gradients w.r.t. an op's input, weight and bias (its fused backward op's outputs). */
struct WeightedGrads {
  Tensor input, weight, bias;
};
using LayerNormGrads = WeightedGrads;
using LinearGrads = WeightedGrads;
/** layer_norm's gradients w.r.t. input, weight and bias for `grad` of its output (the
 * statistics recomputed from `x`); weight's and bias's are computed even without them. */
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x,
                                   const IntList& normalized_shape, const Tensor& weight = Tensor(),
                                   double eps = 1e-5);
/** linear's gradients w.r.t. input, weight and bias for `grad` of its output, in one op. */
LinearGrads linear_backward(const Tensor& grad, const Tensor& x, const Tensor& weight);

// ---- collectives (C2) -----------------------------------------------------------
// Functional: a new output, computed by the process group bound to `group` (a mesh
// axis name, kiln/device/process_group.h) when the call runs; traced, they are nodes.
/** Every rank's `x` reduced ("sum", "avg", "max", "min", "product"). */
Tensor all_reduce(const Tensor& x, std::string_view reduce_op, std::string_view group);
/** The ranks' `x` concatenated along dim 0 (group_size ranks). */
Tensor all_gather_into_tensor(const Tensor& x, int64_t group_size, std::string_view group);
/** This rank's dim-0 slice of the reduction of the ranks' `x`. */
Tensor reduce_scatter_tensor(const Tensor& x, std::string_view reduce_op, int64_t group_size,
                             std::string_view group);
/** Dim-0 chunk j of `x` goes to rank j; chunk i of the result came from rank i. */
Tensor all_to_all_single(const Tensor& x, int64_t group_size, std::string_view group);
/** Waits for a collective's result (they complete within their call today: the identity). */
Tensor wait_tensor(const Tensor& x);
/** Uneven all_to_all along dim 0, as PyTorch's all_to_all_single with split sizes:
 * input_split_sizes[j] rows go to rank j, output_split_sizes[i] rows come from rank i (one
 * entry per rank of `group`). */
Tensor all_to_all_single(const Tensor& x, const IntList& output_split_sizes,
                         const IntList& input_split_sizes, std::string_view group);
/** Every rank gets rank `src`'s `x` (no gradient, as PyTorch's functional broadcast). */
Tensor broadcast(const Tensor& x, int64_t src, std::string_view group);
/** Rank `src`'s `x` cut along dim 0 into `group_size` chunks: chunk r for rank r (the
 * others' `x` only give the shape). Built on all_to_all_single, so a program needs no rank. */
Tensor scatter_tensor(const Tensor& x, int64_t src, int64_t group_size, std::string_view group);
/** all_reduce written into `x` (dispatched as all_reduce_: traced functional + copy). */
Tensor& all_reduce_(Tensor& x, std::string_view reduce_op, std::string_view group);
// PyTorch's other functional forms, built from the ops above (as PyTorch builds them):
/** The ranks' `x` concatenated along `gather_dim` (funcol's all_gather_tensor). */
Tensor all_gather_tensor(const Tensor& x, int64_t gather_dim, int64_t group_size,
                         std::string_view group);
/** This rank's chunk along `scatter_dim` of the reduction of the ranks' `x`. */
Tensor reduce_scatter_tensor(const Tensor& x, std::string_view reduce_op, int64_t scatter_dim,
                             int64_t group_size, std::string_view group);
/** all_reduce of each tensor, moved as one collective per dtype (the tensors flattened
 * into one buffer). */
TensorList all_reduce_coalesced(const TensorList& xs, std::string_view reduce_op,
                                std::string_view group);
/** all_gather_into_tensor of each tensor, as one collective per dtype. */
TensorList all_gather_into_tensor_coalesced(const TensorList& xs, int64_t group_size,
                                            std::string_view group);
/** reduce_scatter_tensor of each tensor (dim 0), as one collective per dtype. */
TensorList reduce_scatter_tensor_coalesced(const TensorList& xs, std::string_view reduce_op,
                                           int64_t group_size, std::string_view group);

// ---- conversion ---------------------------------------------------------------
/** (D7) `x` itself when the resolved device and the dtype are unchanged and `copy` is
 * false; otherwise a new tensor (a _to_copy). */
Tensor to(const Tensor& x, Device device, std::optional<DType> dtype = std::nullopt,
          bool non_blocking = false, bool copy = false);
Tensor to(const Tensor& x, DType dtype, bool non_blocking = false, bool copy = false);
Tensor _to_copy(const Tensor& x, DType dtype, Device device, bool non_blocking = false);

// ---- host access --------------------------------------------------------------
/** The single element as T; a data-dependent Error for fake tensors (F5). */
template <typename T>
T item(const Tensor& x);
/** All elements in row-major order, converted to T. */
template <typename T>
std::vector<T> to_vector(const Tensor& x);

template <>
Tensor from_vector(const std::vector<bool>& values, const IntList& shape, TensorOptions options);
template <>
std::vector<bool> to_vector<bool>(const Tensor& x);
template <>
bool item<bool>(const Tensor& x);

// ---- more composites (kiln/api/composites.cpp), as PyTorch defines them ----
/** log(exp(a) + exp(b)) (base 2: log2(2^a + 2^b)) without overflow; equal infinities stay. */
Tensor logaddexp(const Tensor& a, const Tensor& b);
Tensor logaddexp2(const Tensor& a, const Tensor& b);
/** sqrt(a^2 + b^2) without overflow. */
Tensor hypot(const Tensor& a, const Tensor& b);
/** x log(y), 0 where x == 0 (unless y is NaN). */
Tensor xlogy(const Tensor& x, const Tensor& y);
/** sin(pi x) / (pi x), 1 at 0. */
Tensor sinc(const Tensor& x);
/** log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given. */
Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt);
Tensor deg2rad(const Tensor& x);
Tensor rad2deg(const Tensor& x);
/** x - trunc(x). */
Tensor frac(const Tensor& x);
Tensor square(const Tensor& x);
/** |a| with b's sign (-0.0 counts as negative; NaN's sign is not read). */
Tensor copysign(const Tensor& a, const Tensor& b);
/** Whether the sign is negative: x < 0, or x is -0.0. */
Tensor signbit(const Tensor& x);
/** 0 where x < 0, values where x == 0, 1 where x > 0. */
Tensor heaviside(const Tensor& x, const Tensor& values);
/** pow in f64. */
Tensor float_power(const Tensor& a, const Tensor& exponent);
Tensor float_power(const Tensor& a, Scalar exponent);
/** sum / mean over dims (empty: all) with NaN left out. */
Tensor nansum(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor nanmean(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
/** (std or var, mean) over dims. */
std::pair<Tensor, Tensor> std_mean(const Tensor& x, const IntList& dims = {},
                                   int64_t correction = 1, bool keepdim = false);
std::pair<Tensor, Tensor> var_mean(const Tensor& x, const IntList& dims = {},
                                   int64_t correction = 1, bool keepdim = false);
/** (amin, amax) of all elements, or along dim. */
std::pair<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt,
                                  bool keepdim = false);
/** The n-th forward difference along dim, after prepending / appending (optional). */
Tensor diff(const Tensor& x, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = Tensor(),
            const Tensor& append = Tensor());
/** Sums of products over a's last `dims` dims and b's first `dims`. */
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims = 2);
/** Sums of products over the given dims of a and b, paired in order. */
Tensor tensordot(const Tensor& a, const Tensor& b, const IntList& dims_a, const IntList& dims_b);
/** The matrices (0-, 1- or 2-D each) on the diagonal of one block matrix. */
Tensor block_diag(const TensorList& tensors);
/** Coordinate grids of 1-D tensors ("ij": the first varies along dim 0; "xy": the first
 * two swapped); expanded views. */
TensorList meshgrid(const TensorList& tensors, std::string_view indexing = "ij");
/** Every combination of the 1-D tensors' elements, one per row. */
Tensor cartesian_prod(const TensorList& tensors);
/** repeat, with reps padded with leading 1s to x's rank. */
Tensor tile(const Tensor& x, const IntList& reps);
/** Rotated by 90 degrees k times, from dims[0] toward dims[1]. */
Tensor rot90(const Tensor& x, int64_t k = 1, const IntList& dims = {0, 1});
Tensor fliplr(const Tensor& x);
Tensor flipud(const Tensor& x);
/** i64 [2, n]: the (row, column) coordinates of the lower (upper) triangle of a rows x
 * cols matrix, offset as tril / triu. */
Tensor tril_indices(int64_t rows, int64_t cols, int64_t offset = 0,
                    TensorOptions options = {.dtype = DType::i64});
Tensor triu_indices(int64_t rows, int64_t cols, int64_t offset = 0,
                    TensorOptions options = {.dtype = DType::i64});
/** For each value, the position in the last dim of sorted_sequence where it would go:
 * the count of elements < value (<= with right). */
/** With `sorter`: sorted_sequence is unsorted and sorter holds the indices that sort its
 * last dim (as torch.argsort gives). */
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right = false,
                    bool out_int32 = false, const Tensor& sorter = Tensor());
/** searchsorted(boundaries, x, right): the bucket index of each element. */
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool right = false,
                 bool out_int32 = false);
/** The histogram of x over `bins` equal bins in [min, max] (min == max: the data's range,
 * eager only); elements outside are left out, max goes to the last bin. */
Tensor histc(const Tensor& x, int64_t bins = 100, double min = 0, double max = 0);
/** torch.histogram: (hist, bin_edges) of the floating x over `bins` equal bins in
 * `range` (absent: the data's range, widened by 0.5 each way when it is one value) or
 * over the given increasing edges; the last bin includes its right edge, elements outside
 * are left out. weight: per-element weights summed instead of counts; density: hist
 * divided by its sum and the bins' widths. */
std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins = 100,
                                    std::optional<std::pair<double, double>> range = std::nullopt,
                                    const Tensor& weight = Tensor(), bool density = false);
std::pair<Tensor, Tensor> histogram(const Tensor& x, const Tensor& bin_edges,
                                    const Tensor& weight = Tensor(), bool density = false);
/** torch.histogramdd: (hist [b_0, ..., b_{D-1}], the D bin-edge tensors) of the points
 * x [..., D]: bins per dim (one count for all, or one each) in `range` ({lo_0, hi_0, lo_1,
 * hi_1, ...}; absent: each coordinate's data range, widened by 0.5 each way when it is one
 * value), or the given edges per dim. Bins as in histogram; weight [...] per point;
 * density divides by the total and each bin's volume. */
std::pair<Tensor, TensorList> histogramdd(const Tensor& x, const IntList& bins,
                                          const std::vector<double>& range = {},
                                          const Tensor& weight = Tensor(), bool density = false);
std::pair<Tensor, TensorList> histogramdd(const Tensor& x, const TensorList& bin_edges,
                                          const Tensor& weight = Tensor(), bool density = false);
/** torch.gradient: the derivative estimate of f along each of `dims` (all when empty),
 * central differences inside and one-sided ones of order edge_order (1 or 2) at the ends,
 * with a uniform spacing per dim (one value for all, or one per dim) ... */
TensorList gradient(const Tensor& f, const std::vector<double>& spacing = {1.0},
                    const IntList& dims = {}, int64_t edge_order = 1);
/** ... or sample coordinates per dim (1-D tensors of the dim's size). */
TensorList gradient(const Tensor& f, const TensorList& coordinates, const IntList& dims = {},
                    int64_t edge_order = 1);
/** NaN-ignoring maximum / minimum: the other operand where one is NaN. */
Tensor fmax(const Tensor& a, const Tensor& b);
Tensor fmin(const Tensor& a, const Tensor& b);
/** Greatest common divisor (>= 0; gcd(0, 0) = 0) and least common multiple of integers. */
Tensor gcd(const Tensor& a, const Tensor& b);
Tensor lcm(const Tensor& a, const Tensor& b);
/** Shifts of integer tensors (the promoted type): a << b and a >> b (arithmetic for signed
 * types); a shift by a negative count or by the type's width or more gives 0 (>>: the sign,
 * -1 or 0), as PyTorch 2 defines it. */
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_left_shift(const Tensor& a, Scalar b);
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_right_shift(const Tensor& a, Scalar b);
/** (mantissa, exponent) with x = mantissa 2^exponent, 0.5 <= |mantissa| < 1 (0, inf and
 * NaN: x itself and 0); the exponent is i32. Floating x only. */
std::pair<Tensor, Tensor> frexp(const Tensor& x);
/** The next representable value after a in the direction of b (b where a == b). */
Tensor nextafter(const Tensor& a, const Tensor& b);
/** Whether each element of `elements` is in `test_elements` (invert: is not). */
Tensor isin(const Tensor& elements, const Tensor& test_elements, bool assume_unique = false,
            bool invert = false);
/** The r-element combinations of the 1-D x's elements, in lexicographic order of
 * positions, one per row (with_replacement: positions may repeat). */
Tensor combinations(const Tensor& x, int64_t r = 2, bool with_replacement = false);
/** beta input + alpha outer(vec1, vec2); beta = 0 ignores input (NaN included). */
Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, Scalar beta = 1,
            Scalar alpha = 1);
/** beta input + alpha sum_b batch1[b] @ batch2[b]. */
Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta = 1,
              Scalar alpha = 1);
/** Each slice along dim whose p-norm exceeds maxnorm scaled down to it. */
Tensor renorm(const Tensor& x, double p, int64_t dim, double maxnorm);
/** torch.dist: the p-norm of a - b (`kiln::dist` is the distributed namespace). */
Tensor distance(const Tensor& a, const Tensor& b, double p = 2.0);
Tensor frobenius_norm(const Tensor& x, const IntList& dims = {-2, -1}, bool keepdim = false);
Tensor nuclear_norm(const Tensor& x, bool keepdim = false);
/** Window functions of torch.signal's classic set (periodic: for spectral analysis, the
 * window of length n + 1 without its last point). */
Tensor hann_window(int64_t n, bool periodic = true, TensorOptions options = {});
Tensor hamming_window(int64_t n, bool periodic = true, double alpha = 0.54, double beta = 0.46,
                      TensorOptions options = {});
Tensor blackman_window(int64_t n, bool periodic = true, TensorOptions options = {});
Tensor bartlett_window(int64_t n, bool periodic = true, TensorOptions options = {});
Tensor kaiser_window(int64_t n, bool periodic = true, double beta = 12.0,
                     TensorOptions options = {});

// ---- data-dependent shapes: eager only (on fake tensors a data-dependent Error, F5)
/** i64 [n, x.dim()]: the coordinates of x's non-zero elements, in row-major order. */
Tensor nonzero(const Tensor& x);
/** (Y3) The value of a one-element integer tensor as a size (`n = x.item()` used as a size
 * in PyTorch): the integer eagerly; an unbacked size under a symbolic trace (export),
 * which the program binds from the data when it runs. Never negative. */
SymInt item_size(const Tensor& x);
/** nonzero's columns, one index tensor per dim. */
TensorList where(const Tensor& condition);
/** The elements of x (broadcast with mask) where mask is true, 1-D (differentiable). */
Tensor masked_select(const Tensor& x, const Tensor& mask);
/** (values, inverse, counts): x's distinct elements in ascending order (each NaN distinct),
 * where each element of x is among them (x's shape), and how often each occurs; inverse
 * and counts are left undefined unless asked for. With `dim`: the distinct slices along
 * dim in lexicographic order (inverse and counts per slice), as torch.unique(dim=). */
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool return_inverse = false,
                                          bool return_counts = false,
                                          std::optional<int64_t> dim = std::nullopt);
/** i64 counts (or weights' sums) of each value 0..max(x) of the non-negative 1-D integer
 * tensor x, at least minlength of them. */
Tensor bincount(const Tensor& x, const Tensor& weights = Tensor(), int64_t minlength = 0);
/** unique without sorting: each run of equal consecutive elements (x flattened, or the
 * slices along `dim`) once. */
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse = false,
                                                      bool return_counts = false,
                                                      std::optional<int64_t> dim = std::nullopt);
/** x's elements along dim (absent: x flattened) each repeated repeats[i] times (repeats: a
 * 1-D integer tensor of that dim's length, or of length 1); output_size, when given,
 * spares the host read of sum(repeats). */
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);
Tensor repeat_interleave(const Tensor& x, int64_t repeats,
                         std::optional<int64_t> dim = std::nullopt);
/** torch.repeat_interleave(repeats): i repeated repeats[i] times. */
Tensor repeat_interleave(const Tensor& repeats);

// ---- indexing composites (kiln/api/indexing.cpp) ------------------------------
/** x read as a flat row-major array at `index` (negative counts from the end), shaped
 * like index. */
Tensor take(const Tensor& x, const Tensor& index);
/** gather along dim after broadcasting x and indices on every other dim; no dim: take
 * of the flattened x. */
Tensor take_along_dim(const Tensor& x, const Tensor& indices,
                      std::optional<int64_t> dim = std::nullopt);
/** Advanced indexing x[i0, i1, ...]: undefined entries are full slices; the index tensors
 * (integers, or bool masks standing for their nonzero coordinates: eager only) broadcast
 * together and their shape replaces the dims they index (index tensors separated by full
 * slices put it first, as PyTorch). */
Tensor index(const Tensor& x, const std::vector<Tensor>& indices);
namespace indexing {
/** start:stop:step of Python's slices (absent bounds: the ends; step > 0). */
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
struct NoneIndex {};
struct EllipsisIndex {};
inline constexpr NoneIndex None{};          // x[None]: a new dim of size 1
inline constexpr EllipsisIndex Ellipsis{};  // x[...]: as many full slices as needed
/** One entry of x[...]: an integer, a Slice, None, Ellipsis or an index tensor (integer,
 * or bool as a mask), as libtorch's TensorIndex. */
class TensorIndex {
 public:
  template <typename I>
  requires(std::is_integral_v<I> && !std::is_same_v<I, bool>) TensorIndex(I i)
      : v_(static_cast<int64_t>(i)) {}
  TensorIndex(Slice s) : v_(s) {}
  TensorIndex(NoneIndex n) : v_(n) {}
  TensorIndex(EllipsisIndex e) : v_(e) {}
  TensorIndex(Tensor t) : v_(std::move(t)) {}
  const std::variant<int64_t, Slice, NoneIndex, EllipsisIndex, Tensor>& value() const { return v_; }

 private:
  std::variant<int64_t, Slice, NoneIndex, EllipsisIndex, Tensor> v_;
};
}  // namespace indexing

/** x[i0, i1, ...] with PyTorch's rules: integers select (negative from the end), slices,
 * None and Ellipsis make a view; index tensors then index the result as `index` does. */
Tensor getitem(const Tensor& x, const std::vector<indexing::TensorIndex>& index);
/** x[i0, i1, ...] = value (broadcast, converted to x's dtype), in place. */
Tensor& setitem_(Tensor& x, const std::vector<indexing::TensorIndex>& index, const Tensor& value);
Tensor& setitem_(Tensor& x, const std::vector<indexing::TensorIndex>& index, Scalar value);

/** A copy of x with values (broadcast) written (or added, with accumulate) at
 * x[indices] (index's rules). */
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);
/** x with its elements where mask (broadcast) is true replaced, in row-major order, by
 * source's first elements. */
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source);
/** Tensor.unfold: windows of `size` elements `step` apart along dim, as a new last dim
 * (a view). */
Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step);
/** Copies of x with src written into select(x, dim, index), x[start:end:step] along dim,
 * or diagonal(x, offset, dim1, dim2). */
Tensor select_scatter(const Tensor& x, const Tensor& src, int64_t dim, int64_t index);
Tensor slice_scatter(const Tensor& x, const Tensor& src, int64_t dim = 0,
                     std::optional<int64_t> start = std::nullopt,
                     std::optional<int64_t> end = std::nullopt, int64_t step = 1);
Tensor diagonal_scatter(const Tensor& x, const Tensor& src, int64_t offset = 0, int64_t dim1 = 0,
                        int64_t dim2 = 1);
/** x's last dim on the diagonal (offset) of dims dim1, dim2 of a zero tensor. */
Tensor diag_embed(const Tensor& x, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
Tensor diagflat(const Tensor& x, int64_t offset = 0);
/** scatter_add generalized: reduce "sum", "prod", "mean", "amax" or "amin" of the writes
 * at each target, with or without x's own value; untouched positions keep x. */
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);
/** x with source's slices along dim reduced into the slices index names: "prod", "mean",
 * "amax" or "amin" (Tensor.index_reduce). */
Tensor index_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                    const std::string& reduce, bool include_self = true);
/** x with source's elements written (or added) at the flat positions index names
 * (Tensor.put). */
Tensor put(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate = false);

// ---- stacking, splitting, aliases (kiln/api/shape_ops.cpp) ---------------------
Tensor atleast_1d(const Tensor& x);
Tensor atleast_2d(const Tensor& x);
Tensor atleast_3d(const Tensor& x);
/** cat along dim 1 (dim 0 for 1-D tensors), dim 0 of atleast_2d, dim 2 of atleast_3d;
 * column_stack makes 0-D and 1-D tensors columns first. */
Tensor hstack(const TensorList& tensors);
Tensor vstack(const TensorList& tensors);
Tensor row_stack(const TensorList& tensors);
Tensor dstack(const TensorList& tensors);
Tensor column_stack(const TensorList& tensors);
/** `sections` pieces (the first size % sections one longer), or pieces between the
 * given indices; views. */
TensorList tensor_split(const Tensor& x, int64_t sections, int64_t dim = 0);
TensorList tensor_split(const Tensor& x, const IntList& indices, int64_t dim = 0);
/** tensor_split into equal sections along dim 1 (0 for 1-D), 0, 2: the size must divide. */
TensorList hsplit(const Tensor& x, int64_t sections);
TensorList vsplit(const Tensor& x, int64_t sections);
TensorList dsplit(const Tensor& x, int64_t sections);
/** hsplit / vsplit / dsplit at the given indices (tensor_split along their dim). */
TensorList hsplit(const Tensor& x, const IntList& indices);
TensorList vsplit(const Tensor& x, const IntList& indices);
TensorList dsplit(const Tensor& x, const IntList& indices);
/** dim split into `sizes` (one may be -1). */
Tensor unflatten(const Tensor& x, int64_t dim, const IntList& sizes);
Tensor swapaxes(const Tensor& x, int64_t a, int64_t b);
Tensor swapdims(const Tensor& x, int64_t a, int64_t b);
Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination);
Tensor clip(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor fix(const Tensor& x);
Tensor absolute(const Tensor& x);
Tensor negative(const Tensor& x);
Tensor positive(const Tensor& x);
Tensor sgn(const Tensor& x);
/** x * 2^exponent, in floating point. */
Tensor ldexp(const Tensor& x, const Tensor& exponent);
Tensor arccos(const Tensor& x);
Tensor arcsin(const Tensor& x);
Tensor arctan(const Tensor& x);
Tensor arccosh(const Tensor& x);
Tensor arcsinh(const Tensor& x);
Tensor arctanh(const Tensor& x);
Tensor arctan2(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor multiply(const Tensor& a, const Tensor& b);
Tensor divide(const Tensor& a, const Tensor& b);
Tensor divide(const Tensor& a, const Tensor& b, std::string_view rounding_mode);
Tensor true_divide(const Tensor& a, const Tensor& b);
Tensor subtract(const Tensor& a, const Tensor& b, Scalar alpha = 1);
/** b - alpha * a (torch.rsub). */
Tensor rsub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor concat(const TensorList& tensors, int64_t dim = 0);
Tensor concatenate(const TensorList& tensors, int64_t dim = 0);
/** x sorted along dim 0 (values only). */
Tensor msort(const Tensor& x);
/** x flattened (a view when x is contiguous). */
Tensor ravel(const Tensor& x);
/** Sums of products over the last dims of a and b (0-dim: a * b). */
Tensor inner(const Tensor& a, const Tensor& b);
/** The dot product of two 1-D tensors (real: dot). */
Tensor vdot(const Tensor& a, const Tensor& b);
Tensor broadcast_to(const Tensor& x, const SymSizes& shape);
Tensor expand_as(const Tensor& x, const Tensor& other);
/** Every tensor expanded to their common broadcast shape. */
TensorList broadcast_tensors(const TensorList& tensors);
IntList broadcast_shapes(const std::vector<IntList>& shapes);
Tensor isposinf(const Tensor& x);
Tensor isneginf(const Tensor& x);
/** True everywhere: kiln's dtypes are real. */
Tensor isreal(const Tensor& x);
/** nonzero: the indices of the nonzero elements, one row each (eager). */
Tensor argwhere(const Tensor& x);
/** A contiguous copy of narrow(x, dim, start, length). */
Tensor narrow_copy(const Tensor& x, int64_t dim, int64_t start, int64_t length);
TensorList split_with_sizes(const Tensor& x, const IntList& sizes, int64_t dim = 0);
/** x summed to `size` (which x's shape must broadcast from): leading dims and dims of
 * size 1 in `size` are summed away. */
Tensor sum_to_size(const Tensor& x, const IntList& size);
Tensor reshape_as(const Tensor& x, const Tensor& other);
Tensor view_as(const Tensor& x, const Tensor& other);
/** Tensor.new_*: a new tensor of `size` with x's dtype and device unless given. */
Tensor new_empty(const Tensor& x, const SymSizes& size, TensorOptions options = {});
Tensor new_zeros(const Tensor& x, const SymSizes& size, TensorOptions options = {});
Tensor new_ones(const Tensor& x, const SymSizes& size, TensorOptions options = {});
Tensor new_full(const Tensor& x, const SymSizes& size, Scalar value, TensorOptions options = {});
/** Integers uniform in [low, high) in x's shape (and dtype, device unless given). */
Tensor randint_like(const Tensor& x, int64_t low, int64_t high, TensorOptions options = {});
/** The last two dims swapped (Tensor.mT; mH and adjoint: the same, kiln's dtypes being
 * real); numpy_T: every dim reversed (Tensor.T). */
Tensor mT(const Tensor& x);
Tensor mH(const Tensor& x);
Tensor adjoint(const Tensor& x);
Tensor numpy_T(const Tensor& x);
/** The complex-number functions of real tensors: real, conj, conj_physical, resolve_conj
 * and resolve_neg give x; angle is 0 (π below 0, NaN for NaN) in a floating dtype; imag is
 * refused, as PyTorch refuses it for real tensors. */
Tensor real(const Tensor& x);
Tensor imag(const Tensor& x);
Tensor conj(const Tensor& x);
Tensor conj_physical(const Tensor& x);
Tensor resolve_conj(const Tensor& x);
Tensor resolve_neg(const Tensor& x);
Tensor angle(const Tensor& x);

// ---- statistics and sampling (kiln/api/statistics.cpp) -------------------------
/** The q-quantiles (q in [0, 1], a number or a 1-D tensor whose dim comes first in the
 * result) over dim (absent: all elements) of an f32/f64 tensor, interpolating "linear",
 * "lower", "higher", "midpoint" or "nearest" between sorted neighbours; a row with NaN
 * gives NaN (nanquantile leaves NaN out). */
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                bool keepdim = false, const std::string& interpolation = "linear");
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt,
                bool keepdim = false, const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                   bool keepdim = false, const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt,
                   bool keepdim = false, const std::string& interpolation = "linear");
/** The lower median of the non-NaN elements (NaN for a row of NaN) and its position. */
std::pair<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor nanmedian(const Tensor& x);
/** The most frequent value along dim (ties: the smallest) and its last position. */
std::pair<Tensor, Tensor> mode(const Tensor& x, int64_t dim = -1, bool keepdim = false);
/** Covariance of the rows (variables) of x [variables, observations] (or a 1-D x), with
 * integer frequency and float observation weights. */
Tensor cov(const Tensor& x, int64_t correction = 1, const Tensor& fweights = Tensor(),
           const Tensor& aweights = Tensor());
/** Pearson correlation coefficients of the rows, clipped to [-1, 1]. */
Tensor corrcoef(const Tensor& x);
/** The trapezoid rule along dim with sample points x (1-D, or shaped like y) or spacing dx. */
Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim = -1);
Tensor trapezoid(const Tensor& y, double dx = 1.0, int64_t dim = -1);
Tensor trapz(const Tensor& y, const Tensor& x, int64_t dim = -1);
Tensor trapz(const Tensor& y, double dx = 1.0, int64_t dim = -1);
Tensor cumulative_trapezoid(const Tensor& y, double dx = 1.0, int64_t dim = -1);
Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, int64_t dim = -1);
/** Columns x^(N-1) ... x^0 (increasing: x^0 ... x^(N-1)); N defaults to len(x). */
Tensor vander(const Tensor& x, std::optional<int64_t> n = std::nullopt, bool increasing = false);
/** base^linspace(start, end, steps). */
Tensor logspace(double start, double end, int64_t steps, double base = 10.0,
                TensorOptions options = {});
/** Integers uniform in [low, high) (i64 unless options say otherwise). */
Tensor randint(int64_t low, int64_t high, const IntList& size, TensorOptions options = {});
/** A random permutation of 0..n-1. */
Tensor randperm(int64_t n, TensorOptions options = {});
/** 1 with probability p (elementwise), else 0, in p's dtype; or with one p, in x's shape
 * and dtype. */
Tensor bernoulli(const Tensor& p);
Tensor bernoulli(const Tensor& x, double p);
/** Poisson counts with the elementwise rates (non-negative; in their dtype), by inversion:
 * the smallest k with P(X <= k) = Q(k + 1, rate) >= u, found by bisection over k (eager
 * only: the bracket comes from the largest rate). */
Tensor poisson(const Tensor& rates);
/** num_samples category indices per row of (unnormalized) probs, with or without
 * replacement. */
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
/** Normal samples with the given means and standard deviations (broadcast together). */
Tensor normal(const Tensor& mean, const Tensor& std);
Tensor normal(double mean, double std, const IntList& size, TensorOptions options = {});

/** Tensor.exponential_, geometric_, log_normal_, cauchy_, random_: self (floating, for
 * all but random_) refilled in place with samples of that distribution: Exp(lambd);
 * the number of Bernoulli(p) trials to the first success (>= 1); exp(N(mean, std)); Cauchy
 * (median, sigma); integers uniform in [from, to). */
Tensor& exponential_(Tensor& self, double lambd = 1.0);
Tensor& geometric_(Tensor& self, double p);
Tensor& log_normal_(Tensor& self, double mean = 1.0, double std = 2.0);
Tensor& cauchy_(Tensor& self, double median = 0.0, double sigma = 1.0);
Tensor& random_(Tensor& self, int64_t from, int64_t to);
Tensor& random_(Tensor& self, int64_t to);
/** torch.chain_matmul (linalg::multi_dot) and torch.ger (outer). */
Tensor chain_matmul(const TensorList& matrices);
Tensor ger(const Tensor& a, const Tensor& b);

/** PyTorch-like printing: tensor([[1., 2.]], device='cpu:1'). */
std::ostream& operator<<(std::ostream& os, const Tensor& x);
std::string to_string(const Tensor& x);

}  // namespace kiln
