// 256-bit integer matmuls for the low-bit K-quant panels q2_kx16 / q3_kx16 (core/dtype.h) against BlockQ8Act rows,
// shared by the AVX2 level (matmul_kpanel_lowbit_avx2.cpp) and the AVX-VNNI level (x86/avxvnni/
// matmul_kpanel_lowbit_avxvnni.cpp) through the dot policy D (int8_dot_avx2.h), in the scheme of
// matmul_kpanel_avx2.h: a 64-byte chunk's 32-byte halves are rows 0-7 and 8-15, one int32 lane per row. Each byte
// holds 4 two-bit quants: vector (c, k) (shift by 2k, mask 3) meets activation dword 8k + 4c; vectors k < 2 are a
// group's first 16 weights, k >= 2 the second, each half with its own scale. With vpmaddubsw the int16 pair sums of
// a half are bounded: q2_K q <= 3, q3_K q + 4 hbit <= 7, 4 steps of 2 products with |a| <= 127: <= 7112.
//  - q2_K: isum = sc0 dot0 + sc1 dot1 (widen_scaled), msum = m0 sum0(a) + m1 sum1(a) by one vpmaddwd of the rows'
//    (m0, m1) int16 pairs with (sum0, sum1);
//  - q3_K: the dots of q + 4 hbit (unsigned), then isum = sc0 dot0 + sc1 dot1 - 4 (sc0 sum0(a) + sc1 sum1(a)), the
//    correction by one vpmaddwd of the (sc0, sc1) pairs: the exact sum of (q - 4 !hbit) a times the scales.
// Each lane then does the reference's f32 arithmetic in its order (kquant_ref.cpp): acc = fma(isum, d * da, acc)
// (q2_K: then acc = fma(msum, -(dmin * da), acc)). So every output equals ref bit for bit, whatever tile or level.
//
// Internal linkage (anonymous namespace): each level's instantiation is compiled with that level's target flags.
#pragma once

#include <type_traits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/prefetch.h"
#include "backends/cpu/x86/act_half_sums.h"
#include "backends/cpu/x86/avx2/int8_dot_avx2.h"

namespace pipit {
namespace {

constexpr int kLowbitMR = 3;  // activation rows per tile, as matmul_kpanel_avx2.h's kKPanelMR

inline __m256i lb_load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i lb_u8x8_to_epi32(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 lb_f16x8_to_ps(const f16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// (lo, hi) as the int16 pair of every lane.
inline __m256i lb_pair16(int32_t pair) { return _mm256_set1_epi32(pair); }
inline __m256i lb_pack_pairs(__m256i lo32, __m256i hi32) {
  return _mm256_or_si256(_mm256_and_si256(lo32, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(hi32, 16));
}
// Bit B of every byte moved to bit 2 (value 4): 16-bit shifts by at most 2 left or 5 right keep it inside its byte.
template <int B>
inline __m256i lb_bit_to_4(__m256i h) {
  if constexpr (B < 2) return _mm256_and_si256(_mm256_slli_epi16(h, 2 - B), _mm256_set1_epi8(4));
  else if constexpr (B == 2) return _mm256_and_si256(h, _mm256_set1_epi8(4));
  else return _mm256_and_si256(_mm256_srli_epi16(h, B - 2), _mm256_set1_epi8(4));
}

// Vector (c, k) of group g, half h: its 2-bit quants (q3_K: + 4 hbit, hm bit 4c + k).
template <int C, int Kq, class Block>
inline __m256i lb_vector(const Block& w, int g, int h) {
  const __m256i q = lb_load32(w.qs[g][C] + 32 * h);
  __m256i v = _mm256_and_si256(Kq ? _mm256_srli_epi16(q, 2 * Kq) : q, _mm256_set1_epi8(3));
  if constexpr (std::is_same_v<Block, BlockQ3_Kx16>)
    v = _mm256_or_si256(v, lb_bit_to_4<4 * C + Kq>(lb_load32(w.hm[g] + 32 * h)));
  return v;
}

template <class D, int C, int Kq, int MR, class Block>
inline void lb_step(const Block& w, int g, int h, const int8_t* const* xq, __m256i* p) {
  const __m256i v = lb_vector<C, Kq>(w, g, h);
  for (int i = 0; i < MR; ++i) p[i] = D::add(p[i], v, bcast_dword(xq[i] + 8 * Kq + 4 * C));
}

// The unscaled dots of group g's two halves (rows of half h) with MR activation rows, as int16 pairs or int32.
template <class D, int MR, class Block>
inline void lb_dots(const Block& w, int g, int h, const int8_t* const* xq, __m256i* plo, __m256i* phi) {
  for (int i = 0; i < MR; ++i) plo[i] = phi[i] = D::zero();
  lb_step<D, 0, 0, MR>(w, g, h, xq, plo);
  lb_step<D, 1, 0, MR>(w, g, h, xq, plo);
  lb_step<D, 0, 1, MR>(w, g, h, xq, plo);
  lb_step<D, 1, 1, MR>(w, g, h, xq, plo);
  lb_step<D, 0, 2, MR>(w, g, h, xq, phi);
  lb_step<D, 1, 2, MR>(w, g, h, xq, phi);
  lb_step<D, 0, 3, MR>(w, g, h, xq, phi);
  lb_step<D, 1, 3, MR>(w, g, h, xq, phi);
}

// Group g of rows 8h .. 8h+7 for MR activation rows, added into acc.
// pairs[i]: row i's (lo, hi) activation half sums of the group as an int16 pair (act_half_sums.h).
template <class D, int MR>
inline void lb_group(const BlockQ2_Kx16& w, __m256 d, __m256 dmin, int h, int g, const BlockQ8Act* const* xb,
                     const int8_t* const* xq, const int32_t* pairs, __m256* acc) {
  __m256i plo[MR], phi[MR];
  lb_dots<D, MR>(w, g, h, xq, plo, phi);
  const __m256i b0 = lb_u8x8_to_epi32(w.sc[2 * g] + 8 * h), b1 = lb_u8x8_to_epi32(w.sc[2 * g + 1] + 8 * h);
  const __m256i m4 = _mm256_set1_epi32(0xF);
  const __m256i s0 = D::scale(_mm256_and_si256(b0, m4)), s1 = D::scale(_mm256_and_si256(b1, m4));
  const __m256i mins = lb_pack_pairs(_mm256_srli_epi32(b0, 4), _mm256_srli_epi32(b1, 4));
  for (int i = 0; i < MR; ++i) {
    const __m256i isum = _mm256_add_epi32(D::widen_scaled(plo[i], s0), D::widen_scaled(phi[i], s1));
    const __m256i msum = _mm256_madd_epi16(mins, lb_pair16(pairs[i]));
    const __m256 da = _mm256_set1_ps(xb[i]->d);
    acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, da), acc[i]);
    acc[i] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(msum), acc[i]);
  }
}

template <class D, int MR>
inline void lb_group(const BlockQ3_Kx16& w, __m256 d, __m256, int h, int g, const BlockQ8Act* const* xb,
                     const int8_t* const* xq, const int32_t* pairs, __m256* acc) {
  __m256i plo[MR], phi[MR];
  lb_dots<D, MR>(w, g, h, xq, plo, phi);
  const __m256i c0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.sc[2 * g] + 8 * h)));
  const __m256i c1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.sc[2 * g + 1] + 8 * h)));
  const __m256i s0 = D::scale(c0), s1 = D::scale(c1), scs = lb_pack_pairs(c0, c1);
  for (int i = 0; i < MR; ++i) {
    const __m256i dots = _mm256_add_epi32(D::widen_scaled(plo[i], s0), D::widen_scaled(phi[i], s1));
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(scs, lb_pair16(pairs[i])), 2);  // 4 (sc0 sum0 + sc1 sum1)
    const __m256i isum = _mm256_sub_epi32(dots, corr);
    acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(xb[i]->d)), acc[i]);
  }
}

