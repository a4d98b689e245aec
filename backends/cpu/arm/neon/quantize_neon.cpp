// NEON activation quantizer: f32 rows -> BlockQ8Act (int8 per block of 32, d = amax / 127, sum of the int8s).
// Bit-identical to ref: the same float division for d and 1/d, one multiply v * (1/d), and fcvtns, which rounds
// to nearest with ties to even like ref's nearbyint in the default rounding mode.
#include "backends/cpu/arm/neon/kernels_neon.h"
#include "backends/cpu/arm/neon/simd_neon.h"

namespace pipit::neon {

void quantize_act(const float* x, int64_t x_stride, BlockQ8Act* y, int64_t M, int64_t K) {
  const int64_t nb = K / kQBlock;
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(x) + m * x_stride);
    BlockQ8Act* yr = y + m * nb;
    for (int64_t b = 0; b < nb; ++b) {
      const float* p = xr + b * kQBlock;
      float32x4_t v[8];
      float32x4_t mx = vdupq_n_f32(0.0f);
      for (int i = 0; i < 8; ++i) {
        v[i] = vld1q_f32(p + 4 * i);
        mx = vmaxq_f32(mx, vabsq_f32(v[i]));
      }
      const float amax = vmaxvq_f32(mx);
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      int32x4_t q[8];
      int32x4_t sum = vdupq_n_s32(0);
      for (int i = 0; i < 8; ++i) {
        q[i] = vcvtnq_s32_f32(vmulq_n_f32(v[i], id));
        sum = vaddq_s32(sum, q[i]);
      }
      for (int h = 0; h < 2; ++h) {  // |q| <= 127: narrowing is exact
        const int16x8_t lo = vcombine_s16(vmovn_s32(q[4 * h]), vmovn_s32(q[4 * h + 1]));
        const int16x8_t hi = vcombine_s16(vmovn_s32(q[4 * h + 2]), vmovn_s32(q[4 * h + 3]));
        vst1q_s8(yr[b].qs + 16 * h, vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)));
      }
      yr[b].d = d;
      yr[b].sum = vaddvq_s32(sum);
    }
  }
}

}  // namespace pipit::neon
