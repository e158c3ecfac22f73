#pragma once
// Internal to the CPU backend: the per-element functions of the elementwise ops that the
// eager kernels (elementwise_unary.cpp, _binary.cpp) and the fused pointwise regions
// (pointwise.cpp) share. One definition for both is what makes a fused region's result
// bit for bit the unfused ops' (Note [Fused pointwise regions] in pointwise.h): each op
// is the same expression on each element, compiled in a loop of its own at the same ISA
// level, so no contraction or reassociation can differ.

#include <cmath>

#include "kiln/backend/cpu/vmath.h"
#include "kiln/backend/shared.h"
#include "kiln/ops/op_table.h"

namespace kiln::cpu::fns {

template <typename T>
inline T relu(T v) {
  return v > T(0) || v != v ? v : T(0);  // NaN stays
}

template <typename T>
inline T abs(T v) {
  if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>)
    return v;
  else
    return v < 0 ? -v : v;
}

/** Calls `apply(f)` with the element function of a floating unary op (T float or double);
 * false when `op` is not one of them. `tanh_gelu`: gelu's approximate="tanh". */
template <typename T, typename Apply>
bool with_float_unary(ops::OpKind op, bool tanh_gelu, Apply&& apply) {
  using ops::OpKind;
  switch (op) {
    case OpKind::neg: apply([](T v) -> T { return -v; }); return true;
    case OpKind::abs: apply([](T v) -> T { return abs(v); }); return true;
    case OpKind::relu: apply([](T v) -> T { return relu(v); }); return true;
    case OpKind::exp: apply([](T v) { return vexp(v); }); return true;  // libm: 8x slower
    case OpKind::log: apply([](T v) { return std::log(v); }); return true;
    case OpKind::sqrt: apply([](T v) { return std::sqrt(v); }); return true;
    case OpKind::rsqrt: apply([](T v) { return T(1) / std::sqrt(v); }); return true;
    case OpKind::sin: apply([](T v) { return std::sin(v); }); return true;
    case OpKind::cos: apply([](T v) { return std::cos(v); }); return true;
    case OpKind::erf: apply([](T v) { return verf(v); }); return true;
    case OpKind::tanh: apply([](T v) { return vtanh(v); }); return true;
    case OpKind::sigmoid: apply([](T v) { return vsigmoid(v); }); return true;
    case OpKind::silu: apply([](T v) { return v * vsigmoid(v); }); return true;
    case OpKind::reciprocal: apply([](T v) { return T(1) / v; }); return true;
    case OpKind::gelu:
      if (tanh_gelu)  // 0.5 v (1 + tanh(z)) = v sigmoid(2z): one exp and one division
        apply([](T v) {
          const T k2 = T(2) * std::sqrt(T(2) / T(3.14159265358979323846));
          return v * vsigmoid(k2 * (v + T(0.044715) * v * v * v));
        });
      else
        apply([](T v) { return T(0.5) * v * (T(1) + verf(v * T(0.70710678118654752440))); });
      return true;
    default: return false;
  }
}

/** add / sub with `alpha` (already in T) as x + alpha * y (x - alpha * y), in the three
 * forms the kernels have always used: plain, negated, scaled. */
template <typename T, typename Apply>
void with_add(bool sub, T alpha, Apply&& apply) {
  if (alpha == T(1) && !sub) {
    apply([](T x, T y) -> T { return backend::wrap_add(x, y); });
  } else if (alpha == T(1)) {
    apply([](T x, T y) -> T { return backend::wrap_add(x, backend::wrap_mul(T(-1), y)); });
  } else {
    T k = sub ? backend::wrap_mul(T(-1), alpha) : alpha;
    apply([k](T x, T y) -> T { return backend::wrap_add(x, backend::wrap_mul(k, y)); });
  }
}

template <typename T>
inline T maximum(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(x) || std::isnan(y)) return x + y;
  return x > y ? x : y;
}
template <typename T>
inline T minimum(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(x) || std::isnan(y)) return x + y;
  return x < y ? x : y;
}

/** Calls `apply(f)` with gelu_backward's element function for float, grad * GELU'(x),
 * of the exact (erf) or the tanh form. */
template <typename Apply>
void with_gelu_backward(bool tanh_form, Apply&& apply) {
  if (tanh_form) {
    apply([](float g, float v) {
      auto erf_ = [](float x) { return verf(x); };
      auto exp_ = [](float x) { return vexp(x); };
      auto tanh_ = [](float x) { return vtanh(x); };
      return g * backend::gelu_derivative(v, true, erf_, exp_, tanh_);
    });
  } else {
    apply([](float g, float v) { return g * fast_gelu_derivative(v); });
  }
}

}  // namespace kiln::cpu::fns
