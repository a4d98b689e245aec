// Armv8.6-A BF16 matmul for bf16dot weights (core/dtype.h; `--precision fast`): x comes as bf16 rows (ops rounds it
// once), and BFDOT (vbfdotq_f32) adds 4 lanes of bf16 pair products per instruction, twice the f32 FMA rate.
// Laid out as the AVX-512 kernel (x86/avx512/matmul_bf16dot_avx512.cpp): lanes along k (lane l sums the pairs
// k = 2l, 2l + 1 (mod 8) in k order, then vaddvq per output), decode (M = 1) reads weight rows one after another,
// M > 1 runs 4 x 4 tiles over blocks of x rows that stay in L2. Every output is the same instruction sequence
// whatever M or the tile (tests/kernels/matmul_invariance_test.cpp). BFDOT rounds its intermediate sums its own way
// (round to odd without FEAT_EBF16); against ref only that and the summation order differ
// (tests/kernels/matmul_float_test.cpp). Built in the i8mm folder because Armv8.6-A has both; registered where the
// CPU reports FEAT_BF16 (HWCAP2_BF16).
#include <arm_neon.h>

#include <algorithm>

#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/arm/i8mm/kernels_i8mm.h"

namespace pipit::i8mm {

namespace {

inline bfloat16x8_t load_bh(const uint16_t* p) { return vreinterpretq_bf16_u16(vld1q_u16(p)); }
// the last n < 8 values of a row, zero-padded
inline bfloat16x8_t load_bh_tail(const uint16_t* p, int64_t n) {
  uint16_t t[8] = {};
  std::copy(p, p + n, t);
  return vreinterpretq_bf16_u16(vld1q_u16(t));
}

template <int MR, int NR>
inline void tile(const MatmulArgs& a, int64_t m, int64_t n) {
  const uint16_t* x[MR];
  float* y[MR];
  const uint16_t* w[NR];
  for (int i = 0; i < MR; ++i) {
    x[i] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
    y[i] = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
  }
  for (int j = 0; j < NR; ++j) w[j] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(a.w) + (n + j) * a.w_stride);
  float32x4_t acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vdupq_n_f32(0.0f);
  const int64_t K = a.K, kv = K / 8 * 8;
  if constexpr (MR == 1) {  // decode: weight rows one after another
    for (int j = 0; j < NR; ++j)
      for (int64_t k = 0; k < kv; k += 8) acc[0][j] = vbfdotq_f32(acc[0][j], load_bh(x[0] + k), load_bh(w[j] + k));
  } else {
    for (int64_t k = 0; k < kv; k += 8) {
      bfloat16x8_t xv[MR];
      for (int i = 0; i < MR; ++i) xv[i] = load_bh(x[i] + k);
      for (int j = 0; j < NR; ++j) {
        const bfloat16x8_t wv = load_bh(w[j] + k);
        for (int i = 0; i < MR; ++i) acc[i][j] = vbfdotq_f32(acc[i][j], xv[i], wv);
      }
    }
  }
  if (kv < K) {
    for (int j = 0; j < NR; ++j) {
      const bfloat16x8_t wv = load_bh_tail(w[j] + kv, K - kv);
      for (int i = 0; i < MR; ++i) acc[i][j] = vbfdotq_f32(acc[i][j], load_bh_tail(x[i] + kv, K - kv), wv);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i][j] = vaddvq_f32(acc[i][j]);
}

// The tile as the shared walk (backends/cpu/matmul_tiles.h) takes it.
struct Tiles {
  static constexpr int kMR = 4, kNR = 4, kDecodeNR = 4;
  static constexpr int64_t kXBytes = 2;  // x: bf16 rows
  static constexpr int64_t kKChunk = 0;  // not measured on Arm hardware: rows whole
  template <int MR, int NR>
  static void tile(const MatmulArgs& a, int64_t m, int64_t n) { i8mm::tile<MR, NR>(a, m, n); }
};

}  // namespace

void matmul_bf16dot(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_tiled<Tiles>(a, n0, n1); }

}  // namespace pipit::i8mm
