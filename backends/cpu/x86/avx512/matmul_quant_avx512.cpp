// AVX512-VNNI integer matmuls for q8_0, q4_0 and mxfp4 weights against int8 activation blocks (BlockQ8Act).
// vpdpbusd multiplies unsigned by signed bytes, so weights are made unsigned by an offset: q8_0 uses w + 128
// (xor 0x80), q4_0 its raw nibble q = w + 8, mxfp4 its doubled E2M1 value + 12 (one table lookup). Then sum(u * a) = dot(w, a) + off * sum(a), so the accumulator starts
// at -off * sum(a) (BlockQ8Act::sum) in lane 0: the 8 lanes add up to the block's exact integer dot product.
// The lanes are scaled by d_w * d_a into f32 accumulators, reduced once per output. One block per 256-bit step
// (AVX512-VL encodings with 32 registers): on Zen 4 a 512-bit step pairing two blocks costs more in shuffles
// than it saves. The core loop is a register tile of MR activation rows x NR weight rows.
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

namespace pipit::avx512 {

namespace {

constexpr int kMR = 4;  // activation rows per tile when M > 1
constexpr int kNR = 4;  // weight rows per tile when M > 1

// A weight block as 32 unsigned bytes (w + kOffset) in activation order.
struct WQ8 {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 128;
  static __m256i load(const Block& b) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)), _mm256_set1_epi8(char(0x80)));
  }
  static float scale(const Block& b) { return f16_scalar(b.d); }
};
struct WQ4 {
  using Block = BlockQ4_0;
  static constexpr int kOffset = 8;
  static __m256i load(const Block& b) {  // low nibbles are weights 0..15, high nibbles 16..31
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
  }
  static float scale(const Block& b) { return f16_scalar(b.d); }
};
struct WMX {
  using Block = BlockMXFP4;
  static constexpr int kOffset = 12;
  static __m256i load(const Block& b) {  // low nibbles: 0..15, high: 16..31, each to kMxfp4Int8 + 12 in [0, 24]
    static constexpr int8_t lut_u[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i lut = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lut_u));
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

  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const int64_t nb = a.K / kQBlock;
  for (int64_t b = 0; b < nb; ++b) {
    __m256i aq[MR], corr[MR];
    __m256 da[MR];
    for (int i = 0; i < MR; ++i) {
      aq[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i][b].qs));
      corr[i] = _mm256_zextsi128_si256(_mm_cvtsi32_si128(-WB::kOffset * x[i][b].sum));
      da[i] = _mm256_broadcast_ss(&x[i][b].d);
    }
    for (int j = 0; j < NR; ++j) {
      const __m256i wv = WB::load(w[j][b]);
      const __m256 dw = _mm256_set1_ps(WB::scale(w[j][b]));
      for (int i = 0; i < MR; ++i) {
        const __m256i isum = _mm256_dpbusd_epi32(corr[i], wv, aq[i]);  // 8 lanes adding up to the exact dot
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, da[i]), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    if constexpr (NR % 4 == 0) {
      for (int j = 0; j < NR; j += 4) _mm_storeu_ps(y[i] + j, hsum4_256(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
    } else {
      for (int j = 0; j < NR; ++j) y[i][j] = hsum_256(acc[i][j]);
    }
  }
}

template <class WB, int NR>
inline void column(const MatmulArgs& a, int64_t n) {
  int64_t m = 0;
  for (; m + kMR <= a.M; m += kMR) tile<WB, kMR, NR>(a, m, n);
  switch (a.M - m) {
    case 3: tile<WB, 3, NR>(a, m, n); break;
    case 2: tile<WB, 2, NR>(a, m, n); break;
    case 1: tile<WB, 1, NR>(a, m, n); break;
    default: break;
  }
}

template <class WB>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (a.M == 1) {  // decode: one activation row, 8 weight rows at a time
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

}  // namespace pipit::avx512
