#pragma once
// The torch.special functions beyond the gamma family, for the kernels of special_unary
// and special_binary on the CPU and on CUDA devices: modified Bessel functions (I, K and
// their exponentially scaled forms), Bessel functions of the first and second kind, Airy
// Ai, the scaled complementary error function, log Φ, the regularized incomplete gamma
// functions, Hurwitz zeta and the classical orthogonal polynomials.
//
// Everything is computed in double and rounded once, except the growing or decaying
// factor e^±x of the unscaled I and K, which is computed in the result's type: a float
// I0(89) overflows and I0(±inf) is NaN (0 · inf), as PyTorch's float kernels give.
// Where PyTorch's algorithms give NaN at ±inf (J, Y and Ai, evaluated through sin/cos of
// the argument there) these do too. See docs/architecture.md, "Special functions".
//
// Methods, each exact to a few units of double rounding on the argument ranges used:
// - I0, I1 (scaled): the power series to |x| = 30, the large-argument expansion above.
// - K0, K1: the power series (with ψ) to x = 1; above, e^x K_ν(x) = ∫_0^∞ e^{-x(cosh t - 1)}
//   cosh(ν t) dt by the trapezoidal rule, which converges geometrically for this analytic,
//   doubly exponentially decaying integrand (step min(0.1, 0.5/√x), error below 1e-30).
// - Ai: the Maclaurin series on [-8, 2]; K_{1/3} through the same integral above 2;
//   the oscillatory asymptotic expansion below -8.
// - J0, J1, Y0, Y1: the C library's (glibc's and CUDA's j0/j1/y0/y1).
// - erfcx: e^{x²} erfc(x) with x² split exactly, the asymptotic series from x = 25.
// - P(a, x), Q(a, x): the series below x = a + 1, the continued fraction (modified Lentz)
//   above; the other one as the complement.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "kiln/backend/special_math.h"
#include "kiln/ops/special_names.h"

