// NEON row conversions: f16 / bf16 <-> f32 and q8_0 / q4_0 -> f32 (embedding rows, KV-cache stores).
// Bit-identical to ref for every non-NaN input: fcvt rounds to nearest even like ref's f32_to_f16, bf16 uses ref's
// integer rounding, and dequantization is the same single multiply d * q. NaN stays NaN.
#include "backends/cpu/arm/neon/kernels_neon.h"
#include "backends/cpu/arm/neon/simd_neon.h"

namespace pipit::neon {

namespace {

inline uint16_t f16_round(float f) {
  const __fp16 h = __fp16(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

// ref's f32 -> bf16: round to nearest even on the raw bits; NaN becomes a quiet NaN.
inline uint16_t bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

inline uint16x4_t bf16_round4(float32x4_t v) {
  const uint32x4_t u = vreinterpretq_u32_f32(v);
  const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
  const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
  const uint32x4_t r = vshrq_n_u32(vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fff), lsb)), 16);
  const uint32x4_t q = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40));
  return vmovn_u32(vbslq_u32(nan, q, r));
}

}  // namespace

void f16_to_f32_row(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, load_f16(s + i));
  for (; i < n; ++i) dst[i] = f16_scalar(s[i]);
}

void bf16_to_f32_row(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, load_bf16(s + i));
  for (; i < n; ++i) dst[i] = bf16_scalar(s[i]);
}

void f16_from_f32_row(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(d + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
  for (; i < n; ++i) d[i] = f16_round(src[i]);
}

void bf16_from_f32_row(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(d + i, bf16_round4(vld1q_f32(src + i)));
  for (; i < n; ++i) d[i] = bf16_round(src[i]);
}

namespace {

// 16 int8 values times d -> 16 floats
inline void store_scaled(float* o, int8x16_t q, float d) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
  vst1q_f32(o, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
  vst1q_f32(o + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d));
  vst1q_f32(o + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
  vst1q_f32(o + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d));
}

}  // namespace

void q8_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float d = f16_scalar(x[b].d);
    store_scaled(dst + b * kQBlock, vld1q_s8(x[b].qs), d);
    store_scaled(dst + b * kQBlock + 16, vld1q_s8(x[b].qs + 16), d);
  }
}

void q4_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float d = f16_scalar(x[b].d);
    const uint8x16_t v = vld1q_u8(x[b].qs);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), vdupq_n_s8(8));  // 0..15
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));               // 16..31
    store_scaled(dst + b * kQBlock, lo, d);
    store_scaled(dst + b * kQBlock + 16, hi, d);
  }
}

}  // namespace pipit::neon
