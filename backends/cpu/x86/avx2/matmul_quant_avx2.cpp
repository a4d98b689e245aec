// AVX2 integer matmuls for q8_0, q4_0 and mxfp4 weights against int8 activation blocks (BlockQ8Act).
// Per block pair: maddubs(|w|, sign(a, w)) multiplies signed by signed through the unsigned x signed instruction
// (|w| <= 128, |a| <= 127, so the int16 pair sums cannot saturate; mxfp4's doubled E2M1 values are <= 12), madd widens to 8 int32 lanes: the block's
// integer dot product is exact. It is then scaled by d_w * d_a into f32 lane accumulators, reduced once per output.
// The core loop is a register tile of MR activation rows x NR weight rows, so each unpacked block is reused.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

namespace pipit::avx2 {

namespace {

constexpr int kMR = 2;  // activation rows per tile when M > 1
constexpr int kNR = 4;  // weight rows per tile when M > 1

// A weight block as 32 signed bytes in activation order, and its scale.
struct WQ8 {
  using Block = BlockQ8_0;
  static __m256i load(const Block& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
  static float scale(const Block& b) { return f16_scalar(b.d); }
};
struct WQ4 {
  using Block = BlockQ4_0;
  static __m256i load(const Block& b) {  // low nibbles are weights 0..15, high nibbles 16..31; q - 8 in [-8, 7]
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
  }
  static float scale(const Block& b) { return f16_scalar(b.d); }
};
struct WMX {
  using Block = BlockMXFP4;
  static __m256i load(const Block& b) {  // nibbles (low: 0..15, high: 16..31) through the doubled E2M1 table
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i lut = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Int8));
    return _mm256_set_m128i(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(v, 4), m4)),
                            _mm_shuffle_epi8(lut, _mm_and_si128(v, m4)));
  }
  static float scale(const Block& b) { return e8m0_half_to_f32(b.e); }
};

template <class WB, int MR, int NR>
inline void tile(const MatmulArgs& a, int64_t m, int64_t n) {
  using Block = typename WB::Block;
  const BlockQ8Act* x[MR];
  float* y[MR];
  const Block* w[NR];
  for (int i = 0; i < MR; ++i) {
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
    y[i] = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
  }
  for (int j = 0; j < NR; ++j) w[j] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a.w) + (n + j) * a.w_stride);

  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const int64_t nb = a.K / kQBlock;
  for (int64_t b = 0; b < nb; ++b) {
    __m256i av[MR];
    float da[MR];
    for (int i = 0; i < MR; ++i) {
      av[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i][b].qs));
      da[i] = x[i][b].d;
    }
    for (int j = 0; j < NR; ++j) {
      const __m256i wv = WB::load(w[j][b]);
      const __m256i wabs = _mm256_abs_epi8(wv);
      const float dw = WB::scale(w[j][b]);
      for (int i = 0; i < MR; ++i) {
        const __m256i p16 = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(av[i], wv));
        const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));  // 8 exact int32 partial sums
        acc[i][j] = _mm256_fmadd_ps(isum, _mm256_set1_ps(dw * da[i]), acc[i][j]);
      }
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

template <class WB, int NR>
inline void column(const MatmulArgs& a, int64_t n) {
  int64_t m = 0;
  for (; m + kMR <= a.M; m += kMR) tile<WB, kMR, NR>(a, m, n);
  for (; m < a.M; ++m) tile<WB, 1, NR>(a, m, n);
}

template <class WB>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (a.M == 1) {
    for (; n + 8 <= n1; n += 8) tile<WB, 1, 8>(a, 0, n);
    for (; n + 4 <= n1; n += 4) tile<WB, 1, 4>(a, 0, n);
    for (; n < n1; ++n) tile<WB, 1, 1>(a, 0, n);
    return;
  }
  for (; n + kNR <= n1; n += kNR) column<WB, kNR>(a, n);
  for (; n < n1; ++n) column<WB, 1>(a, n);
}

}  // namespace

void matmul_q8_0(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WQ8>(a, n0, n1); }
void matmul_q4_0(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WQ4>(a, n0, n1); }
void matmul_mxfp4(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WMX>(a, n0, n1); }

}  // namespace pipit::avx2
