// AVX-512 row conversions: f16 / bf16 <-> f32 and q8_0 / q4_0 -> f32, 16 lanes at a time with a masked tail.
// Bit-identical to ref for every non-NaN input (F16C-style rounding to nearest even; bf16 with ref's integer
// rounding, not vcvtneps2bf16, which flushes subnormal inputs). NaN stays NaN.
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

namespace pipit::avx512 {

namespace {

inline __m256i bf16_round16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

}  // namespace

void f16_to_f32_row(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; i += 16) _mm512_mask_storeu_ps(dst + i, mask16(n - i), load_f16(s + i, mask16(n - i)));
}

void bf16_to_f32_row(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; i += 16) _mm512_mask_storeu_ps(dst + i, mask16(n - i), load_bf16(s + i, mask16(n - i)));
}

void f16_from_f32_row(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mk = mask16(n - i);
    _mm256_mask_storeu_epi16(d + i, mk, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(mk, src + i), _MM_FROUND_TO_NEAREST_INT));
  }
}

void bf16_from_f32_row(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mk = mask16(n - i);
    _mm256_mask_storeu_epi16(d + i, mk, bf16_round16(_mm512_maskz_loadu_ps(mk, src + i)));
  }
}

void q8_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const __m512 d = _mm512_set1_ps(f16_scalar(x[b].d));
    const __m512i q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs)));
    const __m512i q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs + 16)));
    _mm512_storeu_ps(dst + b * kQBlock, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q0)));
    _mm512_storeu_ps(dst + b * kQBlock + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q1)));
  }
}

void q4_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(src);
  const __m128i m4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const __m512 d = _mm512_set1_ps(f16_scalar(x[b].d));
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(v, m4), eight);                     // weights 0..15
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), eight);  // weights 16..31
    _mm512_storeu_ps(dst + b * kQBlock, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo))));
    _mm512_storeu_ps(dst + b * kQBlock + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi))));
  }
}

}  // namespace pipit::avx512
