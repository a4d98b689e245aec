// AVX-512 activation quantizer: f32 rows -> BlockQ8Act (int8 per block of 32, d = amax / 127, sum of the int8s).
// Bit-identical to ref: the same float division for d and 1/d, one multiply v * (1/d), and cvtps2dq rounding
// with the current mode (round half to even by default), as ref's nearbyint does.
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

namespace pipit::avx512 {

void quantize_act(const float* x, int64_t x_stride, BlockQ8Act* y, int64_t M, int64_t K) {
  const int64_t nb = K / kQBlock;
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(x) + m * x_stride);
    BlockQ8Act* yr = y + m * nb;
    for (int64_t b = 0; b < nb; ++b) {
      const __m512 v0 = _mm512_loadu_ps(xr + b * kQBlock), v1 = _mm512_loadu_ps(xr + b * kQBlock + 16);
      const float amax = hmax(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      const __m512 vid = _mm512_set1_ps(id);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(yr[b].qs), _mm512_cvtepi32_epi8(q0));  // |q| <= 127: no truncation
      _mm_storeu_si128(reinterpret_cast<__m128i*>(yr[b].qs + 16), _mm512_cvtepi32_epi8(q1));
      yr[b].d = d;
      yr[b].sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    }
  }
}

}  // namespace pipit::avx512
