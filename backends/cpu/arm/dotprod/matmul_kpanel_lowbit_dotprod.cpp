// Armv8.2-A dotprod matmuls for the low-bit K-quant panels q2_kx16 / q3_kx16 (core/dtype.h) against BlockQ8Act rows,
// in the scheme of matmul_kpanel_dotprod.cpp: a 64-byte chunk holds 4 quant bytes of each of 16 rows (4 registers
// of 4 rows), each byte 4 two-bit quants; vector (c, k) (shift by 2k, mask 3) meets activation dword 8k + 4c, so
// sdot by lane adds each row's 4 products into that row's int32 lane, with no horizontal sums. Vectors k < 2 are
// a group's first 16 weights, k >= 2 the second, each half in its own lanes (each has its own scale).
//  - q2_K: q 0..3; isum = sc0 dot0 + sc1 dot1, msum = m0 sum0(a) + m1 sum1(a) in int32;
//  - q3_K: q + 4 hbit (0..7), each half's lanes starting at -4 * (its activations' sum), so they hold
//    sum (q - 4 !hbit) a; then isum = sc0 dot0 + sc1 dot1 with the signed scales.
// Each lane then does the reference's f32 arithmetic in its order (backends/cpu/ref/kquant_ref.cpp): acc = fma(isum,
// d * da, acc) (q2_K: then acc = fma(msum, -(dmin * da), acc)), so every output equals ref bit for bit.
#include <arm_neon.h>

#include <type_traits>

#include "backends/cpu/arm/dotprod/kernels_dotprod.h"
#include "backends/cpu/prefetch.h"

