// AVX2 + F16C row conversions: f16 / bf16 <-> f32 and q8_0 / q4_0 -> f32 (embedding rows, KV-cache stores).
// All are bit-identical to ref for every non-NaN input: F16C rounds to nearest even like ref's f32_to_f16, bf16
// uses ref's integer rounding, and dequantization is the same single multiply d * q. NaN stays NaN.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

namespace pipit::avx2 {

namespace {

// ref's f32 -> bf16: round to nearest even on the raw bits; NaN becomes a quiet NaN.
inline uint16_t bf16_round(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

inline __m128i bf16_round8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i h = _mm256_blendv_epi8(r, q, nan);  // 8 x u32 holding 16-bit values
  const __m256i p = _mm256_packus_epi32(h, h);     // per 128-bit lane: h0..3 h0..3 | h4..7 h4..7
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

}  // namespace

void f16_to_f32_row(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16(s + i));
  for (; i < n; ++i) dst[i] = f16_scalar(s[i]);
}

void bf16_to_f32_row(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf16(s + i));
  for (; i < n; ++i) dst[i] = bf16_scalar(s[i]);
}

void f16_from_f32_row(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) d[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

void bf16_from_f32_row(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), bf16_round8(_mm256_loadu_ps(src + i)));
  for (; i < n; ++i) d[i] = bf16_round(src[i]);
}

void q8_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const __m256 d = _mm256_set1_ps(f16_scalar(x[b].d));
    for (int i = 0; i < kQBlock; i += 8) {
      const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x[b].qs + i)));
      _mm256_storeu_ps(dst + b * kQBlock + i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
    }
  }
}

void q4_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(src);
  const __m128i m4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const __m256 d = _mm256_set1_ps(f16_scalar(x[b].d));
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(v, m4), eight);                     // weights 0..15
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), eight);  // weights 16..31
    float* o = dst + b * kQBlock;
    _mm256_storeu_ps(o, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(o + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(o + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(o + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
  }
}

}  // namespace pipit::avx2
