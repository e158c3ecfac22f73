#pragma once
// The per-element arithmetic of the CUDA kernels, on the arithmetic type W (f32 for
// f16/bf16, else the element type), free of CUDA headers: the kernels call it on the
// GPU and tests call it on the host, against the CPU backend.

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/backend/shared.h"  // KILN_HOST_DEVICE, int_pow
#include "kiln/backend/special_math.h"
#include "kiln/ops/op_table.h"

namespace kiln::cuda {

template <typename W>
KILN_HOST_DEVICE inline bool is_nan(W v) {
  if constexpr (std::is_floating_point_v<W>)
    return v != v;
  else
    return false;
}

template <typename W>
KILN_HOST_DEVICE inline W gelu_of(W v, bool tanh_form) {
  using std::erf;
  using std::tanh;
  if (tanh_form) {
    const W k = W(0.7978845608028654);  // sqrt(2 / pi)
    return W(0.5) * v * (W(1) + tanh(k * (v + W(0.044715) * v * v * v)));
  }
  return W(0.5) * v * (W(1) + erf(v * W(0.7071067811865476)));
}

/** The unary op `op` of `v`; `attr` is the op's integer attribute (gelu: 1 for the tanh
 * form; polygamma: n). Integer and bool types support neg, abs, relu, sign and the
 * roundings (dispatch checks before launching). */
template <typename W>
KILN_HOST_DEVICE inline W unary_w(ops::OpKind op, W v, int64_t attr) {
  using ops::OpKind;
  using std::cos;
  using std::exp;
  using std::log;
  using std::sin;
  using std::sqrt;
  using std::tanh;
  if constexpr (std::is_same_v<W, bool>) {
    return v;  // abs, relu and sign of bool are the identity
  } else {
    switch (op) {
      case OpKind::neg: return static_cast<W>(-v);
      case OpKind::abs:
        if constexpr (std::is_unsigned_v<W>)
          return v;
        else
          return v < W(0) ? static_cast<W>(-v) : v;
      case OpKind::relu: return v > W(0) || v != v ? v : W(0);  // NaN stays
      case OpKind::sign:                                        // NaN: 0
        if constexpr (std::is_unsigned_v<W>)
          return static_cast<W>(v > W(0));
        else
          return static_cast<W>((W(0) < v) - (v < W(0)));
      default: break;
    }
    if constexpr (std::is_floating_point_v<W>) {
      using std::acos;
      using std::acosh;
      using std::asin;
      using std::asinh;
      using std::atan;
      using std::atanh;
      using std::ceil;
      using std::cos;
      using std::cosh;
      using std::erf;
      using std::erfc;
      using std::exp;
      using std::exp2;
      using std::expm1;
      using std::floor;
      using std::log;
      using std::log10;
      using std::log1p;
      using std::log2;
      using std::nearbyint;
      using std::sin;
      using std::sinh;
      using std::sqrt;
      using std::tan;
      using std::tanh;
      using std::trunc;
      switch (op) {
        case OpKind::log1p: return log1p(v);
        case OpKind::expm1: return expm1(v);
        case OpKind::log2: return log2(v);
        case OpKind::exp2: return exp2(v);
        case OpKind::log10: return log10(v);
        case OpKind::erfc: return erfc(v);
        case OpKind::asinh: return asinh(v);
        case OpKind::acosh: return acosh(v);
        case OpKind::atanh: return atanh(v);
        case OpKind::erfinv: return backend::erfinv_of(v);
        case OpKind::lgamma: return backend::lgamma_of(v);
        case OpKind::digamma: return backend::digamma_of(v);
        case OpKind::polygamma: return backend::polygamma_of(attr, v);
        case OpKind::tan: return tan(v);
        case OpKind::atan: return atan(v);
        case OpKind::asin: return asin(v);
        case OpKind::acos: return acos(v);
        case OpKind::sinh: return sinh(v);
        case OpKind::cosh: return cosh(v);
        case OpKind::reciprocal: return W(1) / v;
        case OpKind::floor: return floor(v);
        case OpKind::ceil: return ceil(v);
        case OpKind::round: return nearbyint(v);  // half to even
        case OpKind::trunc: return trunc(v);
        case OpKind::exp: return exp(v);
        case OpKind::log: return log(v);
        case OpKind::sqrt: return sqrt(v);
        case OpKind::rsqrt: return W(1) / sqrt(v);
        case OpKind::sin: return sin(v);
        case OpKind::cos: return cos(v);
        case OpKind::tanh: return tanh(v);
        case OpKind::sigmoid: return W(1) / (W(1) + exp(-v));
        case OpKind::silu: return v / (W(1) + exp(-v));
        case OpKind::gelu: return gelu_of(v, attr != 0);
        case OpKind::erf: return erf(v);
        default: break;
      }
    }
    return v;
  }
}

/** The binary op `op` of (x, y); add/sub scale y by `alpha`. */
template <typename W>
KILN_HOST_DEVICE inline W binary_w(ops::OpKind op, W x, W y, W alpha) {
  using ops::OpKind;
  using std::pow;
  if constexpr (std::is_same_v<W, bool>) {
    switch (op) {
      case OpKind::add:
      case OpKind::sub: return x || (alpha && y);
      case OpKind::mul: return x && y;
      case OpKind::pow: return x || !y;
      case OpKind::maximum: return x || y;
      case OpKind::minimum: return x && y;
      default: return x;
    }
  } else {
    switch (op) {
      case OpKind::add: return static_cast<W>(x + alpha * y);
      case OpKind::sub: return static_cast<W>(x - alpha * y);
      case OpKind::mul: return static_cast<W>(x * y);
      case OpKind::div: return static_cast<W>(x / y);
      case OpKind::pow:
        if constexpr (std::is_floating_point_v<W>)
          return pow(x, y);
        else
          return backend::int_pow(x, y);
      case OpKind::maximum:
      case OpKind::minimum:
        if (is_nan(x) || is_nan(y)) return static_cast<W>(x + y);
        return op == OpKind::maximum ? (x > y ? x : y) : (x < y ? x : y);
      // Integer divisors of 0 are caught before (k_binary); 0 keeps this total.
      case OpKind::remainder:
        if constexpr (std::is_integral_v<W>)
          if (y == W(0)) return W(0);
        return backend::remainder_of(x, y);
      case OpKind::fmod:
        if constexpr (std::is_integral_v<W>)
          if (y == W(0)) return W(0);
        return backend::fmod_of(x, y);
      case OpKind::floor_divide:
        if constexpr (std::is_integral_v<W>)
          if (y == W(0)) return W(0);
        return backend::floor_divide_of(x, y);
      case OpKind::atan2:
        if constexpr (std::is_floating_point_v<W>) {
          using std::atan2;
          return atan2(x, y);
        }
        return x;
      default: return x;
    }
  }
}

/** The comparison `op` of (x, y). */
template <typename W>
KILN_HOST_DEVICE inline bool compare_w(ops::OpKind op, W x, W y) {
  using ops::OpKind;
  switch (op) {
    case OpKind::eq: return x == y;
    case OpKind::ne: return x != y;
    case OpKind::lt: return x < y;
    case OpKind::le: return x <= y;
    case OpKind::gt: return x > y;
    case OpKind::ge: return x >= y;
    default: return false;
  }
}

/** amax/amin's combine: NaN wins, else the larger (smaller). */
template <typename W>
KILN_HOST_DEVICE inline W pick_extreme(W a, W b, bool is_max) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return is_max ? (a > b ? a : b) : (a < b ? a : b);
}
/** The identity of pick_extreme. */
template <typename W>
KILN_HOST_DEVICE inline W extreme_identity(bool is_max) {
  if constexpr (std::is_floating_point_v<W>)
    return is_max ? -std::numeric_limits<W>::infinity() : std::numeric_limits<W>::infinity();
  else
    return is_max ? std::numeric_limits<W>::lowest() : std::numeric_limits<W>::max();
}

/** A (value, index) candidate of max/min/argmax; index kNoIndex is "none yet". */
template <typename W>
struct Arg {
  W v;
  int64_t i;
};
constexpr int64_t kNoIndex = std::numeric_limits<int64_t>::max();

/** max/min/argmax's combine, order-independent: the first NaN, else the extreme value
 * with the smallest index. */
template <typename W>
KILN_HOST_DEVICE inline Arg<W> pick_arg(Arg<W> a, Arg<W> b, bool is_max) {
  if (a.i == kNoIndex) return b;
  if (b.i == kNoIndex) return a;
  bool na = is_nan(a.v), nb = is_nan(b.v);
  if (na || nb) return na && (!nb || a.i < b.i) ? a : b;
  if (a.v == b.v) return a.i < b.i ? a : b;
  return (is_max ? a.v > b.v : a.v < b.v) ? a : b;
}

}  // namespace kiln::cuda
