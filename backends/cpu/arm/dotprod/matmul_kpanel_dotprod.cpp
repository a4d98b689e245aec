// Armv8.2-A dotprod matmuls for the K-quant panels q4_kx16 / q5_kx16 / q6_kx16 (core/dtype.h) against BlockQ8Act
// rows: the q4_0x16 scheme of matmul_panel_dotprod.cpp with per-group scales. A 64-byte chunk holds 4 quant bytes of
// each of 16 rows (4 registers of 4 rows); sdot by lane adds each row's 4 bytes times one activation dword into that
// row's int32 lane, so the 16 rows' exact group dots build up with no horizontal sums. Quants are valid int8s as
// sdot takes them: q4_K / q5_K values 0..31 as they are, q6_K's q - 32; q6_K's two 16-weight halves go to separate
// lanes and are multiplied by their int8 scales in int32 (dot_q6_k_group exactly). Each lane then does the
// reference's f32 arithmetic in its order (backends/cpu/ref/kquant_ref.cpp): acc = fma(dot, (d * sc) * da, acc),
// acc = fma(-(dmin * m), da * sum(a), acc) for q4_K / q5_K, acc = fma(dot, d * da, acc) for q6_K; so every output
// equals ref bit for bit, whatever the tile or M.
#include <arm_neon.h>

#include <type_traits>

#include "backends/cpu/prefetch.h"
#include "backends/cpu/arm/dotprod/kernels_dotprod.h"

namespace pipit::dotprod {

namespace {

constexpr int kMR = 2;  // activation rows per tile: 2 x (4 int + 4 f32 accumulators) (+ 4 more int for q6_K)

// 4 bytes (rows 4q..4q+3) of a per-row byte array -> f32 lanes (unsigned / signed bytes).
inline float32x4_t u8x4_to_f32(const uint8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(v))))));
}
inline int32x4_t s8x4_to_s32(const int8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(v)))));
}

// Per panel type, group g's exact integer dots of rows 4q..4q+3 with MR activation rows: a[i][0] = activation bytes
// 0-15 (lanes: chunks 0-3 of the low nibbles' weights), a[i][1] = bytes 16-31.
struct PQ4K {
  using Block = BlockQ4_Kx16;
  static constexpr bool kMins = true;
  template <int MR, int C>
  static inline void chunk(const Block& w, int g, int q, const int8x16_t (*a)[2], int32x4_t* isum) {
    const uint8x16_t v = vld1q_u8(w.qs[g][C] + 16 * q);
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f)));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    for (int i = 0; i < MR; ++i) {
      isum[i] = vdotq_laneq_s32(isum[i], lo, a[i][0], C);
      isum[i] = vdotq_laneq_s32(isum[i], hi, a[i][1], C);
    }
  }
  template <int MR>
  static inline void dots(const Block& w, int g, int q, const int8x16_t (*a)[2], int32x4_t* isum) {
    for (int i = 0; i < MR; ++i) isum[i] = vdupq_n_s32(0);
    chunk<MR, 0>(w, g, q, a, isum);
    chunk<MR, 1>(w, g, q, a, isum);
    chunk<MR, 2>(w, g, q, a, isum);
    chunk<MR, 3>(w, g, q, a, isum);
  }
};

struct PQ5K {
  using Block = BlockQ5_Kx16;
  static constexpr bool kMins = true;
  template <int MR, int C>
  static inline void chunk(const Block& w, uint8x16_t qh, int g, int q, const int8x16_t (*a)[2], int32x4_t* isum) {
    const uint8x16_t v = vld1q_u8(w.qs[g][C] + 16 * q), b4 = vdupq_n_u8(0x10);
    // fifth bits: bit C (low nibbles' weights) and bit 4 + C (high) -> bit 4
    const uint8x16_t hlo = vandq_u8(vshlq_n_u8(qh, 4 - C), b4);
    uint8x16_t hhi;
    if constexpr (C == 0) hhi = vandq_u8(qh, b4);
    else hhi = vandq_u8(vshrq_n_u8(qh, C), b4);
    const int8x16_t lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0f)), hlo));
    const int8x16_t hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), hhi));
    for (int i = 0; i < MR; ++i) {
      isum[i] = vdotq_laneq_s32(isum[i], lo, a[i][0], C);
      isum[i] = vdotq_laneq_s32(isum[i], hi, a[i][1], C);
    }
  }
  template <int MR>
  static inline void dots(const Block& w, int g, int q, const int8x16_t (*a)[2], int32x4_t* isum) {
    const uint8x16_t qh = vld1q_u8(w.qh[g] + 16 * q);
    for (int i = 0; i < MR; ++i) isum[i] = vdupq_n_s32(0);
    chunk<MR, 0>(w, qh, g, q, a, isum);
    chunk<MR, 1>(w, qh, g, q, a, isum);
    chunk<MR, 2>(w, qh, g, q, a, isum);
    chunk<MR, 3>(w, qh, g, q, a, isum);
  }
};