namespace kiln::backend {

using ops::Special;

namespace special_detail {

constexpr double kPi = 3.14159265358979323846;
constexpr double kEuler = 0.57721566490153286061;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/** e^{-a} I_ν(a) for ν = 0, 1 and a >= 0. */
KILN_HOST_DEVICE inline double scaled_bessel_i(int nu, double a) {
  using std::abs;
  using std::exp;
  using std::sqrt;
  if (a <= 30) {  // Σ (a/2)^{2k+ν} / (k! (k+ν)!), all terms positive
    double q = a * a / 4, t = nu ? a / 2 : 1, sum = t;
    for (int k = 1; k < 500 && t > sum * 1e-17; ++k) {
      t *= q / (k * double(k + nu));
      sum += t;
    }
    return sum * exp(-a);
  }
  // e^a / √(2πa) Σ_k t_k, t_k = t_{k-1} ((2k-1)² - 4ν²) / (8 k a), while the terms shrink.
  double mu = 4.0 * nu * nu, t = 1, sum = 1;
  for (int k = 1; k < 60; ++k) {
    double next = t * ((2 * k - 1.0) * (2 * k - 1.0) - mu) / (8.0 * k * a);
    if (!(abs(next) < abs(t)) || abs(next) < 1e-17 * abs(sum)) break;
    t = next;
    sum += t;
  }
  return sum / sqrt(2 * kPi * a);
}

/** e^x K_ν(x) for x > 0 and real ν >= 0: the trapezoidal rule on ∫_0^∞ e^{-x(cosh t - 1)}
 * cosh(ν t) dt (cosh t - 1 written 2 sinh²(t/2), exact for small t). */
KILN_HOST_DEVICE inline double scaled_bessel_k_integral(double nu, double x) {
  using std::cosh;
  using std::exp;
  using std::sinh;
  using std::sqrt;
  double h = 0.5 / sqrt(x);
  if (h > 0.1) h = 0.1;
  double sum = 0.5;  // t = 0, half weight
  for (int k = 1; k < 100000; ++k) {
    double t = k * h, s = sinh(t / 2), e = 2 * x * s * s;
    if (e > 50 + nu * t) break;
    sum += exp(-e) * cosh(nu * t);
  }
  return sum * h;
}

/** K_ν(x) for ν = 0, 1 and 0 < x <= 1 from the power series (A&S 9.6.13, 9.6.11). */
KILN_HOST_DEVICE inline double bessel_k_series(int nu, double x) {
  using std::log;
  double q = x * x / 4, lg = log(x / 2);
  if (nu == 0) {  // -(ln(x/2) + γ) I0(x) + Σ_k H_k q^k / (k!)²
    double t = 1, i0 = 1, s = 0, harmonic = 0;
    for (int k = 1; k < 60 && t > 1e-18; ++k) {
      t *= q / (double(k) * k);
      harmonic += 1.0 / k;
      i0 += t;
      s += t * harmonic;
    }
    return -(lg + kEuler) * i0 + s;
  }
  // 1/x + ln(x/2) I1(x) - (x/4) Σ_k (ψ(k+1) + ψ(k+2)) q^k / (k! (k+1)!)
  double t = 1, i1 = 1, psi1 = -kEuler, psi2 = 1 - kEuler, s = psi1 + psi2;
  for (int k = 1; k < 60 && t > 1e-18; ++k) {
    t *= q / (double(k) * (k + 1));
    psi1 += 1.0 / k;
    psi2 += 1.0 / (k + 1);
    i1 += t;
    s += t * (psi1 + psi2);
  }
  return 1 / x + lg * i1 * (x / 2) - x / 4 * s;
}

/** e^x K_ν(x) (scaled) or K_ν(x), ν = 0, 1; the unscaled factor e^-x in W. */
template <typename W>
KILN_HOST_DEVICE inline W bessel_k(int nu, W xw, bool scaled) {
  using std::exp;
  double x = xw;
  if (x != x) return xw;
  if (x < 0) return W(kNaN);
  if (x == 0) return W(kInf);
  if (x <= 1) {
    double k = bessel_k_series(nu, x);
    return W(scaled ? k * exp(x) : k);
  }
  if (x == kInf) return W(0);
  double s = scaled_bessel_k_integral(nu, x);
  return scaled ? W(s) : W(s) * exp(-xw);
}

/** I_ν(x) e^{-|x|} (scaled) or I_ν(x), ν = 0, 1; the unscaled factor e^|x| in W. */
template <typename W>
KILN_HOST_DEVICE inline W bessel_i(int nu, W xw, bool scaled) {
  using std::abs;
  using std::exp;
  double x = xw;
  if (x != x) return xw;
  W s = W(scaled_bessel_i(nu, abs(x)));
  if (nu == 1 && x < 0) s = -s;
  return scaled ? s : s * exp(abs(xw));
}

/** Ai(x). */
KILN_HOST_DEVICE inline double airy_ai(double x) {
  using std::abs;
  using std::cos;
  using std::exp;
  using std::sin;
  using std::sqrt;
  if (x != x || abs(x) == kInf) return kNaN;
  if (x > 2) {  // Ai(x) = √(x/3) / π K_{1/3}(ζ), ζ = 2/3 x^{3/2}
    double z = 2.0 / 3.0 * x * sqrt(x);
    return sqrt(x / 3) / kPi * scaled_bessel_k_integral(1.0 / 3.0, z) * exp(-z);
  }
  if (x >= -8) {  // Ai(x) = Ai(0) f(x) + Ai'(0) g(x)
    const double ai0 = 0.355028053887817239260, dai0 = -0.258819403792806798405;
    double x3 = x * x * x, f = 1, g = x, tf = 1, tg = x;
    for (int k = 1; k < 100; ++k) {
      tf *= x3 / ((3.0 * k - 1) * (3.0 * k));
      tg *= x3 / ((3.0 * k) * (3.0 * k + 1));
      f += tf;
      g += tg;
      if (abs(tf) + abs(tg) < 1e-18 * (abs(f) + abs(g))) break;
    }
    return ai0 * f + dai0 * g;
  }
  // Ai(-z) ~ (sin(ζ + π/4) P - cos(ζ + π/4) Q) / (√π z^{1/4}), P and Q the even and odd
  // parts of Σ (-1)^⌊k/2⌋ c_k ζ^-k, c_k = c_{k-1} (3k-½)(3k-3/2)(3k-5/2) / (54 k (k-½)).
  double z = -x, zeta = 2.0 / 3.0 * z * sqrt(z), p = 1, q = 0, t = 1;
  for (int k = 1; k < 80; ++k) {
    double next = t * (3 * k - 0.5) * (3 * k - 1.5) * (3 * k - 2.5) / (54.0 * k * (k - 0.5)) / zeta;
    if (!(next < t) || next < 1e-17) break;
    t = next;
    double signed_t = (k / 2) % 2 ? -t : t;
    if (k % 2)
      q += signed_t;
    else
      p += signed_t;
  }
  double phase = zeta + kPi / 4;
  return (sin(phase) * p - cos(phase) * q) / (sqrt(kPi) * sqrt(sqrt(z)));
}

/** e^{x²} erfc(x) for x >= 0. */
KILN_HOST_DEVICE inline double erfcx_nonnegative(double x) {
  using std::erfc;
  using std::exp;
  using std::fma;
  using std::sqrt;
  if (x < 25) {
    double hi = x * x, lo = fma(x, x, -hi);  // x² = hi + lo exactly
    return exp(hi) * (1 + lo) * erfc(x);
  }
  // 1 / (x √π) Σ_k (-1)^k (2k-1)!! / (2x²)^k; at x >= 25 twelve terms are below rounding.
  double r = 1 / (2 * x * x), t = 1, s = 1;
  for (int k = 1; k < 12; ++k) {
    t *= -(2 * k - 1) * r;
    s += t;
  }
  return s / (x * sqrt(kPi));
}

KILN_HOST_DEVICE inline double erfcx(double x) {
  using std::exp;
  using std::fma;
  if (x != x) return x;
  if (x >= 0) return erfcx_nonnegative(x);
  if (x < -26.7) return kInf;  // 2 e^{x²} overflows
  double hi = x * x, lo = fma(x, x, -hi);
  return 2 * exp(hi) * (1 + lo) - erfcx_nonnegative(-x);
}

/** log Φ(x), Φ the standard normal CDF. */
KILN_HOST_DEVICE inline double log_ndtr(double x) {
  using std::erfc;
  using std::log;
  using std::log1p;
  double t = x * 0.70710678118654752440;
  if (x < -1) return log(erfcx(-t) / 2) - t * t;  // Φ(x) = erfcx(-t) e^{-t²} / 2
  return log1p(-erfc(t) / 2);
}

/** sin(x) / x. */
KILN_HOST_DEVICE inline double spherical_bessel_j0(double x) {
  using std::abs;
  using std::sin;
  if (abs(x) == kInf) return 0;
  if (abs(x) < 0.5) {
    double t = 1, s = 1;
    for (int k = 1; k < 12; ++k) {
      t *= -x * x / ((2.0 * k) * (2.0 * k + 1));
      s += t;
    }
    return s;
  }
  return sin(x) / x;
}

/** J0, J1, Y0, Y1 from the C library; NaN at ±inf as PyTorch's; Y of x < 0 NaN. */
KILN_HOST_DEVICE inline double bessel_jy(Special fn, double x) {
  using std::abs;
  if (x != x || abs(x) == kInf) return kNaN;
  switch (fn) {
    case Special::bessel_j0: return ::j0(x);
    case Special::bessel_j1: return ::j1(x);
    default: break;
  }
  if (x < 0) return kNaN;
  if (x == 0) return -kInf;
  return fn == Special::bessel_y0 ? ::y0(x) : ::y1(x);
}

/** P(a, x) (lower = true) or Q(a, x), the regularized incomplete gamma functions. */
KILN_HOST_DEVICE inline double incomplete_gamma(double a, double x, bool lower) {
  using std::abs;
  using std::exp;
  using std::log;
  if (x < 0 || a < 0) return kNaN;
  if (a == 0) return x > 0 ? (lower ? 1.0 : 0.0) : kNaN;
  if (x == 0) return lower ? 0.0 : 1.0;
  if (a == kInf) return x == kInf ? kNaN : (lower ? 0.0 : 1.0);
  if (x == kInf) return lower ? 1.0 : 0.0;
  if (a != a || x != x) return kNaN;
  double log_front = a * log(x) - x;
  if (x < a + 1) {  // P = x^a e^-x / Γ(a+1) Σ_k x^k / ((a+1)...(a+k))
    double t = 1, s = 1;
    for (int k = 1; k < 100000 && t > s * 1e-17; ++k) {
      t *= x / (a + k);
      s += t;
    }
    double p = exp(log_front - lgamma_of(a + 1)) * s;
    return lower ? p : 1 - p;
  }
  // Q = x^a e^-x / Γ(a) · 1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- ...))), modified Lentz.
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (abs(c) < tiny) c = tiny;
    d = 1 / d;
    double delta = d * c;
    h *= delta;
    if (abs(delta - 1) < 1e-16) break;
  }
  double q = exp(log_front - lgamma_of(a)) * h;
  return lower ? 1 - q : q;
}

/** The degree of a polynomial from its (floating) n as PyTorch truncates it; -1 for
 * negative, NaN or out-of-range n (the polynomial is then 0). */
KILN_HOST_DEVICE inline int64_t degree(double n) {
  return n > -1 && n < 9.2e18 ? static_cast<int64_t>(n) : -1;  // toward zero: -0.5 is degree 0
}

/** Chebyshev polynomials of the four kinds, kind 't', 'u', 'v', 'w': the three-term
 * recurrence p_{k+1} = 2x p_k - p_{k-1} from p_0 = 1 and p_1 = x, 2x, 2x-1, 2x+1; the
 * trigonometric forms for |x| < 1 and n > 6; the values at ±1 exactly. */
KILN_HOST_DEVICE inline double chebyshev(char kind, double x, int64_t n) {
  using std::abs;
  using std::acos;
  using std::cos;
  using std::sin;
  if (n < 0) return 0;
  double nf = static_cast<double>(n);
  bool even = n % 2 == 0;
  if (abs(x) == 1) {
    switch (kind) {
      case 't': return x > 0 || even ? 1 : -1;
      case 'u': return x > 0 || even ? nf + 1 : -(nf + 1);
      case 'v': return x > 0 ? 1 : (even ? 2 * nf + 1 : -(2 * nf + 1));
      default: return x > 0 ? 2 * nf + 1 : (even ? 1 : -1);
    }
  }
  if (n > 6 && abs(x) < 1) {
    double theta = acos(x);
    switch (kind) {
      case 't': return cos(nf * theta);
      case 'u': return sin((nf + 1) * theta) / sin(theta);
      case 'v': return cos((nf + 0.5) * theta) / cos(theta / 2);
      default: return sin((nf + 0.5) * theta) / sin(theta / 2);
    }
  }
  if (n == 0) return 1;
  double p = 1, q = kind == 't' ? x : kind == 'u' ? 2 * x : kind == 'v' ? 2 * x - 1 : 2 * x + 1;
  for (int64_t k = 1; k < n; ++k) {
    double r = 2 * x * q - p;
    p = q;
    q = r;
  }
  return q;
}

/** Hermite (physicists' H, probabilists' He), Laguerre and Legendre polynomials by their
 * three-term recurrences. */
KILN_HOST_DEVICE inline double orthogonal_polynomial(Special fn, double x, int64_t n) {
  using std::abs;
  if (n < 0) return 0;
  if (fn == Special::legendre_polynomial_p && abs(x) == 1) return x > 0 || n % 2 == 0 ? 1 : -1;
  if (fn == Special::laguerre_polynomial_l && x == 0) return 1;
  if (n == 0) return 1;
  double p = 1, q;
  switch (fn) {
    case Special::hermite_polynomial_h: q = 2 * x; break;
    case Special::laguerre_polynomial_l: q = 1 - x; break;
    default: q = x; break;  // He, P
  }
  for (int64_t k = 1; k < n; ++k) {
    double kf = static_cast<double>(k), r;
    switch (fn) {
      case Special::hermite_polynomial_h: r = 2 * x * q - 2 * kf * p; break;
      case Special::hermite_polynomial_he: r = x * q - kf * p; break;
      case Special::laguerre_polynomial_l: r = ((2 * kf + 1 - x) * q - kf * p) / (kf + 1); break;
      default: r = ((2 * kf + 1) * x * q - kf * p) / (kf + 1); break;  // Legendre
    }
    p = q;
    q = r;
  }
  return q;
}

}  // namespace special_detail

