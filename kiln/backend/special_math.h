#pragma once
// Special functions of one real argument, on the arithmetic type W (float or double), for
// the CPU kernels and the CUDA kernels alike: erfinv, lgamma, digamma, trigamma and
// polygamma. The algorithms are the textbook ones PyTorch also uses (recurrence to a
// large argument, then the asymptotic series; reflection for negative arguments; the
// Euler-Maclaurin sum for the Hurwitz zeta function), with the same truncations, so
// results agree with PyTorch's to rounding. Domain edges follow PyTorch: digamma(±0) =
// ∓inf, digamma of a negative integer NaN, erfinv(±1) = ±inf, |y| > 1 NaN.

#include <cmath>
#include <limits>

#include "kiln/backend/shared.h"  // KILN_HOST_DEVICE

namespace kiln::backend {

template <typename W>
KILN_HOST_DEVICE inline W pi_v() {
  return W(3.14159265358979323846);
}

/** ln |Γ(x)|; +inf at 0 and the negative integers. */
template <typename W>
KILN_HOST_DEVICE inline W lgamma_of(W x) {
#if defined(__CUDA_ARCH__)
  return lgamma(x);
#else
  int sign = 0;  // the reentrant form: std::lgamma writes the global signgam
  if constexpr (std::is_same_v<W, float>)
    return ::lgammaf_r(x, &sign);
  else
    return ::lgamma_r(x, &sign);
#endif
}

/** The inverse of erf on [-1, 1]. */
template <typename W>
KILN_HOST_DEVICE inline W erfinv_of(W y) {
#if defined(__CUDA_ARCH__)
  return erfinv(y);
#else
  // Giles' single-precision approximation ("Approximating the erfinv function", 2010)
  // as the start, then two Newton steps on erf(x) = y in double: exact to rounding.
  if (!(y >= W(-1) && y <= W(1))) return std::numeric_limits<W>::quiet_NaN();
  if (y == W(1) || y == W(-1)) return y * std::numeric_limits<W>::infinity();
  double v = y, w = -std::log((1.0 - v) * (1.0 + v)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      p = c + p * w;
  } else {
    w = std::sqrt(w) - 3;
    p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682})
      p = c + p * w;
  }
  double x = p * v;
  const double two_over_sqrt_pi = 1.12837916709551257390;
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - v) / (two_over_sqrt_pi * std::exp(-x * x));
  return static_cast<W>(x);
#endif
}

/** ψ(x) = Γ'(x) / Γ(x). */
template <typename W>
KILN_HOST_DEVICE inline W digamma_of(W x) {
  using std::log;
  using std::tan;
  using std::trunc;
  if (x == W(0))
    return std::signbit(x) ? std::numeric_limits<W>::infinity()
                           : -std::numeric_limits<W>::infinity();
  W shift = 0;
  if (x < W(0)) {
    if (x == trunc(x)) return std::numeric_limits<W>::quiet_NaN();
    // Reflection ψ(x) = ψ(1 - x) - π / tan(π x), with tan of the fractional part only
    // (π x itself loses digits for large |x|).
    W frac = x - trunc(x);
    shift = -pi_v<W>() / tan(pi_v<W>() * frac);
    x = W(1) - x;
  }
  while (x < W(10)) {  // ψ(x) = ψ(x + 1) - 1 / x
    shift -= W(1) / x;
    x += W(1);
  }
  // ψ(x) ~ ln x - 1/(2x) - Σ B_2k / (2k x^2k), seven terms (x >= 10: below rounding).
  W series = 0;
  if (x < W(1e17)) {
    W z = W(1) / (x * x);
    const W c[] = {W(8.33333333333333333333E-2), W(-2.10927960927960927961E-2),
                   W(7.57575757575757575758E-3), W(-4.16666666666666666667E-3),
                   W(3.96825396825396825397E-3), W(-8.33333333333333333333E-3),
                   W(8.33333333333333333333E-2)};
    W poly = c[0];
    for (int i = 1; i < 7; ++i) poly = poly * z + c[i];
    series = z * poly;
  }
  return shift + log(x) - W(0.5) / x - series;
}

/** ψ'(x), the trigamma function. */
template <typename W>
KILN_HOST_DEVICE inline W trigamma_of(W x) {
  using std::sin;
  W sign = 1, result = 0;
  if (x < W(0.5)) {  // ψ'(x) = π² / sin²(π x) - ψ'(1 - x)
    sign = -1;
    W s = sin(pi_v<W>() * x);
    result -= pi_v<W>() * pi_v<W>() / (s * s);
    x = W(1) - x;
  }
  for (int i = 0; i < 6; ++i) {  // ψ'(x) = ψ'(x + 1) + 1 / x²
    result += W(1) / (x * x);
    x += W(1);
  }
  // ψ'(x) ~ 1/x + 1/(2x²) + 1/(6x³) - 1/(30x⁵) + 1/(42x⁷)
  W ixx = W(1) / (x * x);
  result +=
      (W(1) + W(1) / (W(2) * x) + ixx * (W(1) / 6 - ixx * (W(1) / 30 - ixx * (W(1) / 42)))) / x;
  return sign * result;
}

/** The Hurwitz zeta function ζ(s, q) = Σ_k (q + k)^-s for s > 1: direct terms until q + k
 * > 9, then the Euler-Maclaurin tail with the Bernoulli numbers. */
template <typename W>
KILN_HOST_DEVICE inline W hurwitz_zeta(W s, W q) {
  using std::abs;
  using std::floor;
  using std::pow;
  const W inf = std::numeric_limits<W>::infinity();
  if (s == W(1)) return inf;
  if (s < W(1)) return std::numeric_limits<W>::quiet_NaN();
  if (q <= W(0)) {
    if (q == floor(q)) return inf;
    if (s != floor(s)) return std::numeric_limits<W>::quiet_NaN();  // (q + k)^-s is not real
  }
  const W eps = std::numeric_limits<W>::epsilon();
  W sum = pow(q, -s), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= W(9)) {
    ++i;
    a += W(1);
    b = pow(a, -s);
    sum += b;
    if (abs(b / sum) < eps) return sum;
  }
  // (2k)! / B_2k for k = 1..12.
  const W A[] = {W(12.0),
                 W(-720.0),
                 W(30240.0),
                 W(-1209600.0),
                 W(47900160.0),
                 W(-1.8924375803183791606e9),
                 W(7.47242496e10),
                 W(-2.950130727918164224e12),
                 W(1.1646782814350067249e14),
                 W(-4.5979787224074726105e15),
                 W(1.8152105401943546773e17),
                 W(-7.1661652561756670113e18)};
  W w = a;
  sum += b * w / (s - W(1)) - W(0.5) * b;
  W fac = 1, k = 0;
  for (int j = 0; j < 12; ++j) {
    fac *= s + k;
    b /= w;
    W t = fac * b / A[j];
    sum += t;
    if (abs(t / sum) < eps) break;
    k += W(1);
    fac *= s + k;
    b /= w;
    k += W(1);
  }
  return sum;
}

/** ψ⁽ⁿ⁾(x): digamma for n = 0, trigamma for n = 1, else (-1)^(n+1) n! ζ(n + 1, x). */
template <typename W>
KILN_HOST_DEVICE inline W polygamma_of(int64_t n, W x) {
  if (n == 0) return digamma_of(x);
  if (n == 1) return trigamma_of(x);
  using std::exp;
  W nf = static_cast<W>(n);
  return (n % 2 ? W(1) : W(-1)) * exp(lgamma_of(nf + W(1))) * hurwitz_zeta(nf + W(1), x);
}

}  // namespace kiln::backend
