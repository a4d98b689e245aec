// 256-bit integer matmuls for the row-interleaved panel dtypes q4_0x16 / mxfp4x16 / iq4_nlx16 / q4_1x16 / q5_0x16 /
// q5_1x16 / q8_0x16 (core/dtype.h) against BlockQ8Act rows, shared by the AVX2 level (matmul_panel_avx2.cpp:
// vpmaddubsw + vpmaddwd) and the AVX-VNNI level (x86/avxvnni/matmul_panel_avxvnni.cpp: vpdpbusd), which differ only
// in the dot policy (int8_dot_avx2.h).
// A panel block's 64-byte chunk holds 4 quant bytes of each of 16 rows; its two 32-byte halves are rows 0-7 and
// 8-15, one int32 lane per row. Both dot instructions multiply unsigned by signed bytes:
// - q4: nibbles q in [0, 15] times a broadcast activation dword; with vpmaddubsw a pair sum is at most 2 * 15 * 127
//   = 3810, so the 8 products of a block (4 chunks x low/high nibbles) add up in int16 without saturating (<= 30480),
//   then one vpmaddwd widens to int32. The lanes start at -8 * sum(a) so they hold the signed dot.
// - mxfp4: the same nibbles through a vpshufb table to the doubled E2M1 value + 12, in [0, 24]: a pair sum is at most
//   2 * 24 * 127 = 6096, so 4 steps (<= 24384) go into each int16 partial before it is widened. Lanes start at
//   -12 * sum(a).
// - iq4_nl: the nibbles through a vpshufb table to the grid value (kIq4Values, -127..113). vpdpbusd (VnniDot) takes
//   the value + 128 (1..241) unsigned, lanes starting at -128 * sum(a); with vpmaddubsw a pair sum of that would
//   reach 2 * 241 * 127 and saturate, so MaddubsDot takes |value| x sign(a, value) instead (pair sums <= 2 * 127 *
//   127 fit int16, two do not: each step is widened at once, D::acc), lanes starting at 0.
// - q4_1: the nibbles q (0..15) as q4_0's, lanes starting at 0 (w = d q + m: the min is the f32 step below).
// - q8: signed weights, so |w| times sign(a, w) (|w| <= 128, |a| <= 127: a pair sum fits int16), widened per chunk.
// - q5_0 / q5_1: the nibbles with their fifth bits put back (q = 0..31, unsigned), a pair sum at most 2 * 31 * 127
//   = 7874, so 4 steps (<= 31496) go into an int16 partial before it is widened; lanes start at -16 * sum(a) (q5_0)
//   or 0 (q5_1).
// Either way the int32 sums are exact, so both levels give the same integers, and per block f32 acc +=
// float(dot) * (d_w d_a) is the same arithmetic per row whatever the number of rows M or the level: the AVX-VNNI
// kernels give the AVX2 kernels' bits. Formats with a min per block (q4_1, q5_1: kMins) then add
// acc = fma(m, d_a * sum(a), acc), ref's second step (kquant_ref.cpp), so they equal ref bit for bit.
//
// Internal linkage (anonymous namespace): each level's instantiation is compiled with that level's target flags.
#pragma once

#include <immintrin.h>

#include <type_traits>

#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/prefetch.h"
#include "backends/cpu/x86/avx2/int8_dot_avx2.h"

namespace pipit {
namespace {

constexpr int kPanelMR = 2;  // activation rows per tile (16 ymm registers: 2 x 2 accumulators + 2 x 2 partial sums)

inline __m256 f16x8_scales(const f16_t* d) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d)));
}

// The 4-bit panel formats: nibbles as vpmaddubsw / vpdpbusd take them (map: unsigned, value + kOffset), how many
// steps an int16 partial takes before it is widened (kWidenEvery, see above), and the 8 row scales of half h. A
// format whose kSignedOnMaddubs is set goes the |value| x sign(a, value) way under MaddubsDot instead (smap: the
// signed value), each step widened at once (see iq4_nl above). A format with kFifthBit (q5) ors each vector's fifth
// bits (fifth_bits) into its nibbles before map.
struct NQ4 {
  using Block = BlockQ4_0x16;
  static constexpr int kOffset = 8, kWidenEvery = 8;
  static constexpr bool kSignedOnMaddubs = false, kMins = false, kFifthBit = false;
  static inline __m256i map(__m256i q) { return q; }
  static inline __m256 scales(const Block& w, int h) { return f16x8_scales(w.d + 8 * h); }
};
struct NMX {
  using Block = BlockMXFP4x16;
  static constexpr int kOffset = 12, kWidenEvery = 4;
  static constexpr bool kSignedOnMaddubs = false, kMins = false, kFifthBit = false;
  static inline __m256i map(__m256i q) {
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Int8));
    const __m128i lut = _mm_add_epi8(values, _mm_set1_epi8(kOffset));  // a constant: hoisted out of the loops
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(lut), q);
  }
  // 2^(e - 128) per row, as e8m0_half_to_f32 (core/dtype.h): (e - 1) << 23, or the subnormals 2^21 << e for e < 2
  static inline __m256 scales(const Block& w, int h) {
    int64_t e8;
    __builtin_memcpy(&e8, w.e + 8 * h, 8);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(e8));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, small));
  }
};

