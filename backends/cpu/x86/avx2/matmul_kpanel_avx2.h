// 256-bit integer matmuls for the K-quant panels q4_kx16 / q5_kx16 / q6_kx16 (core/dtype.h) against BlockQ8Act
// rows, shared by the AVX2 level (matmul_kpanel_avx2.cpp) and the AVX-VNNI level (x86/avxvnni/
// matmul_kpanel_avxvnni.cpp) through the dot policy D (int8_dot_avx2.h): the q4_0x16 scheme (matmul_panel_avx2.h)
// with per-group scales. A 64-byte chunk holds 4 quant bytes of each of 16
// rows; its 32-byte halves are rows 0-7 and 8-15, one int32 lane per row, and each activation dword is broadcast, so
// there is no horizontal reduction anywhere. Per 32-weight group g, for each row lane, vpmaddubsw's int16 pair sums
// are added up without saturating (with vpdpbusd the sums are int32 from the start):
//  - q4_K: nibbles <= 15, a pair sum <= 2 * 15 * 127: all 16 products of a lane add up to <= 30480;
//  - q5_K: q <= 31, a pair sum <= 7874: the low-nibble (weights 0-15) and high-nibble (16-31) halves are summed
//    separately (<= 31496 each), then widened and added in int32;
//  - q6_K: q - 32 in [-32, 31] is signed, so |q| x sign(a, q) (a pair sum <= 2 * 32 * 127): the two 16-weight
//    halves (<= 32512 each) are widened by vpmaddwd with their int8 scales, which gives dot_q6_k_group exactly.
// The integer group dot is exact, and each lane then does the reference's f32 arithmetic in its order
// (kquant_ref.cpp): acc = fma(dot, (d * sc) * da, acc), acc = fma(-(dmin * m), da * sum(a), acc) for q4_K / q5_K,
// acc = fma(dot, d * da, acc) for q6_K. So every output equals ref bit for bit, whatever the tile, M or level.
//
// Internal linkage (anonymous namespace): each level's instantiation is compiled with that level's target flags.
#pragma once

#include <type_traits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/prefetch.h"
#include "backends/cpu/x86/avx2/int8_dot_avx2.h"

namespace pipit {
namespace {

// Activation rows per tile (x 2 row halves: 6 accumulators, 3-6 partial sums). kernels_bench gemm q*_kx16 K=1024
// N=3072 M=512, 1 thread, 2 -> 3 rows: AVX-VNNI q4_K 20.3 -> 15.7 ms, q5_K 24.2 -> 21.5, q6_K 34.3 -> 27; AVX2
// q6_K 38.2 -> 28, q4_K / q5_K within the noise (29-34 ms either way). 4 rows: no faster (spills).
constexpr int kKPanelMR = 3;
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// 8 bytes (one per row of a half) -> 8 f32 lanes.
inline __m256 u8x8_to_ps(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 f16x8_to_ps(const f16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Per panel type: per super-block row-half constants (Head), and per group the exact integer dots of the 8 rows of
// half h with MR activation rows (isum), then the f32 update of the accumulators.
struct MinsHead {  // q4_K / q5_K: the 8 rows' d and dmin
  __m256 d, dmin;
  template <class Block>
  MinsHead(const Block& w, int h) : d(f16x8_to_ps(w.d + 8 * h)), dmin(f16x8_to_ps(w.dmin + 8 * h)) {}
};

template <class D>
struct PQ4K {
  using Block = BlockQ4_Kx16;
  using Head = MinsHead;
  static constexpr bool kMins = true;
  template <int MR>
  static inline void dots(const Block& w, int h, int g, const int8_t* const* xq, __m256i* isum) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i p[MR];
    for (int i = 0; i < MR; ++i) p[i] = D::zero();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load32(w.qs[g][c] + 32 * h);
      const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      for (int i = 0; i < MR; ++i) {
        p[i] = D::add(p[i], lo, bcast_dword(xq[i] + 4 * c));
        p[i] = D::add(p[i], hi, bcast_dword(xq[i] + 16 + 4 * c));
      }
    }
    for (int i = 0; i < MR; ++i) isum[i] = D::widen(p[i]);
  }
};

template <class D>
struct PQ5K {
  using Block = BlockQ5_Kx16;
  using Head = MinsHead;
  static constexpr bool kMins = true;
  template <int MR>
  static inline void dots(const Block& w, int h, int g, const int8_t* const* xq, __m256i* isum) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    const __m256i qh = load32(w.qh[g] + 32 * h);
    __m256i plo[MR], phi[MR];
    for (int i = 0; i < MR; ++i) plo[i] = phi[i] = D::zero();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load32(w.qs[g][c] + 32 * h);
      // fifth bits: bit c -> 4 (low nibbles), bit 4 + c -> 4 (high); a 16-bit shift by at most 4 keeps each
      // byte's bit inside its byte, and the 0x10 mask drops what crossed from the neighbour
      const __m256i hlo = _mm256_and_si256(_mm256_slli_epi16(qh, 4 - c), b4);
      const __m256i hhi = _mm256_and_si256(_mm256_srli_epi16(qh, c), b4);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), hlo);
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), hhi);
      for (int i = 0; i < MR; ++i) {
        plo[i] = D::add(plo[i], lo, bcast_dword(xq[i] + 4 * c));
        phi[i] = D::add(phi[i], hi, bcast_dword(xq[i] + 16 + 4 * c));
      }
    }
    for (int i = 0; i < MR; ++i) isum[i] = _mm256_add_epi32(D::widen(plo[i]), D::widen(phi[i]));
  }
};

