// The register tile shared by the NEON and dotprod quantized matmuls (q8_0 / q4_0 / mxfp4 weights x BlockQ8Act): MR
// activation rows x NR weight rows, one block of 32 per step. A Dot policy computes a block's exact integer dot
// product as 4 int32 lanes (NEON: vmull_s8 + vpadal; dotprod: sdot), which are added into the block's dot and
// scaled by d_w * d_a into f32 accumulators (see quant_tile). Templates live in an anonymous namespace: each
// including file (compiled with its own -march) gets its own copy.
#pragma once

#include <cmath>

#include "backends/cpu/arm/neon/simd_neon.h"
#include "backends/cpu/kernels.h"

namespace pipit::neon {
namespace {

// A weight block as two vectors of 16 signed weights in activation order (0..15, 16..31).
struct WQ8 {
  using Block = BlockQ8_0;
  static void load(const Block& b, int8x16_t& w0, int8x16_t& w1) {
    w0 = vld1q_s8(b.qs);
    w1 = vld1q_s8(b.qs + 16);
  }
  static float scale(const Block& b) { return f16_scalar(b.d); }
};
struct WQ4 {
  using Block = BlockQ4_0;
  static void load(const Block& b, int8x16_t& w0, int8x16_t& w1) {  // low nibbles: 0..15, high: 16..31; q - 8
    const uint8x16_t v = vld1q_u8(b.qs);
    w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
  }
  static float scale(const Block& b) { return f16_scalar(b.d); }
};
// mxfp4: the nibbles (low: 0..15, high: 16..31) through the doubled E2M1 table (one tbl each); |w| <= 12.
struct WMX {
  using Block = BlockMXFP4;
  static void load(const Block& b, int8x16_t& w0, int8x16_t& w1) {
    const uint8x16_t v = vld1q_u8(b.qs);
    const int8x16_t lut = vld1q_s8(kMxfp4Int8);
    w0 = vqtbl1q_s8(lut, vandq_u8(v, vdupq_n_u8(0x0f)));
    w1 = vqtbl1q_s8(lut, vshrq_n_u8(v, 4));
  }
  static float scale(const Block& b) { return e8m0_half_to_f32(b.e); }
};

template <class Dot, class WB, int MR, int NR>
inline void quant_tile(const MatmulArgs& a, int64_t m, int64_t n) {
  using Block = typename WB::Block;
  const BlockQ8Act* x[MR];
  float* y[MR];
  const Block* w[NR];
  for (int i = 0; i < MR; ++i) {
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
    y[i] = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
  }
  for (int j = 0; j < NR; ++j) w[j] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a.w) + (n + j) * a.w_stride);

  // Per block, acc += float(exact block dot) * (d_w * d_a): the arithmetic of the i8mm and panel kernels, so a row
  // gets the same bits from every kernel of a level and for every M (batch invariance). NR % 4 == 0: the 4 lanes of
  // 4 outputs' partial dots are added pairwise into one vector of 4 block dots; NR == 1: one horizontal add.
  static_assert(NR == 1 || NR % 4 == 0);
  constexpr int NV = NR == 1 ? 1 : NR / 4;
  float32x4_t acc[MR][NV];
  float acc1[MR];
  for (int i = 0; i < MR; ++i) {
    acc1[i] = 0.0f;
    for (int v = 0; v < NV; ++v) acc[i][v] = vdupq_n_f32(0.0f);
  }
  const int64_t nb = a.K / kQBlock;
  for (int64_t b = 0; b < nb; ++b) {
    int8x16_t a0[MR], a1[MR];
    float da[MR];
    for (int i = 0; i < MR; ++i) {
      a0[i] = vld1q_s8(x[i][b].qs);
      a1[i] = vld1q_s8(x[i][b].qs + 16);
      da[i] = x[i][b].d;
    }
    if constexpr (NR == 1) {
      int8x16_t w0, w1;
      WB::load(w[0][b], w0, w1);
      const float dw = WB::scale(w[0][b]);
      for (int i = 0; i < MR; ++i)
        acc1[i] = std::fma(float(vaddvq_s32(Dot::dot(w0, w1, a0[i], a1[i]))), dw * da[i], acc1[i]);
    } else {
      for (int v = 0; v < NV; ++v) {
        int8x16_t w0[4], w1[4];
        float dws[4];
        for (int t = 0; t < 4; ++t) {
          WB::load(w[4 * v + t][b], w0[t], w1[t]);
          dws[t] = WB::scale(w[4 * v + t][b]);
        }
        const float32x4_t dw = vld1q_f32(dws);
        for (int i = 0; i < MR; ++i) {
          int32x4_t s[4];
          for (int t = 0; t < 4; ++t) s[t] = Dot::dot(w0[t], w1[t], a0[i], a1[i]);  // 4 lanes adding up to the dot
          const int32x4_t dots = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
          acc[i][v] = vfmaq_f32(acc[i][v], vcvtq_f32_s32(dots), vmulq_n_f32(dw, da[i]));
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    if constexpr (NR == 1) {
      y[i][0] = acc1[i];
    } else {
      for (int v = 0; v < NV; ++v) vst1q_f32(y[i] + 4 * v, acc[i][v]);
    }
  }
}

template <class Dot, class WB, int NR>
inline void quant_column(const MatmulArgs& a, int64_t n) {
  int64_t m = 0;
  for (; m + 4 <= a.M; m += 4) quant_tile<Dot, WB, 4, NR>(a, m, n);
  switch (a.M - m) {
    case 3: quant_tile<Dot, WB, 3, NR>(a, m, n); break;
    case 2: quant_tile<Dot, WB, 2, NR>(a, m, n); break;
    case 1: quant_tile<Dot, WB, 1, NR>(a, m, n); break;
    default: break;
  }
}

// Decode (M = 1): 8 weight rows per tile; otherwise 4 x 4 tiles.
template <class Dot, class WB>
void matmul_quant(const MatmulArgs& a, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (a.M == 1) {
    for (; n + 8 <= n1; n += 8) quant_tile<Dot, WB, 1, 8>(a, 0, n);
    for (; n + 4 <= n1; n += 4) quant_tile<Dot, WB, 1, 4>(a, 0, n);
    for (; n < n1; ++n) quant_tile<Dot, WB, 1, 1>(a, 0, n);
    return;
  }
  for (; n + 4 <= n1; n += 4) quant_column<Dot, WB, 4>(a, n);
  for (; n < n1; ++n) quant_column<Dot, WB, 1>(a, n);
}

}  // namespace
}  // namespace pipit::neon