inline __m256 lb_dmin(const BlockQ2_Kx16& w, int h) { return lb_f16x8_to_ps(w.dmin + 8 * h); }
inline __m256 lb_dmin(const BlockQ3_Kx16&, int) { return _mm256_setzero_ps(); }

// y[m .. m+MR, n .. n+16) from the panel starting at `panel` (nsb super-blocks); pairs: the half-sum pairs of rows
// m .. (K / 32 a row).
template <class D, int MR, class Block>
inline void lowbit_tile(const MatmulArgs& a, const Block* panel, int64_t nsb, int64_t m, int64_t n,
                        const int32_t* pairs) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m256 acc[2][MR];
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < MR; ++i) acc[h][i] = _mm256_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const Block& w = panel[s];
    const __m256 d0 = lb_f16x8_to_ps(w.d), d1 = lb_f16x8_to_ps(w.d + 8);
    const __m256 dm0 = lb_dmin(w, 0), dm1 = lb_dmin(w, 1);
    for (int g = 0; g < 8; ++g) {
      prefetch_kpanel_share(panel, s, g);
      const BlockQ8Act* xb[MR];
      const int8_t* xq[MR];
      int32_t pg[MR];
      for (int i = 0; i < MR; ++i) {
        xb[i] = &x[i][8 * s + g];
        xq[i] = xb[i]->qs;
        pg[i] = pairs[i * 8 * nsb + 8 * s + g];
      }
      lb_group<D, MR>(w, d0, dm0, 0, g, xb, xq, pg, acc[0]);
      lb_group<D, MR>(w, d1, dm1, 1, g, xb, xq, pg, acc[1]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    _mm256_storeu_ps(y, acc[0][i]);
    _mm256_storeu_ps(y + 8, acc[1][i]);
  }
}

// Block: BlockQ2_Kx16 or BlockQ3_Kx16.
template <class D, class Block>
void matmul_lowbit_panels(const MatmulArgs& a, int64_t n0, int64_t n1) {
  const int64_t nsb = a.K / kQK;
  const ActHalfSums<int32_t> pairs(a, half_pair16);
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nsb;
    for_row_tiles<kLowbitMR>(0, a.M, [&](auto r, int64_t m) {
      lowbit_tile<D, decltype(r)::value>(a, panel, nsb, m, n, pairs.at(m));
    });
  }
}

}  // namespace
}  // namespace pipit
