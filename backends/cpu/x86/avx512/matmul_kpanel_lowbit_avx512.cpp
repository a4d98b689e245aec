// AVX512-VNNI matmuls for the low-bit K-quant panels q2_kx16 / q3_kx16 (core/dtype.h) against BlockQ8Act rows, in
// the scheme of matmul_kpanel_avx512.cpp: a 64-byte chunk holds 4 quant bytes of each of 16 rows, each byte 4 two-bit
// quants; vector (c, k) of a group (shift by 2k, mask 3) meets activation dword 8k + 4c, so one vpdpbusd with that
// dword broadcast adds 4 products into each row's int32 lane. Vectors k < 2 are the group's first 16 weights, k >= 2
// the second: the two halves (each with its own scale) build up in separate lanes, no horizontal sums.
//  - q2_K: q 0..3 unsigned as vpdpbusd takes it; the halves times their 4-bit scales in int32; the mins' term
//    m0 sum0(a) + m1 sum1(a) is one vpmaddwd of the 16 rows' (m0, m1) int16 pairs with the (sum0, sum1) pair;
//  - q3_K: q + 4 hbit in 0..7 unsigned, and each half's lanes start at -4 * (its activations' sum), so they hold
//    sum (q - 4 !hbit) a; then times the signed scales in int32.
// Each lane then does the reference's f32 arithmetic in its order (backends/cpu/ref/kquant_ref.cpp): acc = fma(isum,
// d * da, acc) (q2_K: then acc = fma(msum, -(dmin * da), acc)), so every output equals ref bit for bit, whatever
// the tile or M. Tiles: 6 activation rows x 16 weight rows (8 spill: two half sums per row); decode is one row.
#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/prefetch.h"
#include "backends/cpu/x86/act_half_sums.h"
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

// GCC 12's false "may be used uninitialized" on the intrinsics' undefined merge sources (matmul_kpanel_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pipit::avx512 {

