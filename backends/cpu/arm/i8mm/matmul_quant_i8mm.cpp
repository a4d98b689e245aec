// Armv8.6-A i8mm integer matmuls for q8_0 and q4_0 weights against BlockQ8Act rows, for M >= 2 (prefill).
// smmla multiplies a 2x8 int8 block of two activation rows by an 8x2 block of two weight rows into 4 int32s:
// interleaving 8-byte halves of two rows (zip1/zip2 on 64-bit lanes) lets four smmla produce the exact dot
// products of a whole 32-block for 2 activation rows x 2 weight rows, already laid out as [x0w0, x0w1, x1w0, x1w1].
// Scaled by d_a * d_w into f32. The core loop is a tile of 4 activation rows x 4 weight rows (2 x 2 smmla groups);
// rows past the end of M or [n0, n1) repeat the last row and are not stored. M = 1 (decode) uses dotprod's sdot
// kernel, which does not waste half of every smmla.
#include "backends/cpu/arm/dotprod/kernels_dotprod.h"
#include "backends/cpu/arm/i8mm/kernels_i8mm.h"
#include "backends/cpu/arm/neon/quant_tile_neon.h"

namespace pipit::i8mm {

namespace {

constexpr int kMP = 2;  // activation row pairs per tile
constexpr int kNP = 2;  // weight row pairs per tile

// [a[0:8], b[0:8]] and [a[8:16], b[8:16]]
inline int8x16_t zip_lo(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int8x16_t zip_hi(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

template <class WB, int MP, int NP>
inline void tile(const MatmulArgs& a, int64_t m, int64_t n, int64_t m_end, int64_t n_end) {
  using Block = typename WB::Block;
  const BlockQ8Act* x[2 * MP];
  const Block* w[2 * NP];
  for (int i = 0; i < 2 * MP; ++i) {
    const int64_t r = m + i < m_end ? m + i : m_end - 1;
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + r * a.x_stride);
  }
  for (int j = 0; j < 2 * NP; ++j) {
    const int64_t r = n + j < n_end ? n + j : n_end - 1;
    w[j] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a.w) + r * a.w_stride);
  }

  float32x4_t acc[MP][NP];
  for (int p = 0; p < MP; ++p)
    for (int q = 0; q < NP; ++q) acc[p][q] = vdupq_n_f32(0.0f);
  const int64_t nb = a.K / kQBlock;
  for (int64_t b = 0; b < nb; ++b) {
    int8x16_t ax[MP][4];
    float32x4_t da[MP];  // [d_x0, d_x0, d_x1, d_x1]
    for (int p = 0; p < MP; ++p) {
      const BlockQ8Act& x0 = x[2 * p][b];
      const BlockQ8Act& x1 = x[2 * p + 1][b];
      const int8x16_t x0a = vld1q_s8(x0.qs), x0b = vld1q_s8(x0.qs + 16);
      const int8x16_t x1a = vld1q_s8(x1.qs), x1b = vld1q_s8(x1.qs + 16);
      ax[p][0] = zip_lo(x0a, x1a);
      ax[p][1] = zip_hi(x0a, x1a);
      ax[p][2] = zip_lo(x0b, x1b);
      ax[p][3] = zip_hi(x0b, x1b);
      da[p] = vcombine_f32(vdup_n_f32(x0.d), vdup_n_f32(x1.d));
    }
    for (int q = 0; q < NP; ++q) {
      int8x16_t w0a, w0b, w1a, w1b;
      WB::load(w[2 * q][b], w0a, w0b);
      WB::load(w[2 * q + 1][b], w1a, w1b);
      const int8x16_t wx[4] = {zip_lo(w0a, w1a), zip_hi(w0a, w1a), zip_lo(w0b, w1b), zip_hi(w0b, w1b)};
      const float32x2_t d01 = {neon::f16_scalar(w[2 * q][b].d), neon::f16_scalar(w[2 * q + 1][b].d)};
      const float32x4_t dw = vcombine_f32(d01, d01);  // [d_w0, d_w1, d_w0, d_w1]
      for (int p = 0; p < MP; ++p) {
        int32x4_t s = vmmlaq_s32(vdupq_n_s32(0), ax[p][0], wx[0]);
        s = vmmlaq_s32(s, ax[p][1], wx[1]);
        s = vmmlaq_s32(s, ax[p][2], wx[2]);
        s = vmmlaq_s32(s, ax[p][3], wx[3]);  // exact [x0.w0, x0.w1, x1.w0, x1.w1]
        acc[p][q] = vfmaq_f32(acc[p][q], vcvtq_f32_s32(s), vmulq_f32(da[p], dw));
      }
    }
  }
  for (int p = 0; p < MP; ++p)
    for (int q = 0; q < NP; ++q) {
      float out[4];
      vst1q_f32(out, acc[p][q]);
      for (int r = 0; r < 2; ++r) {
        const int64_t i = m + 2 * p + r;
        if (i >= m_end) continue;
        float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + i * a.y_stride);
        for (int c = 0; c < 2; ++c)
          if (n + 2 * q + c < n_end) y[n + 2 * q + c] = out[2 * r + c];
      }
    }
}

template <class WB>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; n += 2 * kNP)
    for (int64_t m = 0; m < a.M; m += 2 * kMP) tile<WB, kMP, kNP>(a, m, n, a.M, n1);
}

}  // namespace

void matmul_q8_0(const MatmulArgs& a, int64_t n0, int64_t n1) {
  if (a.M == 1) return dotprod::matmul_q8_0(a, n0, n1);
  matmul<neon::WQ8>(a, n0, n1);
}
void matmul_q4_0(const MatmulArgs& a, int64_t n0, int64_t n1) {
  if (a.M == 1) return dotprod::matmul_q4_0(a, n0, n1);
  matmul<neon::WQ4>(a, n0, n1);
}

}  // namespace pipit::i8mm
