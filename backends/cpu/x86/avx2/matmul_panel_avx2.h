// 256-bit integer matmuls for the row-interleaved panel dtypes q4_0x16 / q8_0x16 (core/dtype.h) against BlockQ8Act
// rows, shared by the AVX2 level (matmul_panel_avx2.cpp: vpmaddubsw + vpmaddwd) and the AVX-VNNI level
// (x86/avxvnni/matmul_panel_avxvnni.cpp: vpdpbusd), which differ only in the dot policy (int8_dot_avx2.h).
// A panel block's 64-byte chunk holds 4 quant bytes of each of 16 rows; its two 32-byte halves are rows 0-7 and
// 8-15, one int32 lane per row. Both dot instructions multiply unsigned by signed bytes:
// - q4: nibbles q in [0, 15] times a broadcast activation dword; with vpmaddubsw a pair sum is at most 2 * 15 * 127
//   = 3810, so the 8 products of a block (4 chunks x low/high nibbles) add up in int16 without saturating (<= 30480),
//   then one vpmaddwd widens to int32. The lanes start at -8 * sum(a) so they hold the signed dot.
// - q8: signed weights, so |w| times sign(a, w) (|w| <= 128, |a| <= 127: a pair sum fits int16), widened per chunk.
// Either way the int32 sums are exact, so both levels give the same integers, and per block f32 acc +=
// float(dot) * (d_w d_a) is the same arithmetic per row whatever the number of rows M or the level: the AVX-VNNI
// kernels give the AVX2 kernels' bits.
//
// Internal linkage (anonymous namespace): each level's instantiation is compiled with that level's target flags.
#pragma once

#include <immintrin.h>

#include <type_traits>

#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/x86/avx2/int8_dot_avx2.h"

namespace pipit {
namespace {

constexpr int kPanelMR = 2;  // activation rows per tile (16 ymm registers: 2 x 2 accumulators + 2 x 2 partial sums)

// Adds the block dot products of rows [8h, 8h + 8) of the panel block to isum[i] (one int32 lane per row).
template <class D>
struct PQ4 {
  using Block = BlockQ4_0x16;
  static constexpr int kOffset = 8;
  template <int MR>
  static inline void dots(const Block& w, int h, const BlockQ8Act* const* x, int64_t b, __m256i* isum) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i p[MR];
    for (int i = 0; i < MR; ++i) p[i] = D::zero();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 64 * c + 32 * h));
      const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      for (int i = 0; i < MR; ++i) {
        p[i] = D::add(p[i], lo, bcast_dword(x[i][b].qs + 4 * c));
        p[i] = D::add(p[i], hi, bcast_dword(x[i][b].qs + 16 + 4 * c));
      }
    }
    for (int i = 0; i < MR; ++i) isum[i] = _mm256_add_epi32(isum[i], D::widen(p[i]));
  }
};
template <class D>
struct PQ8 {
  using Block = BlockQ8_0x16;
  static constexpr int kOffset = 0;
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
    const auto& w = panel[b];
    for (int h = 0; h < 2; ++h) {
      __m256i isum[MR];
      for (int i = 0; i < MR; ++i) isum[i] = _mm256_set1_epi32(-P::kOffset * x[i][b].sum);
      P::template dots<MR>(w, h, x, b, isum);
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.d + 8 * h)));
      for (int i = 0; i < MR; ++i)
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(dw, _mm256_set1_ps(x[i][b].d)), acc[i][h]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    _mm256_storeu_ps(y, acc[i][0]);
    _mm256_storeu_ps(y + 8, acc[i][1]);
  }
}

// q4 GEMM: y[m .. m+MR, n .. n+16) with the block's 8 weight vectors (4 chunks x low / high nibbles) outermost, each
// unpacked once for MR rows and both 8-row halves: MR x 2 partial sums (D's) and f32 accumulators (16 registers at
// MR = 4, some spilled, still faster). The sums are exact as in PQ4 and the f32 steps are panel_tile()'s, so every
// output has panel_tile()'s bits. kernels_bench gemm q4_0x16 K=1024 N=3072 M=512, 1 thread (this Zen 5 capped to AVX2):
// 25.6 ms with panel_tile<PQ4, 2>, 18.1 ms with this (2 x 16, 4 x 8 and 6 x 8 tiles: 20-21 ms).
template <class D, int MR>
inline void tile_q4(const MatmulArgs& a, const BlockQ4_0x16* panel, int64_t m, int64_t n) {
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
    __m256i p16[2][MR];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < MR; ++i) p16[h][i] = D::zero();
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {  // unrolled; vectors numbered as q4_vector_x_offset (matmul_tiles.h) says
      __m256i wv[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 64 * (v / 2) + 32 * h));
        wv[h] = _mm256_and_si256(v % 2 ? _mm256_srli_epi16(q, 4) : q, m4);
      }
      for (int i = 0; i < MR; ++i) {
        const __m256i xv = bcast_dword(x[i][b].qs + q4_vector_x_offset(v));
        for (int h = 0; h < 2; ++h) p16[h][i] = D::add(p16[h][i], wv[h], xv);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.d + 8 * h)));
      for (int i = 0; i < MR; ++i) {
        const __m256i isum = _mm256_add_epi32(_mm256_set1_epi32(-PQ4<D>::kOffset * x[i][b].sum), D::widen(p16[h][i]));
        acc[h][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(x[i][b].d)), acc[h][i]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    _mm256_storeu_ps(y, acc[0][i]);
    _mm256_storeu_ps(y + 8, acc[1][i]);
  }
}

template <class D, bool kQ4>
void matmul_panels(const MatmulArgs& a, int64_t n0, int64_t n1) {
  using P = std::conditional_t<kQ4, PQ4<D>, PQ8<D>>;
  using Block = typename P::Block;
  const int64_t nb = a.K / kQBlock;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nb;
    if constexpr (kQ4) {
      if (a.M > 1) {
        for_row_tiles<4>(0, a.M, [&](auto r, int64_t m) { tile_q4<D, decltype(r)::value>(a, panel, m, n); });
        continue;
      }
    }
    for_row_tiles<kPanelMR>(0, a.M, [&](auto r, int64_t m) { panel_tile<P, decltype(r)::value>(a, panel, m, n); });
  }
}

}  // namespace
}  // namespace pipit
