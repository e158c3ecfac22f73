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
[[KILN_TARGET_AVX512]] void half_to_float_avx512(const Half* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(d + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  convert_scalar(s, d, i, n);
}
[[KILN_TARGET_AVX2]] void half_to_float_avx2(const Half* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  convert_scalar(s, d, i, n);
}
[[KILN_TARGET_AVX512]] void float_to_half_avx512(const float* s, Half* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  convert_scalar(s, d, i, n);
}
[[KILN_TARGET_AVX2]] void float_to_half_avx2(const float* s, Half* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  convert_scalar(s, d, i, n);
}

// bfloat16: the top half of a float; rounding to nearest even by adding 0x7fff plus the
// kept part's lowest bit, NaN to the quiet 0x7fc0 (as BFloat16(float)).
[[KILN_TARGET_AVX512]] void bf16_to_float_avx512(const BFloat16* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    _mm512_storeu_ps(d + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
  convert_scalar(s, d, i, n);
}
[[KILN_TARGET_AVX512]] void float_to_bf16_avx512(const float* s, BFloat16* d, int64_t n) {
  const __m512i round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1),
                abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000),
                qnan = _mm512_set1_epi32(0x7fc0);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i u = _mm512_castps_si512(_mm512_loadu_ps(s + i));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, round), lsb), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
    r = _mm512_mask_mov_epi32(r, nan, qnan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtepi32_epi16(r));
  }
  convert_scalar(s, d, i, n);
}
[[KILN_TARGET_AVX2]] void bf16_to_float_avx2(const BFloat16* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  convert_scalar(s, d, i, n);
}
[[KILN_TARGET_AVX2]] void float_to_bf16_avx2(const float* s, BFloat16* d, int64_t n) {
  const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1),
                abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000),
                qnan = _mm256_set1_epi32(0x7fc0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i u = _mm256_castps_si256(_mm256_loadu_ps(s + i));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, round), lsb), 16);
    // |u| > inf as signed compares: both sides are below 2^31
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
    r = _mm256_blendv_epi8(r, qnan, nan);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), packed);
  }
  convert_scalar(s, d, i, n);
}
#endif

}  // namespace

namespace {

// The conversion at the running level: AVX-512 and AVX2 intrinsics, else the scalar
// conversion (the types' own, through _Float16 or integer code).
template <typename S, typename D>
void convert_at_level([[maybe_unused]] void (*avx512)(const S*, D*, int64_t),
                      [[maybe_unused]] void (*avx2)(const S*, D*, int64_t), const S* src, D* dst,
                      int64_t n) {
#if KILN_X86
  switch (cpu_isa()) {
    case Isa::avx512: return avx512(src, dst, n);
    case Isa::avx2: return avx2(src, dst, n);
    case Isa::base: break;
  }
#endif
  convert_scalar(src, dst, 0, n);
}

#if KILN_X86
#define KILN_CONVERT_VARIANTS(name) &name##_avx512, &name##_avx2
#else
#define KILN_CONVERT_VARIANTS(name) nullptr, nullptr
#endif

}  // namespace

void convert_dense(const Half* src, float* dst, int64_t n) {
  convert_at_level(KILN_CONVERT_VARIANTS(half_to_float), src, dst, n);
}
void convert_dense(const float* src, Half* dst, int64_t n) {
  convert_at_level(KILN_CONVERT_VARIANTS(float_to_half), src, dst, n);
}
void convert_dense(const BFloat16* src, float* dst, int64_t n) {
  convert_at_level(KILN_CONVERT_VARIANTS(bf16_to_float), src, dst, n);
}
void convert_dense(const float* src, BFloat16* dst, int64_t n) {
  convert_at_level(KILN_CONVERT_VARIANTS(float_to_bf16), src, dst, n);
}

}  // namespace kiln::cpu
