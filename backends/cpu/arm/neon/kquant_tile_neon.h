// The register tile shared by the NEON and dotprod matmuls of llama.cpp's super-block formats q4_K, q5_K, q6_K and
// iq4_xs (core/dtype.h) against BlockQ8Act rows: 4 weight rows (one f32 lane each) x MR activation rows. Per
// super-block and 32-weight group, each row's group is decoded to two vectors of 16 signed bytes in activation order
// (q4_K 0..15, q5_K 0..31, q6_K -32..31, iq4_xs the table's -127..113), a Dot policy gives the exact int32 dot of
// each 16 (NEON: vmull_s8 + vmlal_high_s8, two products of at most 127 * 127 per int16 lane, then vpaddl; dotprod:
// sdot), q6_K multiplies each 16's dot by its int8 scale, and the 4 rows' dots are added pairwise into one vector.
// Each lane then does the reference's arithmetic (backends/cpu/ref/kquant_ref.cpp) in its order:
//   acc = fma(dot, scale_g * da, acc); acc = fma(-min_g, da * sum(a), acc) (q4_K/q5_K)
// so every output equals ref bit for bit, whatever the tile or the batch. Templates live in an anonymous namespace:
// each including file (compiled with its own -march) gets its own copy.
#pragma once

#include <algorithm>

#include "backends/cpu/arm/neon/simd_neon.h"
#include "backends/cpu/kernels.h"

namespace pipit::neon {
namespace {

// q4_K / q5_K: the 8 groups' scale d * sc and min dmin * m, into every 4th float (one lane of the row's tile).
inline void k4_scales(f16_t d16, f16_t dmin16, const uint8_t* scales, float* sc, float* mn) {
  const float d = f16_scalar(d16), dmin = f16_scalar(dmin16);
  for (int g = 0; g < 8; ++g) {
    uint8_t s, m;
    kquant_scale_min(g, scales, &s, &m);
    sc[4 * g] = d * float(s);
    mn[4 * g] = dmin * float(m);
  }
}

struct KQ4K {
  using Block = BlockQ4_K;
  static constexpr bool kMins = true, kScales16 = false;
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1) {
    const uint8x16_t v0 = vld1q_u8(b.qs + 32 * (g / 2)), v1 = vld1q_u8(b.qs + 32 * (g / 2) + 16);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    w0 = vreinterpretq_s8_u8(g % 2 ? vshrq_n_u8(v0, 4) : vandq_u8(v0, m4));
    w1 = vreinterpretq_s8_u8(g % 2 ? vshrq_n_u8(v1, 4) : vandq_u8(v1, m4));
  }
  static void scales(const Block& b, float* sc, float* mn) { k4_scales(b.d, b.dmin, b.scales, sc, mn); }
};

struct KQ5K {
  using Block = BlockQ5_K;
  static constexpr bool kMins = true, kScales16 = false;
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1) {
    const uint8x16_t v0 = vld1q_u8(b.qs + 32 * (g / 2)), v1 = vld1q_u8(b.qs + 32 * (g / 2) + 16);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), b4 = vdupq_n_u8(0x10);
    const int8x16_t sh = vdupq_n_s8(int8_t(4 - g));  // bit g of qh -> bit 4 (a negative count shifts right)
    const uint8x16_t h0 = vandq_u8(vshlq_u8(vld1q_u8(b.qh), sh), b4), h1 = vandq_u8(vshlq_u8(vld1q_u8(b.qh + 16), sh), b4);
    w0 = vreinterpretq_s8_u8(vorrq_u8(g % 2 ? vshrq_n_u8(v0, 4) : vandq_u8(v0, m4), h0));
    w1 = vreinterpretq_s8_u8(vorrq_u8(g % 2 ? vshrq_n_u8(v1, 4) : vandq_u8(v1, m4), h1));
  }
  static void scales(const Block& b, float* sc, float* mn) { k4_scales(b.d, b.dmin, b.scales, sc, mn); }
};

struct KQ6K {
  using Block = BlockQ6_K;
  static constexpr bool kMins = false, kScales16 = true;
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1) {
    // group g = 4h + s: low (s < 2) or high nibbles of ql[64h + 32 (s & 1) ..], bits 2s..2s+1 of qh[32h ..]
    const int h = g / 4, s = g % 4;
    const uint8_t* l = b.ql + 64 * h + 32 * (s & 1);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m2 = vdupq_n_u8(0x30);
    const int8x16_t sh = vdupq_n_s8(int8_t(4 - 2 * s));
    uint8x16_t l0 = vld1q_u8(l), l1 = vld1q_u8(l + 16);
    l0 = s >= 2 ? vshrq_n_u8(l0, 4) : vandq_u8(l0, m4);
    l1 = s >= 2 ? vshrq_n_u8(l1, 4) : vandq_u8(l1, m4);
    const uint8x16_t h0 = vandq_u8(vshlq_u8(vld1q_u8(b.qh + 32 * h), sh), m2);
    const uint8x16_t h1 = vandq_u8(vshlq_u8(vld1q_u8(b.qh + 32 * h + 16), sh), m2);
    w0 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l0, h0)), vdupq_n_s8(32));
    w1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l1, h1)), vdupq_n_s8(32));
  }
  static void scales(const Block& b, float* sc, float*) {
    const float d = f16_scalar(b.d);
    for (int g = 0; g < 8; ++g) sc[4 * g] = d;
  }
};