// iq4_nl (kIq4Values): unsigned value + 128 for VnniDot, the signed value for MaddubsDot (kSignedOnMaddubs). Under
// VnniDot partial sums are int32 from the start, so kWidenEvery does not bound anything there.
struct NIQ4 {
  using Block = BlockIQ4_NLx16;
  static constexpr int kOffset = 128, kWidenEvery = 8;
  static constexpr bool kSignedOnMaddubs = true, kMins = false, kFifthBit = false;
  static inline __m256i table(int offset) {
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values));
    return _mm256_broadcastsi128_si256(_mm_add_epi8(values, _mm_set1_epi8(char(offset))));  // hoisted: a constant
  }
  static inline __m256i map(__m256i q) { return _mm256_shuffle_epi8(table(kOffset), q); }
  static inline __m256i smap(__m256i q) { return _mm256_shuffle_epi8(table(0), q); }
  static inline __m256 scales(const Block& w, int h) { return f16x8_scales(w.d + 8 * h); }
};

// q4_1: unsigned nibbles as they are, and a min per row (mins: the 8 rows' m of half h).
struct NQ41 {
  using Block = BlockQ4_1x16;
  static constexpr int kOffset = 0, kWidenEvery = 8;
  static constexpr bool kSignedOnMaddubs = false, kMins = true, kFifthBit = false;
  static inline __m256i map(__m256i q) { return q; }
  static inline __m256 scales(const Block& w, int h) { return f16x8_scales(w.d + 8 * h); }
  static inline __m256 mins(const Block& w, int h) { return f16x8_scales(w.m + 8 * h); }
};

// q5_0 / q5_1 (core/dtype.h): q = nibble | fifth bit << 4, 0..31 unsigned; q5_0's lanes start at -16 * sum(a)
// (w = d (q - 16)), q5_1 has a min per row as q4_1.
struct NQ50 {
  using Block = BlockQ5_0x16;
  static constexpr int kOffset = 16, kWidenEvery = 4;
  static constexpr bool kSignedOnMaddubs = false, kMins = false, kFifthBit = true;
  static inline __m256i map(__m256i q) { return q; }
  static inline __m256 scales(const Block& w, int h) { return f16x8_scales(w.d + 8 * h); }
};
struct NQ51 {
  using Block = BlockQ5_1x16;
  static constexpr int kOffset = 0, kWidenEvery = 4;
  static constexpr bool kSignedOnMaddubs = false, kMins = true, kFifthBit = true;
  static inline __m256i map(__m256i q) { return q; }
  static inline __m256 scales(const Block& w, int h) { return f16x8_scales(w.d + 8 * h); }
  static inline __m256 mins(const Block& w, int h) { return f16x8_scales(w.m + 8 * h); }
};

// Half h of weight vector v's fifth bits (the 32 bits qh[8 v + 4 h ..], core/dtype.h) as bytes: 0x10 where the bit is
// set, 0 where not: byte j takes byte j / 8 of the word (vpshufb) and tests bit j % 8 of it.
template <class Block>
inline __m256i fifth_bits(const Block& w, int v, int h) {
  int32_t bits;
  __builtin_memcpy(&bits, w.qh + 8 * v + 4 * h, 4);
  const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(bits), spread), bit);
  return _mm256_and_si256(_mm256_cmpeq_epi8(b, bit), _mm256_set1_epi8(0x10));
}
// Vector v's (half h) quants of format N from its nibbles: the fifth bits or'd in where N has them.
template <class N>
inline __m256i with_fifth_bits(__m256i nib, const typename N::Block& w, int v, int h) {
  if constexpr (N::kFifthBit) return _mm256_or_si256(nib, fifth_bits(w, v, h));
  return nib;
}

// Whether format N takes the signed-steps path under dot policy D, and the lanes' starting offset then.
template <class D, class N>
constexpr bool kSignedSteps = N::kSignedOnMaddubs && std::is_same_v<D, MaddubsDot>;
template <class D, class N>
constexpr int kLaneOffset = kSignedSteps<D, N> ? 0 : N::kOffset;

