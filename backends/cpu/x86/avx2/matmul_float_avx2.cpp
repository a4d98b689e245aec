// AVX2 matmuls with float weights (f32, f16, bf16) and f32 activations: y[m, n] = sum_k x[m, k] * w[n, k].
// Decode (M = 1) takes 8 weight rows against one x row, read one after another (one stream for the prefetcher); M > 1 runs tiles of
// 2 x-rows by 4 weight rows, so every loaded and converted weight vector feeds two FMAs. f16 / bf16 convert
// exactly to f32 (F16C, shift), so results differ from ref only by summation order (8 lanes, then a tree).
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

namespace pipit::avx2 {

namespace {

constexpr int kMR = 2;  // x rows per tile when M > 1
constexpr int kNR = 4;  // weight rows per tile when M > 1

struct WF32 {
  static __m256 load(const uint8_t* w, int64_t k) { return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + k); }
  static float at(const uint8_t* w, int64_t k) { return reinterpret_cast<const float*>(w)[k]; }
};
struct WF16 {
  static __m256 load(const uint8_t* w, int64_t k) { return load_f16(reinterpret_cast<const uint16_t*>(w) + k); }
  static float at(const uint8_t* w, int64_t k) { return f16_scalar(reinterpret_cast<const uint16_t*>(w)[k]); }
};
struct WBF16 {
  static __m256 load(const uint8_t* w, int64_t k) { return load_bf16(reinterpret_cast<const uint16_t*>(w) + k); }
  static float at(const uint8_t* w, int64_t k) { return bf16_scalar(reinterpret_cast<const uint16_t*>(w)[k]); }
};

// y[m .. m+MR, n .. n+NR]: MR * NR vector accumulators over K, reduced at the end; the K % 8 tail is scalar.
template <class W, int MR, int NR>
inline void tile(const MatmulArgs& a, int64_t m, int64_t n) {
  const float* x[MR];
  float* y[MR];
  const uint8_t* w[NR];
  for (int i = 0; i < MR; ++i) {
    x[i] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
    y[i] = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
  }
  for (int j = 0; j < NR; ++j) w[j] = static_cast<const uint8_t*>(a.w) + (n + j) * a.w_stride;

  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const int64_t K = a.K;
  int64_t k = 0;
  if constexpr (MR == 1) {
    // One x row (decode): read the weight rows one after another, not side by side. The hardware prefetcher
    // follows one stream at full bandwidth but not several; each accumulator sees the same FMAs either way.
    const int64_t kv = K / 8 * 8;
    for (int j = 0; j < NR; ++j)
      for (int64_t kk = 0; kk < kv; kk += 8) acc[0][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x[0] + kk), W::load(w[j], kk), acc[0][j]);
    k = kv;
  }
  for (; k + 8 <= K; k += 8) {
    __m256 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_ps(x[i] + k);
    for (int j = 0; j < NR; ++j) {
      const __m256 wv = W::load(w[j], k);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  float tail[MR][NR] = {};
  for (; k < K; ++k)
    for (int j = 0; j < NR; ++j) {
      const float wk = W::at(w[j], k);
      for (int i = 0; i < MR; ++i) tail[i][j] += x[i][k] * wk;
    }
  for (int i = 0; i < MR; ++i) {
    if constexpr (NR % 4 == 0) {
      for (int j = 0; j < NR; j += 4) {
        const __m128 s = hsum4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        _mm_storeu_ps(y[i] + j, _mm_add_ps(s, _mm_loadu_ps(&tail[i][j])));
      }
    } else {
      for (int j = 0; j < NR; ++j) y[i][j] = hsum(acc[i][j]) + tail[i][j];
    }
  }
}

// All x rows against weight rows [n, n + NR).
template <class W, int NR>
inline void column(const MatmulArgs& a, int64_t n) {
  int64_t m = 0;
  for (; m + kMR <= a.M; m += kMR) tile<W, kMR, NR>(a, m, n);
  for (; m < a.M; ++m) tile<W, 1, NR>(a, m, n);
}

template <class W>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (a.M == 1) {  // decode: one x row, weight-bandwidth bound
    for (; n + 8 <= n1; n += 8) tile<W, 1, 8>(a, 0, n);
    for (; n + 4 <= n1; n += 4) tile<W, 1, 4>(a, 0, n);
    for (; n < n1; ++n) tile<W, 1, 1>(a, 0, n);
    return;
  }
  for (; n + kNR <= n1; n += kNR) column<W, kNR>(a, n);
  for (; n < n1; ++n) column<W, 1>(a, n);
}

}  // namespace

void matmul_f32(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WF32>(a, n0, n1); }
void matmul_f16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WF16>(a, n0, n1); }
void matmul_bf16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WBF16>(a, n0, n1); }

}  // namespace pipit::avx2
