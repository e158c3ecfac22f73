#pragma once
// The functions of the table ops special_unary and special_binary, by their torch.special
// names (the kernels are in kiln/backend/special_functions.h).

#include <string_view>

namespace kiln::ops {

// X(name) for each function of special_unary / special_binary, by its torch.special name.
// clang-format off
#define KILN_SPECIAL_UNARY(X)                                                                 \
  X(i0) X(i0e) X(i1) X(i1e) X(erfcx) X(log_ndtr) X(bessel_j0) X(bessel_j1) X(bessel_y0)       \
  X(bessel_y1) X(modified_bessel_k0) X(modified_bessel_k1) X(scaled_modified_bessel_k0)       \
  X(scaled_modified_bessel_k1) X(airy_ai) X(spherical_bessel_j0)
#define KILN_SPECIAL_BINARY(X)                                                                \
  X(zeta) X(gammainc) X(gammaincc) X(chebyshev_polynomial_t) X(chebyshev_polynomial_u)        \
  X(chebyshev_polynomial_v) X(chebyshev_polynomial_w) X(shifted_chebyshev_polynomial_t)       \
  X(shifted_chebyshev_polynomial_u) X(shifted_chebyshev_polynomial_v)                         \
  X(shifted_chebyshev_polynomial_w) X(hermite_polynomial_h) X(hermite_polynomial_he)          \
  X(laguerre_polynomial_l) X(legendre_polynomial_p)
// clang-format on

enum class Special : int {
#define KILN_SPECIAL_ENUM(name) name,
  KILN_SPECIAL_UNARY(KILN_SPECIAL_ENUM) KILN_SPECIAL_BINARY(KILN_SPECIAL_ENUM)
#undef KILN_SPECIAL_ENUM
};

/** The function named `name` among the unary (binary) ones, or -1. */
inline int special_code(std::string_view name, bool binary) {
#define KILN_SPECIAL_MATCH(fn) \
  if (name == #fn) return static_cast<int>(Special::fn);
  if (binary) {
    KILN_SPECIAL_BINARY(KILN_SPECIAL_MATCH)
  } else {
    KILN_SPECIAL_UNARY(KILN_SPECIAL_MATCH)
  }
#undef KILN_SPECIAL_MATCH
  return -1;
}

}  // namespace kiln::ops