/** special_unary's function `code` of x. */
template <typename W>
KILN_HOST_DEVICE inline W special_unary_of(int code, W x) {
  namespace sd = special_detail;
  auto fn = static_cast<Special>(code);
  double v = x;
  switch (fn) {
    case Special::i0: return sd::bessel_i(0, x, false);
    case Special::i0e: return sd::bessel_i(0, x, true);
    case Special::i1: return sd::bessel_i(1, x, false);
    case Special::i1e: return sd::bessel_i(1, x, true);
    case Special::modified_bessel_k0: return sd::bessel_k(0, x, false);
    case Special::modified_bessel_k1: return sd::bessel_k(1, x, false);
    case Special::scaled_modified_bessel_k0: return sd::bessel_k(0, x, true);
    case Special::scaled_modified_bessel_k1: return sd::bessel_k(1, x, true);
    case Special::erfcx: return W(sd::erfcx(v));
    case Special::log_ndtr: return W(sd::log_ndtr(v));
    case Special::airy_ai: return W(sd::airy_ai(v));
    case Special::spherical_bessel_j0: return W(sd::spherical_bessel_j0(v));
    default: return W(sd::bessel_jy(fn, v));
  }
}

/** special_binary's function `code` of (x, y): zeta(x, q), P(a, x), Q(a, x), or the
 * polynomial of degree y at x. */
