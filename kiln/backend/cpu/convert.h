#pragma once
// Internal to the CPU backend: dense conversions between float and the half types,
// with the CPU's conversion instructions where it has them (F16C, AVX-512; Note
// [Portable kernels]). Round-to-nearest-even, as Half(float) and BFloat16(float).

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kiln/backend/cpu/isa.h"  // its target attributes declare the F16C builtins
#include "kiln/core/dtype.h"

namespace kiln::cpu {

void convert_dense(const Half* src, float* dst, int64_t n);
void convert_dense(const float* src, Half* dst, int64_t n);
void convert_dense(const BFloat16* src, float* dst, int64_t n);
void convert_dense(const float* src, BFloat16* dst, int64_t n);

/** Elements per block of the half-type loops: converted to float on the stack, computed,
 * converted back (L1-resident). */
inline constexpr int64_t kHalfBlock = 512;

// Note [Half conversions inside kernels]: a half-type loop that converts each block with
// convert_dense (a call per block, then a pass over the stack buffer) ran an f16 add at
// 2.3x the f32 add on Zen 3: three passes, none overlapping the others. Inside a kernel
// lambda, converting in the loop itself overlaps loads, conversions and arithmetic:
// - bf16's conversions are shifts and adds that the compiler vectorizes at every level;
// - f16's need F16C, which GCC expands in the lambda because with_best_isa flattens it
//   into a function compiled for AVX2 or above (the builtins below), when optimizing.
//   Clang checks a builtin against the function that spells it, and -O0 does not
//   flatten, so there f16 keeps convert_dense.

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#define KILN_F16C_IN_KERNELS 1
#else
#define KILN_F16C_IN_KERNELS 0
#endif

/** Whether H converts inside a kernel compiled for a level of `Bytes`-wide vectors. */
template <typename H, int Bytes>
inline constexpr bool kConvertsInKernel = std::is_same_v<H, BFloat16> ||
                                          (std::is_same_v<H, Half> && KILN_F16C_IN_KERNELS &&
                                           Bytes >= 32);

/** Elements per block of a loop that converts inside the kernel. */
inline constexpr int64_t kHalfTile = 128;

#if KILN_F16C_IN_KERNELS
#pragma GCC diagnostic push
// 32-byte vectors in a function that is not AVX: these are always inlined into one that is
#pragma GCC diagnostic ignored "-Wpsabi"

namespace detail {
using Bits8 = short __attribute__((vector_size(16)));
using Float8 = float __attribute__((vector_size(32)));
}  // namespace detail
#endif

/** n elements of s as floats into d; only where kConvertsInKernel holds. */
template <typename H>
[[gnu::always_inline]] inline void widen_in_kernel(const H* s, float* d, int64_t n) {
  int64_t i = 0;
#if KILN_F16C_IN_KERNELS
  if constexpr (std::is_same_v<H, Half>) {
    for (; i + 8 <= n; i += 8) {
      detail::Bits8 h;
      std::memcpy(&h, s + i, sizeof h);
      detail::Float8 f = __builtin_ia32_vcvtph2ps256(h);
      std::memcpy(d + i, &f, sizeof f);
    }
  }
#endif
  for (; i < n; ++i) d[i] = static_cast<float>(s[i]);
}

/** n floats of s rounded to H (nearest even) into d; only where kConvertsInKernel holds. */
template <typename H>
[[gnu::always_inline]] inline void narrow_in_kernel(const float* s, H* d, int64_t n) {
  int64_t i = 0;
#if KILN_F16C_IN_KERNELS
  if constexpr (std::is_same_v<H, Half>) {
    for (; i + 8 <= n; i += 8) {
      detail::Float8 f;
      std::memcpy(&f, s + i, sizeof f);
      detail::Bits8 h = __builtin_ia32_vcvtps2ph256(f, 0);  // 0: round to nearest even
      // keeps the store apart: Zen 3 runs vcvtps2ph with a memory operand at a third of
      // the speed of the register form and a store
      asm("" : "+x"(h));
      std::memcpy(static_cast<void*>(d + i), &h, sizeof h);
    }
  }
#endif
  if constexpr (std::is_same_v<H, BFloat16>) {
    // BFloat16(float) without its early return, so that the loop vectorizes
    for (; i < n; ++i) {
      uint32_t u = std::bit_cast<uint32_t>(s[i]);
      auto rounded = static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
      d[i].bits = (u & 0x7fffffff) > 0x7f800000 ? uint16_t{0x7fc0} : rounded;
    }
  }
  for (; i < n; ++i) d[i] = H(s[i]);
}

#if KILN_F16C_IN_KERNELS
#pragma GCC diagnostic pop
#endif

}  // namespace kiln::cpu
