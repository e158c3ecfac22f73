#include "kiln/backend/cpu/convert.h"

#include "kiln/backend/cpu/isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 conversion intrinsics start from an "undefined" register it then
// reports as maybe uninitialized.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define KILN_X86 1
#endif

namespace kiln::cpu {

namespace {

template <typename D, typename S>
void convert_scalar(const S* src, D* dst, int64_t i, int64_t n) {
  for (; i < n; ++i) dst[i] = D(static_cast<float>(src[i]));
}

#if KILN_X86
[[gnu::target("arch=x86-64-v4")]] void half_to_float_avx512(const Half* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  convert_scalar(s, d, i, n);
}
[[gnu::target("arch=x86-64-v3")]] void half_to_float_avx2(const Half* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  convert_scalar(s, d, i, n);
}
[[gnu::target("arch=x86-64-v4")]] void float_to_half_avx512(const float* s, Half* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  convert_scalar(s, d, i, n);
}
[[gnu::target("arch=x86-64-v3")]] void float_to_half_avx2(const float* s, Half* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  convert_scalar(s, d, i, n);
}
#endif

}  // namespace

void convert_dense(const Half* src, float* dst, int64_t n) {
#if KILN_X86
  switch (cpu_isa()) {
    case Isa::avx512: return half_to_float_avx512(src, dst, n);
    case Isa::avx2: return half_to_float_avx2(src, dst, n);
    case Isa::base: break;
  }
#endif
  convert_scalar(src, dst, 0, n);
}

void convert_dense(const float* src, Half* dst, int64_t n) {
#if KILN_X86
  switch (cpu_isa()) {
    case Isa::avx512: return float_to_half_avx512(src, dst, n);
    case Isa::avx2: return float_to_half_avx2(src, dst, n);
    case Isa::base: break;
  }
#endif
  convert_scalar(src, dst, 0, n);
}

// bfloat16 is integer shifts and a rounding add, which the compiler vectorizes itself.
void convert_dense(const BFloat16* src, float* dst, int64_t n) {
  with_best_isa([&] { convert_scalar(src, dst, 0, n); });
}

void convert_dense(const float* src, BFloat16* dst, int64_t n) {
  with_best_isa([&] { convert_scalar(src, dst, 0, n); });
}

}  // namespace kiln::cpu
