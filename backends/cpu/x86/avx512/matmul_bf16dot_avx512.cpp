// AVX512-BF16 matmul for bf16dot weights (core/dtype.h; `--precision fast`): x comes as bf16 rows (ops rounds it
// once), and vdpbf16ps multiplies 32 bf16 pairs into 16 f32 lanes per instruction, twice the f32 FMA rate. Laid out
// as matmul_float_avx512.cpp: lanes run along k (each lane sums its pairs k = 2l, 2l + 1 (mod 32) in k order, then
// one reduction tree per output), decode (M = 1) reads 8 weight rows one after another, M > 1 runs 4 x 4 tiles over
// blocks of x rows that stay in L2. Every output is the same instruction sequence whatever M or the tile, so a row
// of a batch equals the row alone (tests/kernels/matmul_invariance_test.cpp). Against f32 the error is x's and the
// weights' rounding to bf16 (relative 2^-9 each); against ref (tests/kernels/matmul_float_test.cpp) only the
// summation order differs.
#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

namespace pipit::avx512 {

namespace {

inline __m512bh load_bh(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_bh(const uint16_t* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

template <int MR, int NR>
inline void tile(const MatmulArgs& a, int64_t m, int64_t n, const KSpan& ks) {
  const uint16_t* x[MR];
  float* y[MR];
  const uint16_t* w[NR];
  for (int i = 0; i < MR; ++i) {
    x[i] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
    y[i] = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
  }
  for (int j = 0; j < NR; ++j) w[j] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(a.w) + (n + j) * a.w_stride);
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = ks.k0 ? _mm512_load_ps(ks.state + (i * NR + j) * 16) : _mm512_setzero_ps();
  const int64_t K = a.K, kv = std::min(ks.k1, K / 32 * 32);
  if constexpr (MR == 1) {  // decode: weight rows one after another (one stream for the hardware prefetcher)
    for (int j = 0; j < NR; ++j)
      for (int64_t k = ks.k0; k < kv; k += 32) acc[0][j] = _mm512_dpbf16_ps(acc[0][j], load_bh(x[0] + k), load_bh(w[j] + k));
  } else {
#pragma GCC unroll 2
    for (int64_t k = ks.k0; k < kv; k += 32) {
      __m512bh xv[MR];
      for (int i = 0; i < MR; ++i) xv[i] = load_bh(x[i] + k);
      for (int j = 0; j < NR; ++j) {
        const __m512bh wv = load_bh(w[j] + k);
        for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv[i], wv);
      }
    }
  }
  if (ks.k1 < K) {  // more chunks to come: the accumulators wait in state
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) _mm512_store_ps(ks.state + (i * NR + j) * 16, acc[i][j]);
    return;
  }
  if (kv < K) {  // tail: masked pairs load as 0
    const __mmask32 mk = K - kv >= 32 ? ~__mmask32(0) : __mmask32((1u << (K - kv)) - 1);
    for (int j = 0; j < NR; ++j) {
      const __m512bh wv = load_bh(w[j] + kv, mk);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], load_bh(x[i] + kv, mk), wv);
    }
  }
  for (int i = 0; i < MR; ++i) {
    if constexpr (NR % 4 == 0) {
      for (int j = 0; j < NR; j += 4) _mm_storeu_ps(y[i] + j, hsum4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
    } else {
      for (int j = 0; j < NR; ++j) y[i][j] = hsum(acc[i][j]);
    }
  }
}

// The tile as the shared walk (backends/cpu/matmul_tiles.h) takes it.
struct Tiles {
  static constexpr int kMR = 3, kNR = 8, kDecodeNR = 8;
  static constexpr int64_t kXBytes = 2;  // x: bf16 rows
  // chunks of 1024: 8 weight rows of 2 KiB (+ 3 x rows) stay in L1. kernels_bench gemm bf16dot K=3072 N=1024
  // M=512: 207-213 -> 256-259 GFLOP/s; K=1024 (one chunk) 305.
  static constexpr int64_t kKChunk = 1024;
  template <int MR, int NR>
  static void tile(const MatmulArgs& a, int64_t m, int64_t n) { avx512::tile<MR, NR>(a, m, n, KSpan{0, a.K, nullptr}); }
  template <int MR, int NR>
  static void tile(const MatmulArgs& a, int64_t m, int64_t n, const KSpan& ks) { avx512::tile<MR, NR>(a, m, n, ks); }
};

}  // namespace

void matmul_bf16dot(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_tiled<Tiles>(a, n0, n1); }

}  // namespace pipit::avx512
