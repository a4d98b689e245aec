// AVX2 activation quantizer: f32 rows -> BlockQ8Act (int8 per block of 32, scale d = amax / 127, and the sum of
// the int8 values). Bit-identical to ref: the same float division for d and 1/d, one multiply v * (1/d), and
// cvtps2dq rounds with the current mode (round half to even by default), as ref's nearbyint does.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

namespace pipit::avx2 {

void quantize_act(const float* x, int64_t x_stride, BlockQ8Act* y, int64_t M, int64_t K) {
  const int64_t nb = K / kQBlock;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the per-lane interleave of packs
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(x) + m * x_stride);
    BlockQ8Act* yr = y + m * nb;
    for (int64_t b = 0; b < nb; ++b) {
      const float* v = xr + b * kQBlock;
      __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
      __m256 v2 = _mm256_loadu_ps(v + 16), v3 = _mm256_loadu_ps(v + 24);
      __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float amax = _mm_cvtss_f32(m4);
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      const __m256 vid = _mm256_set1_ps(id);
      const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
      const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
      const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
      const __m256i q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
      const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3));
      const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(yr[b].qs), _mm256_permutevar8x32_epi32(p, order));
      yr[b].d = d;
      yr[b].sum = hsum_i32(s);
    }
  }
}

}  // namespace pipit::avx2