template <typename W>
KILN_HOST_DEVICE inline W special_binary_of(int code, W xw, W yw) {
  namespace sd = special_detail;
  auto fn = static_cast<Special>(code);
  double x = xw, y = yw;
  switch (fn) {
    case Special::zeta: return W(hurwitz_zeta(x, y));
    case Special::gammainc: return W(sd::incomplete_gamma(x, y, true));
    case Special::gammaincc: return W(sd::incomplete_gamma(x, y, false));
    case Special::chebyshev_polynomial_t: return W(sd::chebyshev('t', x, sd::degree(y)));
    case Special::chebyshev_polynomial_u: return W(sd::chebyshev('u', x, sd::degree(y)));
    case Special::chebyshev_polynomial_v: return W(sd::chebyshev('v', x, sd::degree(y)));
    case Special::chebyshev_polynomial_w: return W(sd::chebyshev('w', x, sd::degree(y)));
    case Special::shifted_chebyshev_polynomial_t:
      return W(sd::chebyshev('t', 2 * x - 1, sd::degree(y)));
    case Special::shifted_chebyshev_polynomial_u:
      return W(sd::chebyshev('u', 2 * x - 1, sd::degree(y)));
    case Special::shifted_chebyshev_polynomial_v:
      return W(sd::chebyshev('v', 2 * x - 1, sd::degree(y)));
    case Special::shifted_chebyshev_polynomial_w:
      return W(sd::chebyshev('w', 2 * x - 1, sd::degree(y)));
    default: return W(sd::orthogonal_polynomial(fn, x, sd::degree(y)));
  }
}

}  // namespace kiln::backend