template <class D>
struct PQ6K {
  using Block = BlockQ6_Kx16;
  struct Head {
    __m256 d;
    Head(const Block& w, int h) : d(f16x8_to_ps(w.d + 8 * h)) {}
  };
  static constexpr bool kMins = false;
  // Scales of 16-weight group j for the 8 rows of half h, one int32 lane per row.
  static inline __m256i scales(const Block& w, int j, int h) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.sc[j] + 8 * h)));
  }
  template <int MR>
  static inline void dots(const Block& w, int h, int g, const int8_t* const* xq, __m256i* isum) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    __m256i plo[MR], phi[MR];
    for (int i = 0; i < MR; ++i) plo[i] = phi[i] = D::zero();
    for (int p = 0; p < 2; ++p) {
      const __m256i qh = load32(w.qh[g][p] + 32 * h);
      for (int j = 0; j < 2; ++j) {
        const int c = 2 * p + j;
        const __m256i v = load32(w.ql[g][c] + 32 * h);
        // top bits 2j..2j+1 (low nibbles' weights) and 4+2j..5+2j (high) -> 4..5, then q - 32
        const __m256i tlo = _mm256_and_si256(_mm256_slli_epi16(qh, 4 - 2 * j), m2);
        const __m256i thi = _mm256_and_si256(j ? _mm256_srli_epi16(qh, 2) : qh, m2);
        const __m256i lo = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(v, m4), tlo), k32);
        const __m256i hi = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), thi), k32);
        const __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
        for (int i = 0; i < MR; ++i) {
          const __m256i slo = _mm256_sign_epi8(bcast_dword(xq[i] + 4 * c), lo);
          const __m256i shi = _mm256_sign_epi8(bcast_dword(xq[i] + 16 + 4 * c), hi);
          plo[i] = D::add(plo[i], alo, slo);
          phi[i] = D::add(phi[i], ahi, shi);
        }
      }
    }
    const __m256i s0 = D::scale(scales(w, 2 * g, h)), s1 = D::scale(scales(w, 2 * g + 1, h));
    for (int i = 0; i < MR; ++i) isum[i] = _mm256_add_epi32(D::widen_scaled(plo[i], s0), D::widen_scaled(phi[i], s1));
  }
};

// The f32 update of one group for MR activation rows (the reference's order per lane; see the top comment).
template <int MR>
inline void update_mins(const MinsHead& hd, const uint8_t* sc, const uint8_t* m, const BlockQ8Act* const* xb,
                        const __m256i* isum, __m256* acc) {
  const __m256 s = _mm256_mul_ps(hd.d, u8x8_to_ps(sc)), mn = _mm256_mul_ps(hd.dmin, u8x8_to_ps(m));
  for (int i = 0; i < MR; ++i) {
    acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(s, _mm256_set1_ps(xb[i]->d)), acc[i]);
    acc[i] = _mm256_fnmadd_ps(mn, _mm256_set1_ps(xb[i]->d * float(xb[i]->sum)), acc[i]);
  }
}

template <class P, int MR>
inline void group(const typename P::Block& w, const typename P::Head& hd, int h, int g, const BlockQ8Act* const* xb,
                  __m256* acc) {
  const int8_t* xq[MR];
  for (int i = 0; i < MR; ++i) xq[i] = xb[i]->qs;
  __m256i isum[MR];
  P::template dots<MR>(w, h, g, xq, isum);
  if constexpr (!P::kMins) {
    for (int i = 0; i < MR; ++i)
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(hd.d, _mm256_set1_ps(xb[i]->d)), acc[i]);
  } else {
    update_mins<MR>(hd, w.sc[g] + 8 * h, w.m[g] + 8 * h, xb, isum, acc);
  }
}

// y[m .. m+MR, n .. n+16) from the panel starting at `panel` (nsb super-blocks).
template <class P, int MR>
inline void kpanel_tile(const MatmulArgs& a, const typename P::Block* panel, int64_t nsb, int64_t m, int64_t n) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m256 acc[2][MR];
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < MR; ++i) acc[h][i] = _mm256_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const auto& w = panel[s];
    const typename P::Head h0(w, 0), h1(w, 1);
    for (int g = 0; g < 8; ++g) {
      prefetch_kpanel_share(panel, s, g);
      const BlockQ8Act* xb[MR];
      for (int i = 0; i < MR; ++i) xb[i] = &x[i][8 * s + g];
      group<P, MR>(w, h0, 0, g, xb, acc[0]);
      group<P, MR>(w, h1, 1, g, xb, acc[1]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    _mm256_storeu_ps(y, acc[0][i]);
    _mm256_storeu_ps(y + 8, acc[1][i]);
  }
}

// P: PQ4K<D>, PQ5K<D> or PQ6K<D>.
template <class P>
void matmul_kpanels(const MatmulArgs& a, int64_t n0, int64_t n1) {
  using Block = typename P::Block;
  const int64_t nsb = a.K / kQK;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nsb;
    for_row_tiles<kKPanelMR>(0, a.M, [&](auto r, int64_t m) { kpanel_tile<P, decltype(r)::value>(a, panel, nsb, m, n); });
  }
}

}  // namespace
}  // namespace pipit