// Adds the block dot products of rows [8h, 8h + 8) of the panel block to isum[i] (one int32 lane per row).
template <class D, class N>
struct PQ4 {
  static_assert(N::kWidenEvery == 4 || N::kWidenEvery == 8, "dots and tile_q4 widen after 4 or 8 steps");
  using Block = typename N::Block;
  static constexpr int kOffset = kLaneOffset<D, N>;
  static constexpr bool kMins = N::kMins;
  static inline __m256 scales(const Block& w, int h) { return N::scales(w, h); }
  static inline __m256 mins(const Block& w, int h) {
    if constexpr (N::kMins) return N::mins(w, h);
    return _mm256_setzero_ps();
  }
  template <int MR>
  static inline void dots(const Block& w, int h, const BlockQ8Act* const* x, int64_t b, __m256i* isum) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    if constexpr (kSignedSteps<D, N>) {  // |value| x sign(a, value), each step widened (D::acc)
      for (int c = 0; c < 4; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 64 * c + 32 * h));
        const __m256i lo = N::smap(_mm256_and_si256(v, m4));
        const __m256i hi = N::smap(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        const __m256i la = _mm256_abs_epi8(lo), ha = _mm256_abs_epi8(hi);
        for (int i = 0; i < MR; ++i) {
          isum[i] = D::acc(isum[i], la, _mm256_sign_epi8(bcast_dword(x[i][b].qs + 4 * c), lo));
          isum[i] = D::acc(isum[i], ha, _mm256_sign_epi8(bcast_dword(x[i][b].qs + 16 + 4 * c), hi));
        }
      }
      return;
    }
    __m256i p[MR];
    for (int i = 0; i < MR; ++i) p[i] = D::zero();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 64 * c + 32 * h));
      const __m256i lo = N::map(with_fifth_bits<N>(_mm256_and_si256(v, m4), w, 2 * c, h));
      const __m256i hi = N::map(with_fifth_bits<N>(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), w, 2 * c + 1, h));
      for (int i = 0; i < MR; ++i) {
        p[i] = D::add(p[i], lo, bcast_dword(x[i][b].qs + 4 * c));
        p[i] = D::add(p[i], hi, bcast_dword(x[i][b].qs + 16 + 4 * c));
      }
      if (2 * (c + 1) % N::kWidenEvery == 0)  // 2 steps per chunk
        for (int i = 0; i < MR; ++i) isum[i] = _mm256_add_epi32(isum[i], D::widen(p[i])), p[i] = D::zero();
    }
  }
};
template <class D>
struct PQ8 {
  using Block = BlockQ8_0x16;
  static constexpr int kOffset = 0;
  static constexpr bool kMins = false;
  static inline __m256 scales(const Block& w, int h) { return f16x8_scales(w.d + 8 * h); }
  static inline __m256 mins(const Block&, int) { return _mm256_setzero_ps(); }
  template <int MR>
  static inline void dots(const Block& w, int h, const BlockQ8Act* const* x, int64_t b, __m256i* isum) {
    for (int g = 0; g < 8; ++g) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 64 * g + 32 * h));
      const __m256i wabs = _mm256_abs_epi8(v);
      for (int i = 0; i < MR; ++i) isum[i] = D::acc(isum[i], wabs, _mm256_sign_epi8(bcast_dword(x[i][b].qs + 4 * g), v));
    }
  }
};
// y[m .. m+MR, n .. n+16) from the panel starting at `panel`.
template <class P, int MR>
inline void panel_tile(const MatmulArgs& a, const typename P::Block* panel, int64_t m, int64_t n) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m256 acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  const int64_t nb = a.K / kQBlock;
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (MR == 1) prefetch_panel_ahead(panel, b);  // decode (backends/cpu/prefetch.h)
    const auto& w = panel[b];
    for (int h = 0; h < 2; ++h) {
      __m256i isum[MR];
      for (int i = 0; i < MR; ++i) isum[i] = _mm256_set1_epi32(-P::kOffset * x[i][b].sum);
      P::template dots<MR>(w, h, x, b, isum);
      const __m256 dw = P::scales(w, h);
      for (int i = 0; i < MR; ++i)
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(dw, _mm256_set1_ps(x[i][b].d)), acc[i][h]);
      if constexpr (P::kMins) {  // + m d_a sum(a), ref's second fused step
        const __m256 mw = P::mins(w, h);
        for (int i = 0; i < MR; ++i)
          acc[i][h] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x[i][b].d * float(x[i][b].sum)), acc[i][h]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    _mm256_storeu_ps(y, acc[i][0]);
    _mm256_storeu_ps(y + 8, acc[i][1]);
  }
}

