// NEON building blocks shared by the Arm kernel folders (neon, dotprod, i8mm): horizontal sums, f16/bf16 loads,
// exp and tanh. Every helper is `static inline` (internal linkage), so no copy compiled with a newer -march can be
// picked by the linker for code running on an older core.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace pipit::neon {

// {hsum(a), hsum(b), hsum(c), hsum(d)}
static inline float32x4_t hsum4(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d) {
  return vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
}

// 4 consecutive f16 / bf16 values as f32 (both exact).
static inline float32x4_t load_f16(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
static inline float32x4_t load_bf16(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
static inline float f16_scalar(uint16_t h) {
  __fp16 f;
  std::memcpy(&f, &h, 2);
  return float(f);
}
static inline float bf16_scalar(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// e^x (Cephes expf scheme: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial, scale by 2^n).
// Relative error <= 2 ulp for x in [-87.3, 88]; x < -87.3 gives 0 (true results there are < 1.2e-38);
// x > 88 saturates at e^88 (1.65e38). NaN is not propagated.
static inline float32x4_t exp_ps(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-87.33654f);
  const uint32x4_t under = vcltq_f32(x, lo);
  x = vmaxq_f32(vminq_f32(x, vdupq_n_f32(88.0f)), lo);
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));  // ln2 split: n * ln2_hi is exact
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t res = vmulq_f32(p, vreinterpretq_f32_s32(e));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(res), under));
}

// tanh(x): an odd polynomial for |x| < 0.625 (Cephes tanhf), else sign(x) (1 - 2 / (e^{2|x|} + 1)).
// Absolute error <= 2e-7, relative error <= 3 ulp.
static inline float32x4_t tanh_ps(float32x4_t x) {
  const float32x4_t ax = vabsq_f32(x);
  const float32x4_t z = vmulq_f32(x, x);
  float32x4_t p = vdupq_n_f32(-5.70498872745e-3f);
  p = vfmaq_f32(vdupq_n_f32(2.06390887954e-2f), p, z);
  p = vfmaq_f32(vdupq_n_f32(-5.37397155531e-2f), p, z);
  p = vfmaq_f32(vdupq_n_f32(1.33314422036e-1f), p, z);
  p = vfmaq_f32(vdupq_n_f32(-3.33332819422e-1f), p, z);
  const float32x4_t small = vfmaq_f32(x, vmulq_f32(p, z), x);
  const float32x4_t e = exp_ps(vaddq_f32(ax, ax));
  const float32x4_t one = vdupq_n_f32(1.0f);
  const float32x4_t big = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
  const float32x4_t sbig = vbslq_f32(vdupq_n_u32(0x80000000u), x, big);  // copy the sign of x
  return vbslq_f32(vcltq_f32(ax, vdupq_n_f32(0.625f)), small, sbig);
}

}  // namespace pipit::neon
