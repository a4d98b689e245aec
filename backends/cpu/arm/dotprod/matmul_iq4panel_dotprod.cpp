// Armv8.2-A dotprod matmul for the iq4_xs panels iq4_xsx16 (core/dtype.h) against BlockQ8Act rows: the q4_kx16
// scheme of matmul_kpanel_dotprod.cpp with a table lookup. A 64-byte chunk holds 4 nibble bytes of each of 16 rows
// (4 registers of 4 rows); tbl turns each nibble into its grid value (kIq4Values, a valid int8 as sdot takes it),
// and sdot by lane adds each row's 4 products into that row's int32 lane: the exact group dot. Each lane then does
// the reference's f32 arithmetic (backends/cpu/ref/kquant_ref.cpp): acc = fma(isum, (d * (ls - 32)) * da, acc), so
// every output equals ref bit for bit.
#include <arm_neon.h>

#include "backends/cpu/arm/dotprod/kernels_dotprod.h"
#include "backends/cpu/prefetch.h"

namespace pipit::dotprod {

namespace {

constexpr int kMR = 2;  // activation rows per tile, as the other K-quant panels

inline int32x4_t s8x4_to_s32(const int8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(v)))));
}

template <int MR, int C>
inline void chunk(const BlockIQ4_XSx16& w, int g, int q, int8x16_t grid, const int8x16_t (*a)[2], int32x4_t* isum) {
  const uint8x16_t v = vld1q_u8(w.qs[g][C] + 16 * q);
  const int8x16_t lo = vqtbl1q_s8(grid, vandq_u8(v, vdupq_n_u8(0x0f)));
  const int8x16_t hi = vqtbl1q_s8(grid, vshrq_n_u8(v, 4));
  for (int i = 0; i < MR; ++i) {
    isum[i] = vdotq_laneq_s32(isum[i], lo, a[i][0], C);
    isum[i] = vdotq_laneq_s32(isum[i], hi, a[i][1], C);
  }
}

// y[m .. m+MR, n .. n+16) from the panel starting at `panel` (nsb super-blocks).
template <int MR>
inline void tile(const MatmulArgs& a, const BlockIQ4_XSx16* panel, int64_t nsb, int64_t m, int64_t n) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  const int8x16_t grid = vld1q_s8(kIq4Values);
  float32x4_t acc[4][MR];
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < MR; ++i) acc[q][i] = vdupq_n_f32(0.0f);
  for (int64_t s = 0; s < nsb; ++s) {
    const auto& w = panel[s];
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
        for (int i = 0; i < MR; ++i) isum[i] = vdupq_n_s32(0);
        chunk<MR, 0>(w, g, q, grid, av, isum);
        chunk<MR, 1>(w, g, q, grid, av, isum);
        chunk<MR, 2>(w, g, q, grid, av, isum);
        chunk<MR, 3>(w, g, q, grid, av, isum);
        const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w.d + 4 * q)));
        const float32x4_t sc = vmulq_f32(d, vcvtq_f32_s32(s8x4_to_s32(w.sc[g] + 4 * q)));
        for (int i = 0; i < MR; ++i)
          acc[q][i] = vfmaq_f32(acc[q][i], vcvtq_f32_s32(isum[i]), vmulq_n_f32(sc, xb[i]->d));
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    for (int q = 0; q < 4; ++q) vst1q_f32(y + 4 * q, acc[q][i]);
  }
}

}  // namespace

void matmul_iq4_xsx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  const int64_t nsb = a.K / kQK;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16
    const BlockIQ4_XSx16* panel = static_cast<const BlockIQ4_XSx16*>(a.w) + (n / kPanelRows) * nsb;
    int64_t m = 0;
    for (; m + kMR <= a.M; m += kMR) tile<kMR>(a, panel, nsb, m, n);
    if (m < a.M) tile<1>(a, panel, nsb, m, n);
  }
}

}  // namespace pipit::dotprod
