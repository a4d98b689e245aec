// NEON matmuls with float weights (f32, f16, bf16) and f32 activations: y[m, n] = sum_k x[m, k] * w[n, k].
// Decode (M = 1) streams 8 weight rows against one x row (8 FMA chains); M > 1 runs tiles of 4 x-rows by 4 weight
// rows (16 of the 32 q registers as accumulators), so every loaded and converted weight vector feeds four FMAs.
// f16 / bf16 convert exactly to f32, so results differ from ref only by summation order. K % 4 tails are scalar.
#include "backends/cpu/arm/neon/kernels_neon.h"
#include "backends/cpu/arm/neon/simd_neon.h"

namespace pipit::neon {

namespace {

constexpr int kMR = 4;  // x rows per tile when M > 1
constexpr int kNR = 4;  // weight rows per tile when M > 1

struct WF32 {
  static float32x4_t load(const uint8_t* w, int64_t k) { return vld1q_f32(reinterpret_cast<const float*>(w) + k); }
  static float at(const uint8_t* w, int64_t k) { return reinterpret_cast<const float*>(w)[k]; }
};
struct WF16 {
  static float32x4_t load(const uint8_t* w, int64_t k) { return load_f16(reinterpret_cast<const uint16_t*>(w) + k); }
  static float at(const uint8_t* w, int64_t k) { return f16_scalar(reinterpret_cast<const uint16_t*>(w)[k]); }
};
struct WBF16 {
  static float32x4_t load(const uint8_t* w, int64_t k) { return load_bf16(reinterpret_cast<const uint16_t*>(w) + k); }
  static float at(const uint8_t* w, int64_t k) { return bf16_scalar(reinterpret_cast<const uint16_t*>(w)[k]); }
};

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

  float32x4_t acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vdupq_n_f32(0.0f);
  const int64_t K = a.K;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    float32x4_t xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = vld1q_f32(x[i] + k);
    for (int j = 0; j < NR; ++j) {
      const float32x4_t wv = W::load(w[j], k);
      for (int i = 0; i < MR; ++i) acc[i][j] = vfmaq_f32(acc[i][j], xv[i], wv);
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
      for (int j = 0; j < NR; j += 4)
        vst1q_f32(y[i] + j, vaddq_f32(hsum4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), vld1q_f32(&tail[i][j])));
    } else {
      for (int j = 0; j < NR; ++j) y[i][j] = vaddvq_f32(acc[i][j]) + tail[i][j];
    }
  }
}

template <class W, int NR>
inline void column(const MatmulArgs& a, int64_t n) {
  int64_t m = 0;
  for (; m + kMR <= a.M; m += kMR) tile<W, kMR, NR>(a, m, n);
  switch (a.M - m) {
    case 3: tile<W, 3, NR>(a, m, n); break;
    case 2: tile<W, 2, NR>(a, m, n); break;
    case 1: tile<W, 1, NR>(a, m, n); break;
    default: break;
  }
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

}  // namespace pipit::neon
