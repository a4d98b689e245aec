// Armv8.6-A BF16 matmul for bf16dot weights (core/dtype.h; `--precision fast`): x comes as bf16 rows (ops rounds it
// once), and BFMMLA (vbfmmlaq_f32) multiplies a 2x4 bf16 block of two x rows by a 4x2 block of two weight rows into the
// 2x2 f32 outputs [x0w0, x0w1, x1w0, x1w1]: 16 multiply-adds per instruction, twice BFDOT's 8: the instruction Arm's
// own bf16 GEMM (KleidiAI's matmul_clamp_f32_bf16p8x4_bf16p12x4b_8x12_neon_mmla) is built on. The operand blocks are
// 64-bit halves of two rows interleaved (zip1/zip2 on 64-bit lanes), as the i8mm integer kernel (matmul_quant_i8mm.cpp)
// does for SMMLA, so the weights stay plain bf16 rows.
//
// Each output is one chain of bfmmla steps over k in order, 4 k a step (the Arm ARM's pseudocode adds the pairs (k,
// k+1), (k+2, k+3) to the running sum as BFDOT does), whatever the tile: an output element of bfmmla depends only on
// its own x row, weight row and running sum, so a tile of 4 x 8 outputs, a decode tile (the one x row paired with
// itself, half of every bfmmla unused: decode is bandwidth-bound) and a tail tile (an odd count's last row paired with
// itself, the copy's outputs not stored) give the same bits (tests/kernels/matmul_invariance_test.cpp). The
// intermediate sums round their own way (round to odd without FEAT_EBF16); against ref only that and the summation
// order differ (tests/kernels/matmul_float_test.cpp).
// Speed unmeasured: no Arm hardware here (qemu checks the results only). Built in the i8mm folder because Armv8.6-A
// has both; registered where the CPU reports FEAT_BF16 (HWCAP2_BF16), which includes BFMMLA.
#include <arm_neon.h>

#include <algorithm>

#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/arm/i8mm/kernels_i8mm.h"

namespace pipit::i8mm {

namespace {

inline uint16x8_t load_row(const uint16_t* p) { return vld1q_u16(p); }
// the last n < 8 values of a row, zero-padded (a zero pair adds +0 to the sum)
inline uint16x8_t load_row_tail(const uint16_t* p, int64_t n) {
  uint16_t t[8] = {};
  std::copy(p, p + n, t);
  return vld1q_u16(t);
}
// [a[0:4], b[0:4]] and [a[4:8], b[4:8]]: the 2x4 blocks of rows a, b that bfmmla takes
inline bfloat16x8_t pair_lo(uint16x8_t a, uint16x8_t b) {
  return vreinterpretq_bf16_u64(vzip1q_u64(vreinterpretq_u64_u16(a), vreinterpretq_u64_u16(b)));
}
inline bfloat16x8_t pair_hi(uint16x8_t a, uint16x8_t b) {
  return vreinterpretq_bf16_u64(vzip2q_u64(vreinterpretq_u64_u16(a), vreinterpretq_u64_u16(b)));
}

// y[m .. m + MR) x [n .. n + NR): MP = ceil(MR / 2) pairs of x rows times NP = ceil(NR / 2) pairs of weight rows.
template <int MR, int NR>
inline void tile(const MatmulArgs& a, int64_t m, int64_t n) {
  constexpr int MP = (MR + 1) / 2, NP = (NR + 1) / 2;
  const uint16_t* x[MR];
  const uint16_t* w[NR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  for (int j = 0; j < NR; ++j)
    w[j] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(a.w) + (n + j) * a.w_stride);
  float32x4_t acc[MP][NP];
  for (int p = 0; p < MP; ++p)
    for (int q = 0; q < NP; ++q) acc[p][q] = vdupq_n_f32(0.0f);
  // One step of 8 k: rows come from ld(row pointer) (a full load, or the zero-padded tail). An odd row count's last
  // row is paired with itself.
  auto step = [&](auto&& ld) {
    bfloat16x8_t xl[MP], xh[MP];
    for (int p = 0; p < MP; ++p) {
      const uint16x8_t x0 = ld(x[2 * p]), x1 = 2 * p + 1 < MR ? ld(x[2 * p + 1]) : x0;
      xl[p] = pair_lo(x0, x1);
      xh[p] = pair_hi(x0, x1);
    }
    for (int q = 0; q < NP; ++q) {
      const uint16x8_t w0 = ld(w[2 * q]), w1 = 2 * q + 1 < NR ? ld(w[2 * q + 1]) : w0;
      const bfloat16x8_t wl = pair_lo(w0, w1), wh = pair_hi(w0, w1);
      for (int p = 0; p < MP; ++p) {
        acc[p][q] = vbfmmlaq_f32(acc[p][q], xl[p], wl);
        acc[p][q] = vbfmmlaq_f32(acc[p][q], xh[p], wh);
      }
    }
  };
  const int64_t K = a.K, kv = K / 8 * 8;
  for (int64_t k = 0; k < kv; k += 8) step([k](const uint16_t* r) { return load_row(r + k); });
  if (kv < K) step([kv, K](const uint16_t* r) { return load_row_tail(r + kv, K - kv); });
  for (int p = 0; p < MP; ++p)
    for (int q = 0; q < NP; ++q) {
      float out[4];  // [x0w0, x0w1, x1w0, x1w1]
      vst1q_f32(out, acc[p][q]);
      for (int r = 0; r < 2; ++r) {
        if (2 * p + r >= MR) continue;
        float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + 2 * p + r) * a.y_stride) + n;
        for (int c = 0; c < 2; ++c)
          if (2 * q + c < NR) y[2 * q + c] = out[2 * r + c];
      }
    }
}

// The tile as the shared walk (backends/cpu/matmul_tiles.h) takes it. 4 x 8: 8 accumulators (the latency of 5-6
// cycles of a dependent bfmmla hidden), 12 loads and 12 zips per 16 bfmmla. Decode: 16 weight rows, 8 accumulators.
struct Tiles {
  static constexpr int kMR = 4, kNR = 8, kDecodeNR = 16;
  static constexpr int64_t kXBytes = 2;  // x: bf16 rows
  static constexpr int64_t kKChunk = 0;  // not measured on Arm hardware: rows whole
  template <int MR, int NR>
  static void tile(const MatmulArgs& a, int64_t m, int64_t n) { i8mm::tile<MR, NR>(a, m, n); }
};

}  // namespace

void matmul_bf16dot(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_tiled<Tiles>(a, n0, n1); }

}  // namespace pipit::i8mm
