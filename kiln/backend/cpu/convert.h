#pragma once
// Internal to the CPU backend: dense conversions between float and the half types,
// with the CPU's conversion instructions where it has them (F16C, AVX-512; Note
// [Portable kernels]). Round-to-nearest-even, as Half(float) and BFloat16(float).

#include <cstdint>

#include "kiln/core/dtype.h"

namespace kiln::cpu {

void convert_dense(const Half* src, float* dst, int64_t n);
void convert_dense(const float* src, Half* dst, int64_t n);
void convert_dense(const BFloat16* src, float* dst, int64_t n);
void convert_dense(const float* src, BFloat16* dst, int64_t n);

/** Elements per block of the half-type loops: converted to float on the stack, computed,
 * converted back (L1-resident). */
inline constexpr int64_t kHalfBlock = 512;

}  // namespace kiln::cpu
