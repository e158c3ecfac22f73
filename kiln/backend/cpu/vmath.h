#pragma once
// Branch-free float exp, erf and tanh that compilers vectorize (the libm calls do not):
// used by softmax, sigmoid, silu, tanh and both GELU forms, where they were the largest
// non-GEMM cost of the transformer block and of the GPT's tanh-GELU (docs/benchmarks.md).

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace kiln::cpu {

/** e^x for float, relative error < 3e-7; e^x = 0 below -87.3, inf above 88.7, nan kept. */
inline float fast_exp(float x) {
  float c = x < -87.3f ? -87.3f : x > 88.7f ? 88.7f : x;
  c = c == c ? c : 0.0f;  // NaN: compute on 0 (never convert NaN to int), return x below
  // n = round(x / ln 2) with the 1.5 * 2^23 trick (exact, vectorizable without
  // fast-math); the remainder x - n ln2 in two steps (Cody-Waite) so it stays exact for
  // large |x|.
  float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float f = c - n * 0.693359375f;
  f = f - n * -2.12194440e-4f;  // |f| <= ln2 / 2
  // e^f by Taylor to degree 7: error < 5e-9 relative on [-ln2/2, ln2/2].
  float p = 1.0f + f * (1.0f + f * (0.5f + f * (1.0f / 6 + f * (1.0f / 24 + f * (1.0f / 120 +
                 f * (1.0f / 720 + f * (1.0f / 5040)))))));
  float scale = std::bit_cast<float>(static_cast<int32_t>(static_cast<int32_t>(n) + 127) << 23);
  float r = p * scale;
  r = x < -87.3f ? 0.0f : r;
  r = x > 88.7f ? INFINITY : r;
  return x != x ? x : r;
}

/** erf(x) for float by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7 in exact
 * arithmetic, < 5e-7 in float). */
inline float fast_erf(float x) {
  float a = x < 0 ? -x : x;
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f +
               t * (-1.453152027f + t * 1.061405429f))));
  float y = 1.0f - poly * fast_exp(-a * a);
  return x < 0 ? -y : y;
}

/** tanh(x) for float as expm1(2x) / (expm1(2x) + 2), with expm1 by Taylor near 0 (so
 * small |x| keep full relative precision) and by fast_exp elsewhere; |x| >= 9 is +-1
 * in float. Relative error < 5e-7. */
inline float fast_tanh(float x) {
  float c = x < -9.0f ? -9.0f : x > 9.0f ? 9.0f : x;
  float y = 2.0f * c;
  float a = y < 0 ? -y : y;
  // expm1 on |y| < 0.5 by Taylor to degree 8 (remainder < 6e-9 relative).
  float small = y * (1.0f + y * (0.5f + y * (1.0f / 6 + y * (1.0f / 24 + y * (1.0f / 120 +
                y * (1.0f / 720 + y * (1.0f / 5040 + y * (1.0f / 40320))))))));
  float em1 = a < 0.5f ? small : fast_exp(y) - 1.0f;
  float r = em1 / (em1 + 2.0f);
  return x != x ? x : r;
}

/** exp / erf / tanh in T: the vectorizable float versions above, libm for double. */
template <typename T>
inline T vexp(T x) {
  if constexpr (std::is_same_v<T, float>) return fast_exp(x);
  else return std::exp(x);
}
template <typename T>
inline T verf(T x) {
  if constexpr (std::is_same_v<T, float>) return fast_erf(x);
  else return std::erf(x);
}
template <typename T>
inline T vtanh(T x) {
  if constexpr (std::is_same_v<T, float>) return fast_tanh(x);
  else return std::tanh(x);
}

// Row reductions for the row kernels (softmax, norms). Float rows accumulate in 16
// independent lanes, which the compiler turns into vector registers, each lane with a
// Kahan compensation term, and the lanes meet in double: vector speed with an error far
// below float rounding of the result (the tests hold them to 1e-6 relative of a double
// reference). Doubles add in order.

/** sum over j < n of g(j), where g returns T. */
template <typename T, typename G>
inline double row_sum(int64_t n, G&& g) {
  if constexpr (!std::is_same_v<T, float>) {
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s += static_cast<double>(g(j));
    return s;
  } else {
    constexpr int L = 16;
    float s[L] = {}, c[L] = {};
    int64_t j = 0;
    for (; j + L <= n; j += L)
      for (int l = 0; l < L; ++l) {
        float y = g(j + l) - c[l];
        float t = s[l] + y;
        c[l] = (t - s[l]) - y;
        s[l] = t;
      }
    double total = 0;
    for (int l = 0; l < L; ++l) total += static_cast<double>(s[l]) - static_cast<double>(c[l]);
    for (; j < n; ++j) total += static_cast<double>(g(j));
    return total;
  }
}

/** The largest of p[0..n) (n >= 1); with a NaN in the row the result is unspecified
 * among the values, which is enough for softmax (the NaN reaches every output anyway). */
template <typename T>
inline T row_max(const T* p, int64_t n) {
  constexpr int L = 16;
  T m[L];
  for (int l = 0; l < L; ++l) m[l] = p[0];
  int64_t j = 0;
  for (; j + L <= n; j += L)
    for (int l = 0; l < L; ++l) m[l] = m[l] < p[j + l] ? p[j + l] : m[l];
  T best = m[0];
  for (int l = 1; l < L; ++l) best = best < m[l] ? m[l] : best;
  for (; j < n; ++j) best = best < p[j] ? p[j] : best;
  return best;
}

}  // namespace kiln::cpu