// 4- and 5-bit GEMM (N: NQ4, NMX, NIQ4, NQ41, NQ50 or NQ51): y[m .. m+MR, n .. n+16) with the block's 8 weight
// vectors (4 chunks x low / high nibbles) outermost, each unpacked once for MR rows and both 8-row halves: MR x 2
// partial sums (D's) and f32 accumulators (16 registers at MR = 4, some spilled, still faster). The sums are exact as
// in PQ4 and the f32 steps are panel_tile()'s, so every output has panel_tile()'s bits. kernels_bench gemm q4_0x16
// K=1024 N=3072 M=512, 1 thread (this Zen 5 capped to AVX2): 25.6 ms with panel_tile<PQ4, 2>, 18.1 ms with this
// (2 x 16, 4 x 8 and 6 x 8 tiles: 20-21 ms).
template <class D, class N, int MR>
inline void tile_q4(const MatmulArgs& a, const typename N::Block* panel, int64_t m, int64_t n) {
  constexpr bool kS = kSignedSteps<D, N>;
  constexpr int kOffset = kLaneOffset<D, N>;
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m256 acc[2][MR];
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < MR; ++i) acc[h][i] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const int64_t nb = a.K / kQBlock;
  for (int64_t b = 0; b < nb; ++b) {
    const auto& w = panel[b];
    __m256i p16[2][MR], s32[2][MR];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < MR; ++i) p16[h][i] = D::zero();
    if constexpr (kS)  // signed steps: every step widened into s32 at once
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < MR; ++i) s32[h][i] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {  // unrolled; vectors numbered as q4_vector_x_offset (matmul_tiles.h) says
      __m256i wv[2], wa[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 64 * (v / 2) + 32 * h));
        const __m256i nib = with_fifth_bits<N>(_mm256_and_si256(v % 2 ? _mm256_srli_epi16(q, 4) : q, m4), w, v, h);
        if constexpr (kS) {
          wv[h] = N::smap(nib);
          wa[h] = _mm256_abs_epi8(wv[h]);
        } else {
          wv[h] = N::map(nib);
        }
      }
      for (int i = 0; i < MR; ++i) {
        const __m256i xv = bcast_dword(x[i][b].qs + q4_vector_x_offset(v));
        for (int h = 0; h < 2; ++h) {
          if constexpr (kS)
            s32[h][i] = D::acc(s32[h][i], wa[h], _mm256_sign_epi8(xv, wv[h]));
          else
            p16[h][i] = D::add(p16[h][i], wv[h], xv);
        }
      }
      if constexpr (!kS && N::kWidenEvery < 8) {  // mxfp4: the first 4 steps' partial widened before it could saturate
        if (v == N::kWidenEvery - 1)
          for (int h = 0; h < 2; ++h)
            for (int i = 0; i < MR; ++i) s32[h][i] = D::widen(p16[h][i]), p16[h][i] = D::zero();
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = N::scales(w, h);
      for (int i = 0; i < MR; ++i) {
        __m256i isum = _mm256_set1_epi32(-kOffset * x[i][b].sum);
        if constexpr (!kS) isum = _mm256_add_epi32(isum, D::widen(p16[h][i]));
        if constexpr (kS || N::kWidenEvery < 8) isum = _mm256_add_epi32(isum, s32[h][i]);
        acc[h][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(x[i][b].d)), acc[h][i]);
      }
      if constexpr (N::kMins) {  // + m d_a sum(a), as panel_tile
        const __m256 mw = N::mins(w, h);
        for (int i = 0; i < MR; ++i)
          acc[h][i] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x[i][b].d * float(x[i][b].sum)), acc[h][i]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    _mm256_storeu_ps(y, acc[0][i]);
    _mm256_storeu_ps(y + 8, acc[1][i]);
  }
}

struct NQ8 {};  // the q8_0x16 format tag for matmul_panels (PQ8)

// Fmt: NQ4 (q4_0x16), NMX (mxfp4x16), NIQ4 (iq4_nlx16), NQ41 (q4_1x16), NQ50 (q5_0x16), NQ51 (q5_1x16) or NQ8
// (q8_0x16).
template <class D, class Fmt>
void matmul_panels(const MatmulArgs& a, int64_t n0, int64_t n1) {
  constexpr bool k4bit = !std::is_same_v<Fmt, NQ8>;
  using P = std::conditional_t<k4bit, PQ4<D, Fmt>, PQ8<D>>;
  using Block = typename P::Block;
  const int64_t nb = a.K / kQBlock;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nb;
    if constexpr (k4bit) {
      if (a.M > 1) {
        for_row_tiles<4>(0, a.M, [&](auto r, int64_t m) { tile_q4<D, Fmt, decltype(r)::value>(a, panel, m, n); });
        continue;
      }
    }
    for_row_tiles<kPanelMR>(0, a.M, [&](auto r, int64_t m) { panel_tile<P, decltype(r)::value>(a, panel, m, n); });
  }
}

}  // namespace
}  // namespace pipit
