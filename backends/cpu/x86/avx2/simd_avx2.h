// AVX2 + FMA + F16C building blocks shared by this folder's kernels: horizontal sums, f16/bf16 loads, exp, tanh.
// Every helper is `static inline` so no out-of-line copy built with these flags can be picked by the linker for
// code that runs on a CPU without AVX2 (the ODR trap of per-file ISA flags). Include only from this folder.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace pipit::avx2 {

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// {hsum(a), hsum(b), hsum(c), hsum(d)}
static inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b);
  const __m256 cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

static inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// 8 consecutive f16 / bf16 values as f32 (both exact).
static inline __m256 load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
static inline __m256 load_bf16(const uint16_t* p) {
  const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
static inline float f16_scalar(uint16_t h) { return _cvtsh_ss(h); }
static inline float bf16_scalar(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

// Lanes [0, n) all ones, the rest zero (n <= 8): the mask for a tail of n floats.
static inline __m256i tail_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), idx);
}

// e^x (Cephes expf scheme: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial, scale by 2^n).
// Relative error <= 2 ulp for x in [-87.3, 88]; x < -87.3 gives 0 (true results there are < 1.2e-38);
// x > 88 saturates at e^88 (1.65e38). NaN is not propagated.
static inline __m256 exp_ps(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.0f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2, with ln2 split in two so n * ln2_hi is exact
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

// tanh(x): an odd polynomial for |x| < 0.625 (Cephes tanhf), else sign(x) (1 - 2 / (e^{2|x|} + 1)).
// Absolute error <= 2e-7, relative error <= 3 ulp.
static inline __m256 tanh_ps(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  const __m256 e = exp_ps(_mm256_add_ps(ax, ax));
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  big = _mm256_or_ps(big, _mm256_and_ps(sign, x));
  return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

}  // namespace pipit::avx2