namespace {

constexpr int kMR = 6;

inline __m512i bcast_dword(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512i load64(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline __m512i u8x16_to_epi32(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512 f16x16_to_ps(const f16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// Bit b of every byte moved to bit 2 (q3_K's high bit as +4): 16-bit shifts by at most 2 left or 5 right keep the
// bit inside its byte, and the mask drops what crossed from the neighbour.
template <int B>
inline __m512i bit_to_4(__m512i h) {
  if constexpr (B < 2) return _mm512_and_si512(_mm512_slli_epi16(h, 2 - B), _mm512_set1_epi8(4));
  else if constexpr (B == 2) return _mm512_and_si512(h, _mm512_set1_epi8(4));
  else return _mm512_and_si512(_mm512_srli_epi16(h, B - 2), _mm512_set1_epi8(4));
}

// The 8 weight vectors of group g: v[2k + c] = vector (c, k) (unsigned bytes; q3_K with its high bit as +4).
template <class Block, bool kHigh>
inline void unpack(const Block& w, int g, __m512i* v) {
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m512i q0 = load64(w.qs[g][0]), q1 = load64(w.qs[g][1]);
  v[0] = _mm512_and_si512(q0, m3);
  v[1] = _mm512_and_si512(q1, m3);
  v[2] = _mm512_and_si512(_mm512_srli_epi16(q0, 2), m3);
  v[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 2), m3);
  v[4] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m3);
  v[5] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m3);
  v[6] = _mm512_and_si512(_mm512_srli_epi16(q0, 6), m3);
  v[7] = _mm512_and_si512(_mm512_srli_epi16(q1, 6), m3);
  if constexpr (kHigh) {  // hm bit 4c + k of vector (c, k)
    const __m512i h = load64(w.hm[g]);
    v[0] = _mm512_or_si512(v[0], bit_to_4<0>(h));
    v[1] = _mm512_or_si512(v[1], bit_to_4<4>(h));
    v[2] = _mm512_or_si512(v[2], bit_to_4<1>(h));
    v[3] = _mm512_or_si512(v[3], bit_to_4<5>(h));
    v[4] = _mm512_or_si512(v[4], bit_to_4<2>(h));
    v[5] = _mm512_or_si512(v[5], bit_to_4<6>(h));
    v[6] = _mm512_or_si512(v[6], bit_to_4<3>(h));
    v[7] = _mm512_or_si512(v[7], bit_to_4<7>(h));
  }
}

// The two halves' dots of group g for MR activation rows into plo / phi (which hold their start values).
template <int MR>
inline void half_dots(const __m512i* v, const BlockQ8Act* const* xb, __m512i* plo, __m512i* phi) {
  for (int i = 0; i < MR; ++i) {
    const int8_t* q = xb[i]->qs;
    plo[i] = _mm512_dpbusd_epi32(plo[i], v[0], bcast_dword(q + 0));
    phi[i] = _mm512_dpbusd_epi32(phi[i], v[4], bcast_dword(q + 16));
    plo[i] = _mm512_dpbusd_epi32(plo[i], v[1], bcast_dword(q + 4));
    phi[i] = _mm512_dpbusd_epi32(phi[i], v[5], bcast_dword(q + 20));
    plo[i] = _mm512_dpbusd_epi32(plo[i], v[2], bcast_dword(q + 8));
    phi[i] = _mm512_dpbusd_epi32(phi[i], v[6], bcast_dword(q + 24));
    plo[i] = _mm512_dpbusd_epi32(plo[i], v[3], bcast_dword(q + 12));
    phi[i] = _mm512_dpbusd_epi32(phi[i], v[7], bcast_dword(q + 28));
  }
}

// y[m .. m+MR, n .. n+16) from the q2_kx16 panel starting at `panel` (nsb super-blocks).
// pairs: each row's (lo, hi) half sums per group as one int16 pair (MinPairs), from row m on.
using MinPair = int32_t;
template <int MR>
inline void tile_q2k(const MatmulArgs& a, const BlockQ2_Kx16* panel, int64_t nsb, int64_t m, int64_t n,
                     const MinPair* pairs) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi32(0xF);
  for (int64_t s = 0; s < nsb; ++s) {
    const auto& w = panel[s];
    const __m512 d = f16x16_to_ps(w.d), dmin = f16x16_to_ps(w.dmin);
    for (int g = 0; g < 8; ++g) {
      prefetch_kpanel_share(panel, s, g);
      const BlockQ8Act* xb[MR];
      for (int i = 0; i < MR; ++i) xb[i] = &x[i][8 * s + g];
      __m512i v[8];
      unpack<BlockQ2_Kx16, false>(w, g, v);
      __m512i plo[MR], phi[MR];
      for (int i = 0; i < MR; ++i) plo[i] = phi[i] = _mm512_setzero_si512();
      half_dots<MR>(v, xb, plo, phi);
      const __m512i b0 = u8x16_to_epi32(w.sc[2 * g]), b1 = u8x16_to_epi32(w.sc[2 * g + 1]);
      const __m512i s0 = _mm512_and_si512(b0, m4), s1 = _mm512_and_si512(b1, m4);
      // (m0, m1) as the int16 pair of each row's lane
      const __m512i mins = _mm512_or_si512(_mm512_srli_epi32(b0, 4), _mm512_slli_epi32(_mm512_srli_epi32(b1, 4), 16));
      for (int i = 0; i < MR; ++i) {
        const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(plo[i], s0), _mm512_mullo_epi32(phi[i], s1));
        const __m512i pair = _mm512_set1_epi32(pairs[i * 8 * nsb + 8 * s + g]);  // (lo, hi)
        const __m512i msum = _mm512_madd_epi16(mins, pair);
        const __m512 da = _mm512_set1_ps(xb[i]->d);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, da), acc[i]);
        acc[i] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(msum), acc[i]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    _mm512_storeu_ps(reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n, acc[i]);
}

// y[m .. m+MR, n .. n+16) from the q3_kx16 panel starting at `panel` (nsb super-blocks).
// bias: each row's -4 * (lo, hi) half sums per group, from row m on.
template <int MR>
inline void tile_q3k(const MatmulArgs& a, const BlockQ3_Kx16* panel, int64_t nsb, int64_t m, int64_t n,
                     const HalfBias* bias) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const auto& w = panel[s];
    const __m512 d = f16x16_to_ps(w.d);
    for (int g = 0; g < 8; ++g) {
      prefetch_kpanel_share(panel, s, g);
      const BlockQ8Act* xb[MR];
      for (int i = 0; i < MR; ++i) xb[i] = &x[i][8 * s + g];
      __m512i v[8];
      unpack<BlockQ3_Kx16, true>(w, g, v);
      __m512i plo[MR], phi[MR];
      for (int i = 0; i < MR; ++i) {  // q + 4 hbit - 4 = the signed value: start at -4 sum(a)
        const HalfBias& h = bias[i * 8 * nsb + 8 * s + g];
        plo[i] = _mm512_set1_epi32(h.lo);
        phi[i] = _mm512_set1_epi32(h.hi);
      }
      half_dots<MR>(v, xb, plo, phi);
      const __m512i s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.sc[2 * g])));
      const __m512i s1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.sc[2 * g + 1])));
      for (int i = 0; i < MR; ++i) {
        const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(plo[i], s0), _mm512_mullo_epi32(phi[i], s1));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(xb[i]->d)), acc[i]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    _mm512_storeu_ps(reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n, acc[i]);
}

// Per type: its per-half table entry (backends/cpu/x86/act_half_sums.h) and tile.
struct TQ2K {
  using Block = BlockQ2_Kx16;
  using Entry = MinPair;
  static Entry form(int32_t lo, int32_t hi) { return half_pair16(lo, hi); }
  template <int MR>
  static void tile(const MatmulArgs& a, const Block* p, int64_t nsb, int64_t m, int64_t n, const Entry* e) {
    tile_q2k<MR>(a, p, nsb, m, n, e);
  }
};
struct TQ3K {
  using Block = BlockQ3_Kx16;
  using Entry = HalfBias;
  static Entry form(int32_t lo, int32_t hi) { return {-4 * lo, -4 * hi}; }
  template <int MR>
  static void tile(const MatmulArgs& a, const Block* p, int64_t nsb, int64_t m, int64_t n, const Entry* e) {
    tile_q3k<MR>(a, p, nsb, m, n, e);
  }
};

template <class T>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  using Block = typename T::Block;
  const int64_t nsb = a.K / kQK;
  const ActHalfSums<typename T::Entry> halves(a, T::form);
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16 (ops.cpp splits in 16-row chunks)
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nsb;
    for_row_tiles<kMR>(0, a.M, [&](auto r, int64_t m) {
      T::template tile<decltype(r)::value>(a, panel, nsb, m, n, halves.at(m));
    });
  }
}

}  // namespace

void matmul_q2_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<TQ2K>(a, n0, n1); }
void matmul_q3_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<TQ3K>(a, n0, n1); }

}  // namespace pipit::avx512