struct KIQ4XS {
  using Block = BlockIQ4_XS;
  static constexpr bool kMins = false, kScales16 = false;
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1) {
    const int8x16_t table = vld1q_s8(kIq4Values);
    const uint8x16_t v = vld1q_u8(b.qs + 16 * g);
    w0 = vqtbl1q_s8(table, vandq_u8(v, vdupq_n_u8(0x0f)));  // weights 0..15
    w1 = vqtbl1q_s8(table, vshrq_n_u8(v, 4));               // 16..31
  }
  static void scales(const Block& b, float* sc, float*) {
    const float d = f16_scalar(b.d);
    for (int g = 0; g < 8; ++g) sc[4 * g] = d * float(iq4_xs_scale(b, g) - 32);
  }
};

// y[m .. m+MR, n .. n+nr) for nr <= 4 weight rows (missing rows repeat row n; their lanes are not stored).
template <class Dot, class W, int MR>
inline void kquant_tile(const MatmulArgs& a, int64_t m, int64_t n, int nr) {
  using Block = typename W::Block;
  const BlockQ8Act* x[MR];
  float* y[MR];
  const Block* w[4];
  for (int i = 0; i < MR; ++i) {
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
    y[i] = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
  }
  for (int j = 0; j < 4; ++j)
    w[j] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a.w) + (n + (j < nr ? j : 0)) * a.w_stride);
  float32x4_t acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = vdupq_n_f32(0.0f);
  const int64_t nsb = a.K / kQK;
  for (int64_t s = 0; s < nsb; ++s) {
    float sc[8 * 4], mn[8 * 4];  // [group][row]
    for (int j = 0; j < 4; ++j) W::scales(w[j][s], sc + j, mn + j);
    for (int g = 0; g < 8; ++g) {
      int8x16_t w0[4], w1[4];
      for (int j = 0; j < 4; ++j) W::group(w[j][s], g, w0[j], w1[j]);
      const float32x4_t scale = vld1q_f32(sc + 4 * g);
      for (int i = 0; i < MR; ++i) {
        const BlockQ8Act& xb = x[i][8 * s + g];
        const int8x16_t a0 = vld1q_s8(xb.qs), a1 = vld1q_s8(xb.qs + 16);
        int32x4_t d[4];
        for (int j = 0; j < 4; ++j) {
          if constexpr (W::kScales16)  // q6_K: each 16's dot times its int8 scale (exact in int32)
            d[j] = vmlaq_n_s32(vmulq_n_s32(Dot::dot16(w0[j], a0), w[j][s].scales[2 * g]), Dot::dot16(w1[j], a1),
                               w[j][s].scales[2 * g + 1]);
          else
            d[j] = vaddq_s32(Dot::dot16(w0[j], a0), Dot::dot16(w1[j], a1));
        }
        const int32x4_t dots = vpaddq_s32(vpaddq_s32(d[0], d[1]), vpaddq_s32(d[2], d[3]));
        acc[i] = vfmaq_f32(acc[i], vcvtq_f32_s32(dots), vmulq_n_f32(scale, xb.d));
        if constexpr (W::kMins) acc[i] = vfmsq_f32(acc[i], vld1q_f32(mn + 4 * g), vdupq_n_f32(xb.d * float(xb.sum)));
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    if (nr == 4) {
      vst1q_f32(y[i], acc[i]);
    } else {
      float t[4];
      vst1q_f32(t, acc[i]);
      for (int j = 0; j < nr; ++j) y[i][j] = t[j];
    }
  }
}

template <class Dot, class W>
void matmul_kquant(const MatmulArgs& a, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; n += 4) {
    const int nr = int(std::min<int64_t>(4, n1 - n));
    int64_t m = 0;
    for (; m + 4 <= a.M; m += 4) kquant_tile<Dot, W, 4>(a, m, n, nr);
    switch (a.M - m) {
      case 3: kquant_tile<Dot, W, 3>(a, m, n, nr); break;
      case 2: kquant_tile<Dot, W, 2>(a, m, n, nr); break;
      case 1: kquant_tile<Dot, W, 1>(a, m, n, nr); break;
      default: break;
    }
  }
}

}  // namespace
}  // namespace pipit::neon
