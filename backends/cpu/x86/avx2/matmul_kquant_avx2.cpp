// AVX2 matmuls for llama.cpp's super-block formats q4_K, q5_K, q6_K and iq4_xs (core/dtype.h) against BlockQ8Act
// activation rows (one activation block per 32-weight group; see backends/cpu/ref/kquant_ref.cpp for why).
// A tile is 8 weight rows (one f32 lane each) x MR activation rows. Per super-block and group g, the 8 rows' group
// weights are decoded to 32 bytes in activation order, then each activation row takes:
//  - q4_K / q5_K: q unsigned (<= 31), maddubs(q, a) (pair sums <= 2*31*127, no saturation), madd by 1 -> int32;
//  - q6_K / iq4_xs: q signed, maddubs(|q|, sign(a, q)) (|q| <= 127: pair sums <= 32258); q6_K's madd multiplies by
//    the two 16-weight group scales (int16 lanes of the low / high 128-bit half), iq4_xs's by 1;
// the 8 rows' int32 vectors are reduced to one vector of the 8 exact group dots (hadd tree), and each lane does
// ref's arithmetic: acc = fma(dot, scale_g * da, acc), then acc = fma(-min_g, da * sum(a), acc) for q4_K/q5_K.
// So every output equals the reference bit for bit, whatever the tile or the batch (M) it is computed in.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

#include <algorithm>

namespace pipit::avx2 {

namespace {

// The 8 six-bit scales and mins of a q4_K / q5_K block (kquant_scale_min for g = 0..7) as d * sc and dmin * m in
// f32 lanes. As 32-bit words of the 12 bytes A, B, C: scales 0-3 = A & 63 per byte, 4-7 = the low nibbles of C with
// bits 6-7 of A's bytes as bits 4-5; mins 0-3 = B & 63, 4-7 = the high nibbles of C with bits 6-7 of B's bytes.
inline void k4_scales(f16_t d, f16_t dmin, const uint8_t* q, __m256& sc, __m256& mn) {
  uint32_t A, B, C;
  __builtin_memcpy(&A, q, 4);
  __builtin_memcpy(&B, q + 4, 4);
  __builtin_memcpy(&C, q + 8, 4);
  const uint32_t s_lo = A & 0x3f3f3f3f, s_hi = (C & 0x0f0f0f0f) | ((A >> 2) & 0x30303030);
  const uint32_t m_lo = B & 0x3f3f3f3f, m_hi = ((C >> 4) & 0x0f0f0f0f) | ((B >> 2) & 0x30303030);
  const __m256 s8 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(int(s_lo), int(s_hi), 0, 0)));
  const __m256 m8 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(int(m_lo), int(m_hi), 0, 0)));
  sc = _mm256_mul_ps(_mm256_set1_ps(f16_scalar(d)), s8);
  mn = _mm256_mul_ps(_mm256_set1_ps(f16_scalar(dmin)), m8);
}

// In-register 8x8 transpose: r[j][g] -> r[g][j].
inline void transpose8(__m256* r) {
  __m256 t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
  }
}

// Weight formats: group(b, g) = group g's 32 weights as bytes in activation order; scales(b, sc, mn) = the 8 groups'
// f32 multiplier of the integer dot (before the activation scale) and f32 min (w = sc*q - mn), as ref computes them.
struct WQ4K {
  using Block = BlockQ4_K;
  static constexpr bool kSigned = false, kMins = true, kScales16 = false;
  static inline __m256i group(const Block& b, int g) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (g / 2)));
    return _mm256_and_si256(g % 2 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0f));
  }
  static inline void scales(const Block& b, __m256& sc, __m256& mn) { k4_scales(b.d, b.dmin, b.scales, sc, mn); }
};

struct WQ5K {
  using Block = BlockQ5_K;
  static constexpr bool kSigned = false, kMins = true, kScales16 = false;
  static inline __m256i group(const Block& b, int g) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (g / 2)));
    const __m256i lo = _mm256_and_si256(g % 2 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0f));
    // bit g of each qh byte is the fifth bit: moved to bit 4 by a 16-bit shift of 4 - g (|.| <= 4), which keeps the
    // bit inside its byte; the 0x10 mask drops what crossed from the neighbour
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    const __m256i hb = g <= 4 ? _mm256_slli_epi16(qh, 4 - g) : _mm256_srli_epi16(qh, g - 4);
    return _mm256_or_si256(lo, _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
  }
  static inline void scales(const Block& b, __m256& sc, __m256& mn) { k4_scales(b.d, b.dmin, b.scales, sc, mn); }
};

struct WQ6K {
  using Block = BlockQ6_K;
  static constexpr bool kSigned = true, kMins = false, kScales16 = true;
  static inline __m256i group(const Block& b, int g) {
    // group g = 4h + s: the low (s < 2) or high nibbles of ql[64h + 32 (s & 1) ..], bits 2s..2s+1 of qh[32h ..]
    const int h = g / 4, s = g % 4;
    const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32 * (s & 1)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    const __m256i nib = _mm256_and_si256(s >= 2 ? _mm256_srli_epi16(l, 4) : l, _mm256_set1_epi8(0x0f));
    // bits 2s..2s+1 -> 4..5 (a 16-bit shift of 4 - 2s keeps them inside their byte)
    const __m256i hi = s <= 2 ? _mm256_slli_epi16(qh, 4 - 2 * s) : _mm256_srli_epi16(qh, 2);
    const __m256i q = _mm256_or_si256(nib, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(32));
  }
  static inline __m256i scales16(const Block& b, int g) {  // weights 0..15 of the group: scale 2g, 16..31: 2g + 1
    return _mm256_set_m128i(_mm_set1_epi16(b.scales[2 * g + 1]), _mm_set1_epi16(b.scales[2 * g]));
  }
  static inline void scales(const Block& b, __m256& sc, __m256&) { sc = _mm256_set1_ps(f16_scalar(b.d)); }
};