namespace pipit::dotprod {

namespace {

constexpr int kMR = 2;  // activation rows per tile, as the other K-quant panels

inline uint32x4_t u8x4_to_u32(const uint8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(v)))));
}
inline int32x4_t s8x4_to_s32(const int8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(v)))));
}
inline float32x4_t f16x4_to_f32(const f16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

// Vector (C, Kq) of rows 4q..4q+3: the 2-bit quants (q3_K: + 4 hbit, hm bit 4C + Kq).
template <int C, int Kq, bool kHigh>
inline int8x16_t vec(uint8x16_t qc, uint8x16_t hm) {
  uint8x16_t v = vandq_u8(Kq ? vshrq_n_u8(qc, 2 * Kq) : qc, vdupq_n_u8(3));
  if constexpr (kHigh) {
    constexpr int b = 4 * C + Kq;
    uint8x16_t h;
    if constexpr (b < 2) h = vshlq_n_u8(hm, 2 - b);
    else if constexpr (b == 2) h = hm;
    else h = vshrq_n_u8(hm, b - 2);
    v = vorrq_u8(v, vandq_u8(h, vdupq_n_u8(4)));
  }
  return vreinterpretq_s8_u8(v);
}

template <int C, int Kq, int MR, bool kHigh>
inline void step(uint8x16_t qc, uint8x16_t hm, const int8x16_t (*a)[2], int32x4_t* p) {
  const int8x16_t v = vec<C, Kq, kHigh>(qc, hm);
  for (int i = 0; i < MR; ++i) p[i] = vdotq_laneq_s32(p[i], v, a[i][Kq / 2], 2 * (Kq % 2) + C);
}

// Group g's unscaled half dots for rows 4q..4q+3 and MR activation rows, added to plo / phi.
template <int MR, bool kHigh, class Block>
inline void half_dots(const Block& w, int g, int q, const int8x16_t (*a)[2], int32x4_t* plo, int32x4_t* phi) {
  const uint8x16_t q0 = vld1q_u8(w.qs[g][0] + 16 * q), q1 = vld1q_u8(w.qs[g][1] + 16 * q);
  uint8x16_t hm = vdupq_n_u8(0);
  if constexpr (kHigh) hm = vld1q_u8(w.hm[g] + 16 * q);
  step<0, 0, MR, kHigh>(q0, hm, a, plo);
  step<1, 0, MR, kHigh>(q1, hm, a, plo);
  step<0, 1, MR, kHigh>(q0, hm, a, plo);
  step<1, 1, MR, kHigh>(q1, hm, a, plo);
  step<0, 2, MR, kHigh>(q0, hm, a, phi);
  step<1, 2, MR, kHigh>(q1, hm, a, phi);
  step<0, 3, MR, kHigh>(q0, hm, a, phi);
  step<1, 3, MR, kHigh>(q1, hm, a, phi);
}

// y[m .. m+MR, n .. n+16) from the panel starting at `panel` (nsb super-blocks).
template <class Block, int MR>
inline void tile(const MatmulArgs& a, const Block* panel, int64_t nsb, int64_t m, int64_t n) {
  constexpr bool kQ3 = std::is_same_v<Block, BlockQ3_Kx16>;
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  float32x4_t acc[4][MR];
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < MR; ++i) acc[q][i] = vdupq_n_f32(0.0f);
  for (int64_t s = 0; s < nsb; ++s) {
    const Block& w = panel[s];
    for (int g = 0; g < 8; ++g) {
      prefetch_kpanel_share(panel, s, g);
      const BlockQ8Act* xb[MR];
      int8x16_t av[MR][2];
      int32_t lo[MR], hi[MR];
      for (int i = 0; i < MR; ++i) {
        xb[i] = &x[i][8 * s + g];
        av[i][0] = vld1q_s8(xb[i]->qs);
        av[i][1] = vld1q_s8(xb[i]->qs + 16);
        lo[i] = vaddlvq_s8(av[i][0]);
        hi[i] = xb[i]->sum - lo[i];
      }
      for (int q = 0; q < 4; ++q) {  // rows 4q .. 4q+3
        int32x4_t plo[MR], phi[MR];
        for (int i = 0; i < MR; ++i) {  // q3_K: q + 4 hbit - 4 is the signed value, so start at -4 sum(a)
          plo[i] = vdupq_n_s32(kQ3 ? -4 * lo[i] : 0);
          phi[i] = vdupq_n_s32(kQ3 ? -4 * hi[i] : 0);
        }
        half_dots<MR, kQ3>(w, g, q, av, plo, phi);
        const float32x4_t d = f16x4_to_f32(w.d + 4 * q);
        if constexpr (kQ3) {
          const int32x4_t s0 = s8x4_to_s32(w.sc[2 * g] + 4 * q), s1 = s8x4_to_s32(w.sc[2 * g + 1] + 4 * q);
          for (int i = 0; i < MR; ++i) {
            const int32x4_t isum = vmlaq_s32(vmulq_s32(plo[i], s0), phi[i], s1);
            acc[q][i] = vfmaq_f32(acc[q][i], vcvtq_f32_s32(isum), vmulq_n_f32(d, xb[i]->d));
          }
        } else {
          const uint32x4_t b0 = u8x4_to_u32(w.sc[2 * g] + 4 * q), b1 = u8x4_to_u32(w.sc[2 * g + 1] + 4 * q);
          const int32x4_t s0 = vreinterpretq_s32_u32(vandq_u32(b0, vdupq_n_u32(0xF)));
          const int32x4_t s1 = vreinterpretq_s32_u32(vandq_u32(b1, vdupq_n_u32(0xF)));
          const int32x4_t m0 = vreinterpretq_s32_u32(vshrq_n_u32(b0, 4));
          const int32x4_t m1 = vreinterpretq_s32_u32(vshrq_n_u32(b1, 4));
          const float32x4_t dmin = f16x4_to_f32(w.dmin + 4 * q);
          for (int i = 0; i < MR; ++i) {
            const int32x4_t isum = vmlaq_s32(vmulq_s32(plo[i], s0), phi[i], s1);
            const int32x4_t msum = vmlaq_n_s32(vmulq_n_s32(m0, lo[i]), m1, hi[i]);
            acc[q][i] = vfmaq_f32(acc[q][i], vcvtq_f32_s32(isum), vmulq_n_f32(d, xb[i]->d));
            acc[q][i] = vfmsq_f32(acc[q][i], vmulq_n_f32(dmin, xb[i]->d), vcvtq_f32_s32(msum));
          }
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    for (int q = 0; q < 4; ++q) vst1q_f32(y + 4 * q, acc[q][i]);
  }
}

template <class Block>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  const int64_t nsb = a.K / kQK;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nsb;
    int64_t m = 0;
    for (; m + kMR <= a.M; m += kMR) tile<Block, kMR>(a, panel, nsb, m, n);
    if (m < a.M) tile<Block, 1>(a, panel, nsb, m, n);
  }
}

}  // namespace

void matmul_q2_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<BlockQ2_Kx16>(a, n0, n1); }
void matmul_q3_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<BlockQ3_Kx16>(a, n0, n1); }

}  // namespace pipit::dotprod