struct PQ6K {
  using Block = BlockQ6_Kx16;
  static constexpr bool kMins = false;
  template <int MR, int C>
  static inline void chunk(const Block& w, int g, int q, const int8x16_t (*a)[2], int32x4_t* plo, int32x4_t* phi) {
    const uint8x16_t v = vld1q_u8(w.ql[g][C] + 16 * q), qh = vld1q_u8(w.qh[g][C / 2] + 16 * q);
    const uint8x16_t m2 = vdupq_n_u8(0x30);
    constexpr int j = C % 2;  // top bits 2j..2j+1 (low nibbles' weights), 4+2j..5+2j (high) -> bits 4..5
    const uint8x16_t tlo = vandq_u8(vshlq_n_u8(qh, 4 - 2 * j), m2);
    const uint8x16_t thi = vandq_u8(j ? vshrq_n_u8(qh, 2) : qh, m2);
    const int8x16_t k32 = vdupq_n_s8(32);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0f)), tlo)), k32);
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), thi)), k32);
    for (int i = 0; i < MR; ++i) {
      plo[i] = vdotq_laneq_s32(plo[i], lo, a[i][0], C);
      phi[i] = vdotq_laneq_s32(phi[i], hi, a[i][1], C);
    }
  }
  template <int MR>
  static inline void dots(const Block& w, int g, int q, const int8x16_t (*a)[2], int32x4_t* isum) {
    int32x4_t plo[MR], phi[MR];
    for (int i = 0; i < MR; ++i) plo[i] = phi[i] = vdupq_n_s32(0);
    chunk<MR, 0>(w, g, q, a, plo, phi);
    chunk<MR, 1>(w, g, q, a, plo, phi);
    chunk<MR, 2>(w, g, q, a, plo, phi);
    chunk<MR, 3>(w, g, q, a, plo, phi);
    const int32x4_t s0 = s8x4_to_s32(w.sc[2 * g] + 4 * q), s1 = s8x4_to_s32(w.sc[2 * g + 1] + 4 * q);
    for (int i = 0; i < MR; ++i) isum[i] = vmlaq_s32(vmulq_s32(plo[i], s0), phi[i], s1);
  }
};

// y[m .. m+MR, n .. n+16) from the panel starting at `panel` (nsb super-blocks).
template <class P, int MR>
inline void tile(const MatmulArgs& a, const typename P::Block* panel, int64_t nsb, int64_t m, int64_t n) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  float32x4_t acc[4][MR];
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < MR; ++i) acc[q][i] = vdupq_n_f32(0.0f);
  for (int64_t s = 0; s < nsb; ++s) {
    const auto& w = panel[s];
    float32x4_t d[4], dmin[4];
    for (int q = 0; q < 4; ++q) {
      d[q] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w.d + 4 * q)));
      if constexpr (P::kMins) dmin[q] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w.dmin + 4 * q)));
    }
    for (int g = 0; g < 8; ++g) {
      prefetch_kpanel_share(panel, s, g);
      const BlockQ8Act* xb[MR];
      int8x16_t av[MR][2];
      for (int i = 0; i < MR; ++i) {
        xb[i] = &x[i][8 * s + g];
        av[i][0] = vld1q_s8(xb[i]->qs);
        av[i][1] = vld1q_s8(xb[i]->qs + 16);
      }
      for (int q = 0; q < 4; ++q) {  // rows 4q .. 4q+3
        int32x4_t isum[MR];
        P::template dots<MR>(w, g, q, av, isum);
        if constexpr (P::kMins) {
          const float32x4_t sc = vmulq_f32(d[q], u8x4_to_f32(w.sc[g] + 4 * q));
          const float32x4_t mn = vmulq_f32(dmin[q], u8x4_to_f32(w.m[g] + 4 * q));
          for (int i = 0; i < MR; ++i) {
            acc[q][i] = vfmaq_f32(acc[q][i], vcvtq_f32_s32(isum[i]), vmulq_n_f32(sc, xb[i]->d));
            acc[q][i] = vfmsq_f32(acc[q][i], mn, vdupq_n_f32(xb[i]->d * float(xb[i]->sum)));
          }
        } else {
          for (int i = 0; i < MR; ++i)
            acc[q][i] = vfmaq_f32(acc[q][i], vcvtq_f32_s32(isum[i]), vmulq_n_f32(d[q], xb[i]->d));
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    for (int q = 0; q < 4; ++q) vst1q_f32(y + 4 * q, acc[q][i]);
  }
}

template <class P>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  using Block = typename P::Block;
  const int64_t nsb = a.K / kQK;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nsb;
    int64_t m = 0;
    for (; m + kMR <= a.M; m += kMR) tile<P, kMR>(a, panel, nsb, m, n);
    if (m < a.M) tile<P, 1>(a, panel, nsb, m, n);
  }
}

}  // namespace

void matmul_q4_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4K>(a, n0, n1); }
void matmul_q5_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ5K>(a, n0, n1); }
void matmul_q6_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ6K>(a, n0, n1); }

}  // namespace pipit::dotprod