struct WIQ4XS {
  using Block = BlockIQ4_XS;
  static constexpr bool kSigned = true, kMins = false, kScales16 = false;
  static inline __m256i group(const Block& b, int g) {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * g));
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(v, m4));                     // weights 0..15
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(v, 4), m4));  // 16..31
    return _mm256_set_m128i(hi, lo);
  }
  static inline void scales(const Block& b, __m256& sc, __m256&) {
    alignas(32) int32_t ls[8];
    for (int g = 0; g < 8; ++g) ls[g] = iq4_xs_scale(b, g) - 32;
    sc = _mm256_mul_ps(_mm256_set1_ps(f16_scalar(b.d)), _mm256_cvtepi32_ps(_mm256_load_si256((const __m256i*)ls)));
  }
};

// 8 vectors of 8 int32 -> one vector of their 8 sums, in order.
inline __m256i reduce8(const __m256i* v) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
  // a = [s0 s1 s2 s3 | s0' s1' s2' s3'] (partial sums of the two 128-bit halves), b likewise for 4..7
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// y[m .. m+MR, n .. n+nr) for nr <= 8 weight rows (missing rows repeat row n; their lanes are not stored).
template <class W, int MR>
inline void tile(const MatmulArgs& a, int64_t m, int64_t n, int nr) {
  using Block = typename W::Block;
  const BlockQ8Act* x[MR];
  float* y[MR];
  const Block* w[8];
  for (int i = 0; i < MR; ++i) {
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
    y[i] = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
  }
  for (int j = 0; j < 8; ++j)
    w[j] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a.w) + (n + (j < nr ? j : 0)) * a.w_stride);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
  const int64_t nsb = a.K / kQK;
  for (int64_t s = 0; s < nsb; ++s) {
    __m256 sc[8], mn[8] = {};  // per row, lanes = groups; transposed to per group, lanes = rows
    for (int j = 0; j < 8; ++j) W::scales(w[j][s], sc[j], mn[j]);
    transpose8(sc);
    if constexpr (W::kMins) transpose8(mn);
    for (int g = 0; g < 8; ++g) {
      __m256i q[8], qa[8], s16[8];
      for (int j = 0; j < 8; ++j) {
        q[j] = W::group(w[j][s], g);
        if constexpr (W::kSigned) qa[j] = _mm256_abs_epi8(q[j]);
        if constexpr (W::kScales16) s16[j] = W::scales16(w[j][s], g);
      }
      const __m256 scale = sc[g];
      for (int i = 0; i < MR; ++i) {
        const BlockQ8Act& xb = x[i][8 * s + g];
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
        __m256i dots[8];
        for (int j = 0; j < 8; ++j) {
          __m256i p16;
          if constexpr (W::kSigned) p16 = _mm256_maddubs_epi16(qa[j], _mm256_sign_epi8(av, q[j]));
          else p16 = _mm256_maddubs_epi16(q[j], av);
          if constexpr (W::kScales16) dots[j] = _mm256_madd_epi16(p16, s16[j]);
          else dots[j] = _mm256_madd_epi16(p16, ones);
        }
        const __m256 dot = _mm256_cvtepi32_ps(reduce8(dots));
        acc[i] = _mm256_fmadd_ps(dot, _mm256_mul_ps(scale, _mm256_set1_ps(xb.d)), acc[i]);
        if constexpr (W::kMins)
          acc[i] = _mm256_fnmadd_ps(mn[g], _mm256_set1_ps(xb.d * float(xb.sum)), acc[i]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    if (nr == 8) {
      _mm256_storeu_ps(y[i], acc[i]);
    } else {
      alignas(32) float t[8];
      _mm256_store_ps(t, acc[i]);
      for (int j = 0; j < nr; ++j) y[i][j] = t[j];
    }
  }
}

constexpr int kMR = 4;  // activation rows per tile: a decoded group of 8 rows feeds 4 of them

template <class W>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; n += 8) {
    const int nr = int(std::min<int64_t>(8, n1 - n));
    int64_t m = 0;
    for (; m + kMR <= a.M; m += kMR) tile<W, kMR>(a, m, n, nr);
    switch (a.M - m) {
      case 3: tile<W, 3>(a, m, n, nr); break;
      case 2: tile<W, 2>(a, m, n, nr); break;
      case 1: tile<W, 1>(a, m, n, nr); break;
      default: break;
    }
  }
}

}  // namespace

void matmul_q4_k(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WQ4K>(a, n0, n1); }
void matmul_q5_k(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WQ5K>(a, n0, n1); }
void matmul_q6_k(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WQ6K>(a, n0, n1); }
void matmul_iq4_xs(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<WIQ4XS>(a, n0, n1); }

}  // namespace pipit::avx2
