// AVX-512 matmuls with float weights (f32, f16, bf16) and f32 activations: y[m, n] = sum_k x[m, k] * w[n, k].
// Decode (M = 1) takes 8 weight rows against one x row, reading them one after another; M > 1 runs tiles of 4
// x-rows by 4 weight rows (16 zmm accumulators), so every loaded and converted weight vector feeds four FMAs; the
// walk over tiles is backends/cpu/matmul_tiles.h. The K % 16 tail is one masked step.
// bf16 converts by shifting (exact): vdpbf16ps would round x to bf16 (relative error 2^-9), far outside the 1e-5
// tolerance against ref. Results differ from ref only by summation order.
#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

namespace pipit::avx512 {

namespace {

struct WF32 {
  static constexpr int64_t kBytes = 4;
  static __m512 load(const uint8_t* w, int64_t k) { return _mm512_loadu_ps(reinterpret_cast<const float*>(w) + k); }
  static __m512 load(const uint8_t* w, int64_t k, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(w) + k);
  }
};
struct WF16 {
  static constexpr int64_t kBytes = 2;
  static __m512 load(const uint8_t* w, int64_t k) { return load_f16(reinterpret_cast<const uint16_t*>(w) + k); }
  static __m512 load(const uint8_t* w, int64_t k, __mmask16 m) { return load_f16(reinterpret_cast<const uint16_t*>(w) + k, m); }
};
struct WBF16 {
  static constexpr int64_t kBytes = 2;
  static __m512 load(const uint8_t* w, int64_t k) { return load_bf16(reinterpret_cast<const uint16_t*>(w) + k); }
  static __m512 load(const uint8_t* w, int64_t k, __mmask16 m) { return load_bf16(reinterpret_cast<const uint16_t*>(w) + k, m); }
};

template <class W, int MR, int NR>
inline void tile(const MatmulArgs& a, int64_t m, int64_t n, const KSpan& ks) {
  const float* x[MR];
  float* y[MR];
  const uint8_t* w[NR];
  for (int i = 0; i < MR; ++i) {
    x[i] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
    y[i] = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
  }
  for (int j = 0; j < NR; ++j) w[j] = static_cast<const uint8_t*>(a.w) + (n + j) * a.w_stride;

  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = ks.k0 ? _mm512_load_ps(ks.state + (i * NR + j) * 16) : _mm512_setzero_ps();
  const int64_t K = a.K;
  int64_t k = ks.k0;
  if constexpr (MR == 1) {
    // One x row (decode): read the weight rows one after another, not side by side. The hardware prefetcher
    // follows one stream at full bandwidth but not several (measured here: 20 GB/s for one row at a time,
    // 8-10 GB/s for 2 to 8 rows read in step). Each accumulator sees the same FMAs in the same order either way.
    const int64_t kv = std::min(ks.k1, K / 16 * 16);
    for (int j = 0; j < NR; ++j)
      for (int64_t kk = ks.k0; kk < kv; kk += 16) acc[0][j] = _mm512_fmadd_ps(_mm512_loadu_ps(x[0] + kk), W::load(w[j], kk), acc[0][j]);
    k = kv;
  }
#pragma GCC unroll 2
  for (; k + 16 <= ks.k1; k += 16) {
    __m512 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_loadu_ps(x[i] + k);
    for (int j = 0; j < NR; ++j) {
      const __m512 wv = W::load(w[j], k);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  if (ks.k1 < K) {  // more chunks to come: the accumulators wait in state
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) _mm512_store_ps(ks.state + (i * NR + j) * 16, acc[i][j]);
    return;
  }
  if (k < K) {  // tail: masked lanes load as 0
    const __mmask16 mk = mask16(K - k);
    __m512 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_maskz_loadu_ps(mk, x[i] + k);
    for (int j = 0; j < NR; ++j) {
      const __m512 wv = W::load(w[j], k, mk);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
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

// Weight rows [n, n + NR) against x rows [m0, m1).
// The tiles as the shared walk (backends/cpu/matmul_tiles.h) takes them: decode 8 weight rows per tile, M > 1
// 4 x 4 tiles over blocks of x rows that stay in L2.
template <class W>
struct Tiles {
  static constexpr int kMR = 3, kNR = 8, kDecodeNR = 8;
  static constexpr int64_t kXBytes = 4;
  // 16-bit weights: chunks of 1024 (the chunk's 8 weight rows: 16 KiB of L1); kernels_bench gemm f16 K=3072
  // N=1024 M=512: 146-153 -> 157-163 GFLOP/s. f32 weights: none (chunks of 512 made K=1024 1.4x slower, K=3072
  // no faster).
  static constexpr int64_t kKChunk = W::kBytes == 2 ? 1024 : 0;
  template <int MR, int NR>
  static void tile(const MatmulArgs& a, int64_t m, int64_t n) { avx512::tile<W, MR, NR>(a, m, n, KSpan{0, a.K, nullptr}); }
  template <int MR, int NR>
  static void tile(const MatmulArgs& a, int64_t m, int64_t n, const KSpan& ks) { avx512::tile<W, MR, NR>(a, m, n, ks); }
};

}  // namespace

void matmul_f32(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_tiled<Tiles<WF32>>(a, n0, n1); }
void matmul_f16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_tiled<Tiles<WF16>>(a, n0, n1); }
void matmul_bf16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_tiled<Tiles<WBF16>>(a, n0, n1); }

}  // namespace pipit::avx512
