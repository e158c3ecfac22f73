#pragma once
// Branch-free float exp, erf and tanh that compilers vectorize (the libm calls do not):
// used by softmax, sigmoid, silu, tanh and both GELU forms, where they were the largest
// non-GEMM cost of the transformer block and of the GPT's tanh-GELU (docs/benchmarks.md).

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kiln::cpu {

/** e^c for float c in [-87.3, 88.7] (no NaN), relative error < 3e-7: the shared core of
 * the exps below, which clamp their argument first. */
inline float exp_in_range(float c) {
  // n = round(c / ln 2) with the 1.5 * 2^23 trick (exact, vectorizable without
  // fast-math); the remainder c - n ln2 in two steps (Cody-Waite) so it stays exact for
  // large |c|.
  float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float f = c - n * 0.693359375f;
  f = f - n * -2.12194440e-4f;  // |f| <= ln2 / 2
  // e^f by Taylor to degree 7: error < 5e-9 relative on [-ln2/2, ln2/2].
  float p =
      1.0f +
      f * (1.0f + f * (0.5f + f * (1.0f / 6 +
                                   f * (1.0f / 24 +
                                        f * (1.0f / 120 + f * (1.0f / 720 + f * (1.0f / 5040)))))));
  return p * std::bit_cast<float>(static_cast<int32_t>(static_cast<int32_t>(n) + 127) << 23);
}

/** e^x for float, relative error < 3e-7; e^x = 0 below -87.3, inf above 88.7, nan kept. */
inline float fast_exp(float x) {
  float c = x < -87.3f ? -87.3f : x > 88.7f ? 88.7f : x;
  c = c == c ? c : 0.0f;  // NaN: compute on 0 (never convert NaN to int), return x below
  float r = exp_in_range(c);
  r = x < -87.3f ? 0.0f : r;
  r = x > 88.7f ? INFINITY : r;
  return x != x ? x : r;
}

/** e^x for float x <= 0 (softmax's x - max): fast_exp less the overflow and NaN selects.
 * 0 below -87.3 as there. A NaN argument gives an unspecified number, never converted to
 * an integer: callers get their NaN from another operand. */
inline float fast_exp_nonpositive(float x) {
  float r = exp_in_range(x > -87.3f ? x : -87.3f);  // the max also maps NaN to -87.3
  return x < -87.3f ? 0.0f : r;
}

/** exp(-a^2) for erf's tail, a >= 0: fast_exp_nonpositive without its final select --
 * below -87.3 it returns e^-87.3 (1e-38) instead of 0, which vanishes against erf's 1
 * anyway. That select and the sign selects were a sixth of GELU's time. */
inline float erf_tail_exp(float x) { return exp_in_range(x > -87.3f ? x : -87.3f); }

/** erf(x) for float by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7 in exact
 * arithmetic, < 5e-7 in float). The signs go through fabs and copysign: bit operations,
 * where selects cost mask registers. */
inline float fast_erf(float x) {
  float a = std::fabs(x);
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly =
      t * (0.254829592f +
           t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  float y = 1.0f - poly * erf_tail_exp(-a * a);  // a NaN x: poly is NaN
  return std::copysign(y, x);
}

/** d/dx of x Phi(x) (GELU's exact form) for float: Phi(x) + x phi(x). The erf of
 * Phi(x) = (1 + erf(x / sqrt 2)) / 2 already computes exp(-x^2 / 2), which is also
 * phi(x) sqrt(2 pi): one exp per element instead of two. */
inline float fast_gelu_derivative(float x) {
  float a = std::fabs(x) * 0.70710678118654752f;
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly =
      t * (0.254829592f +
           t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  float e = fast_exp_nonpositive(-a * a);  // exp(-x^2 / 2); a NaN x: t and poly are NaN
  float erf_x = std::copysign(1.0f - poly * e, x);
  return 0.5f * (1.0f + erf_x) + x * e * 0.39894228040143268f;
}

/** tanh(x) for float as expm1(2x) / (expm1(2x) + 2), with expm1 by Taylor near 0 (so
 * small |x| keep full relative precision) and by fast_exp elsewhere; |x| >= 9 is +-1
 * in float. Relative error < 5e-7. */
inline float fast_tanh(float x) {
  float c = x < -9.0f ? -9.0f : x > 9.0f ? 9.0f : x;
  float y = 2.0f * c;
  float a = y < 0 ? -y : y;
  // expm1 on |y| < 0.5 by Taylor to degree 8 (remainder < 6e-9 relative).
  float small =
      y * (1.0f +
           y * (0.5f + y * (1.0f / 6 +
                            y * (1.0f / 24 +
                                 y * (1.0f / 120 + y * (1.0f / 720 + y * (1.0f / 5040 +
                                                                          y * (1.0f / 40320))))))));
  float em1 = a < 0.5f ? small : fast_exp(y) - 1.0f;
  float r = em1 / (em1 + 2.0f);
  return x != x ? x : r;
}

/** 1 / (1 + e^-x) for float from e = e^-|x| <= 1, so no exp can overflow: the selects
 * of fast_exp's range checks (a quarter of sigmoid's and silu's time at AVX-512) are
 * not needed. NaN kept. */
inline float fast_sigmoid(float x) {
  float e = fast_exp_nonpositive(-std::fabs(x));  // a NaN x: unspecified, replaced below
  float r = (x >= 0 ? 1.0f : e) / (1.0f + e);
  return x != x ? x : r;
}

/** exp / erf / tanh in T: the vectorizable float versions above, libm for double. */
template <typename T>
inline T vexp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fast_exp(x);
  else
    return std::exp(x);
}
/** e^x for x <= 0 (softmax's x - max), NaN kept: one select fewer than vexp's. */
template <typename T>
inline T vexp_nonpositive(T x) {
  if constexpr (std::is_same_v<T, float>) {
    float r = fast_exp_nonpositive(x);
    return x != x ? x : r;
  } else {
    return std::exp(x);
  }
}
template <typename T>
inline T vsigmoid(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fast_sigmoid(x);
  else
    return T(1) / (T(1) + std::exp(-x));
}
template <typename T>
inline T verf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fast_erf(x);
  else
    return std::erf(x);
}
template <typename T>
inline T vtanh(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fast_tanh(x);
  else
    return std::tanh(x);
}

// Row reductions for the row kernels (softmax, norms), on GCC vector types as wide as the
// running level's registers (VB bytes: with_best_isa hands the lambda its VectorWidth --
// 64 at AVX-512, 32 at AVX2, 16 at the baseline), which stay in registers; a 64-byte
// vector at AVX2 was split through the stack and made softmax 3x slower. A float row adds
// into four such vectors side by side, so four chains of dependent adds hide the add
// latency, each lane with a Kahan compensation term; the lanes meet in double. That is
// vector speed with an error far below float rounding of the result (the tests hold it
// to 1e-6 relative of a double reference). The order of the adds depends on the row
// length and the level (as PyTorch's vectorized sums depend on its capability level),
// never on the thread count. Doubles add in order.

/** The vector types of a width: VB bytes of floats, half as many floats, and the doubles
 * those halves widen to. */
template <int VB>
struct Lanes {
  static constexpr int floats = VB / 4;
  typedef float Floats __attribute__((vector_size(VB)));
  typedef float Half __attribute__((vector_size(VB / 2)));
  typedef double Doubles __attribute__((vector_size(VB)));
};

/** acc += s - c, lane by lane in double (a compensated float sum's value). */
template <int VB>
inline void add_widened(typename Lanes<VB>::Doubles& acc, const typename Lanes<VB>::Floats& s,
                        const typename Lanes<VB>::Floats& c) {
  using L = Lanes<VB>;
  for (int h = 0; h < 2; ++h) {
    typename L::Half sh, ch;
    std::memcpy(&sh, reinterpret_cast<const char*>(&s) + h * sizeof sh, sizeof sh);
    std::memcpy(&ch, reinterpret_cast<const char*>(&c) + h * sizeof ch, sizeof ch);
    acc += __builtin_convertvector(sh, typename L::Doubles) -
           __builtin_convertvector(ch, typename L::Doubles);
  }
}

/** v = {g(j), ..., g(j + W - 1)}: computed into a buffer (a loop the compiler vectorizes,
 * exp included), read back as one vector. (Vectors pass by reference: by value, their
 * ABI would differ between the levels.) */
template <int VB, typename G>
inline void gather_lanes(typename Lanes<VB>::Floats& v, int64_t j, G& g) {
  float b[Lanes<VB>::floats];
  for (int l = 0; l < Lanes<VB>::floats; ++l) b[l] = g(j + l);
  std::memcpy(&v, b, sizeof v);
}

/** sum over j < n of g(j), where g returns T, with vectors of VB bytes. */
template <typename T, int VB, typename G>
inline double row_sum(int64_t n, G&& g) {
  double plain = 0;
  if constexpr (std::is_same_v<T, float>) {
    using L = Lanes<VB>;
    using V = typename L::Floats;
    constexpr int W = L::floats;
    V s0{}, s1{}, s2{}, s3{}, c0{}, c1{}, c2{}, c3{};
    V v;
    auto add = [&v](V& s, V& c) {
      V y = v - c;
      V t = s + y;
      c = (t - s) - y;
      s = t;
    };
    int64_t j = 0;
    for (; j + 4 * W <= n; j += 4 * W) {
      gather_lanes<VB>(v, j, g), add(s0, c0);
      gather_lanes<VB>(v, j + W, g), add(s1, c1);
      gather_lanes<VB>(v, j + 2 * W, g), add(s2, c2);
      gather_lanes<VB>(v, j + 3 * W, g), add(s3, c3);
    }
    for (; j + W <= n; j += W) gather_lanes<VB>(v, j, g), add(s0, c0);
    // The lanes meet in double vectors: each accumulator's value s - c, half a vector
    // at a time, then one tree over the lanes (a row of 128 paid more for a fold of every
    // lane one by one than for its exps).
    typename L::Doubles acc{};
    add_widened<VB>(acc, s0, c0), add_widened<VB>(acc, s1, c1);
    add_widened<VB>(acc, s2, c2), add_widened<VB>(acc, s3, c3);
    double lanes[W / 2];
    std::memcpy(lanes, &acc, sizeof acc);
    for (int w = W / 4; w >= 1; w /= 2)
      for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
    double total = lanes[0];
    for (; j < n; ++j) total += static_cast<double>(g(j));
    // A compensation turns NaN where the sum leaves the finite range (inf - inf): such
    // a rare row is added again plainly, giving the infinity or NaN it really has.
    if (total == total) return total;
  }
  for (int64_t j = 0; j < n; ++j) plain += static_cast<double>(g(j));
  return plain;
}

/** The largest of p[0..n) (n >= 1), with vectors of VB bytes; with a NaN in the row the
 * result is unspecified among the values, which is enough for softmax (the NaN reaches
 * every output anyway). At AVX2 (VB 32) it runs on 16-byte vectors: GCC's select on
 * 32-byte vector types there measured 30% slower for softmax (BM_BlockRowOps), and a
 * plain array was slower still at AVX-512. */
template <int VB, typename T>
inline T row_max(const T* p, int64_t n) {
  constexpr int B = VB == 32 ? 16 : VB;
  T best = p[0];
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    using V = typename Lanes<B>::Floats;
    constexpr int W = Lanes<B>::floats;
    if (n >= W) {
      V m;
      std::memcpy(&m, p, sizeof m);
      for (j = W; j + W <= n; j += W) {
        V v;
        std::memcpy(&v, p + j, sizeof v);
        m = m < v ? v : m;
      }
      float lanes[W];
      std::memcpy(lanes, &m, sizeof m);
      for (int w = W / 2; w >= 1; w /= 2)  // halved in a tree
        for (int l = 0; l < w; ++l) lanes[l] = lanes[l] < lanes[l + w] ? lanes[l + w] : lanes[l];
      best = lanes[0];
    }
  }
  for (; j < n; ++j) best = best < p[j] ? p[j] : best;
  return best;
}

}  // namespace kiln::cpu
