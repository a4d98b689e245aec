// AVX512-VNNI matmuls for the K-quant panels q4_kx16 / q5_kx16 / q6_kx16 (core/dtype.h) against BlockQ8Act rows: the
// q4_0x16 scheme of matmul_panel_avx512.cpp with per-group scales. A 64-byte chunk holds 4 quant bytes of each of 16
// rows, so one vpdpbusd with a broadcast activation dword adds 4 products into each row's int32 lane: the 16 rows'
// exact group dots build up in one register, without horizontal sums and without int16 partial sums.
//  - q4_K / q5_K: the quants (0..15 / 0..31) are unsigned as vpdpbusd takes them;
//  - q6_K: q in 0..63 unsigned, and each 16-weight half's lanes start at -32 * (its activations' sum), so they hold
//    sum (q - 32) a; the halves are multiplied by their int8 scales in int32 (dot_q6_k_group exactly).
// Each lane then does the reference's f32 arithmetic in its order (backends/cpu/ref/kquant_ref.cpp):
// acc = fma(dot, (d * sc) * da, acc), acc = fma(-(dmin * m), da * sum(a), acc) for q4_K / q5_K, acc = fma(dot,
// d * da, acc) for q6_K; so every output equals ref bit for bit, whatever the tile or M.
// GEMM (prefill) is a register tile of 8 activation rows x 16 weight rows (q6_K: 6) or, for q4_K / q5_K, 5 rows x
// 2 panels (tile_mins); decode (M = 1) is tile() with one row.
#include <optional>
#include <type_traits>
#include <utility>

#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/prefetch.h"
#include "backends/cpu/x86/act_half_sums.h"
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

// GCC 12 warns "__Y may be used uninitialized" where _mm512_cvtph_ps / _mm512_cvtepi32_ps, inlined into the unrolled
// tiles, pass their _mm512_undefined_ps() (`__m512 __Y = __Y;`) as the unused merge source: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pipit::avx512 {

namespace {


inline __m512i bcast_dword(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512i load64(const uint8_t* p) { return _mm512_loadu_si512(p); }
// 16 per-row bytes -> 16 f32 / int32 lanes.
inline __m512 u8x16_to_ps(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512i s8x16_to_epi32(const int8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512 f16x16_to_ps(const f16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// Per panel type: group g's exact integer dots of the 16 rows with MR activation rows (xq: their 32 int8s).
struct PQ4K {
  using Block = BlockQ4_Kx16;
  static constexpr bool kMins = true;
  static constexpr int kMR = 8;  // activation rows per tile: 8 x (2 int + 1 f32 accumulators) of 32 registers
  // group g's weights as 8 unsigned vectors (tile_mins), numbered as q4_vector_x_offset (matmul_tiles.h) says
  static inline __m512i unpack(const Block& w, int g, int v) { return load_nibbles(w.qs[g][v / 2], v % 2); }
  template <int MR>
  static inline void dots(const Block& w, int g, const BlockQ8Act* const* xb, const HalfBias* const*, __m512i* isum) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i ihi[MR];  // a second chain per row: with one row, 8 dependent vpdpbusd would bound the speed
    for (int i = 0; i < MR; ++i) isum[i] = ihi[i] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {  // chunk c: low nibbles are weights 4c.., high nibbles 16 + 4c..
      const __m512i v = load64(w.qs[g][c]);
      const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      for (int i = 0; i < MR; ++i) {
        isum[i] = _mm512_dpbusd_epi32(isum[i], lo, bcast_dword(xb[i]->qs + 4 * c));
        ihi[i] = _mm512_dpbusd_epi32(ihi[i], hi, bcast_dword(xb[i]->qs + 16 + 4 * c));
      }
    }
    for (int i = 0; i < MR; ++i) isum[i] = _mm512_add_epi32(isum[i], ihi[i]);
  }
};

struct PQ5K {
  using Block = BlockQ5_Kx16;
  static constexpr bool kMins = true;
  static constexpr int kMR = 8;
  static inline __m512i unpack(const Block& w, int g, int v) {  // as PQ4K's, with the fifth bits as in dots
    const int c = v / 2;
    const __m512i qh = load64(w.qh[g]);
    const __m512i fifth = v % 2 ? _mm512_srli_epi16(qh, c) : _mm512_slli_epi16(qh, 4 - c);
    return _mm512_or_si512(load_nibbles(w.qs[g][c], v % 2), _mm512_and_si512(fifth, _mm512_set1_epi8(0x10)));
  }
  template <int MR>
  static inline void dots(const Block& w, int g, const BlockQ8Act* const* xb, const HalfBias* const*, __m512i* isum) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    const __m512i qh = load64(w.qh[g]);
    __m512i ihi[MR];
    for (int i = 0; i < MR; ++i) isum[i] = ihi[i] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i v = load64(w.qs[g][c]);
      // fifth bits: bit c -> 4 (low nibbles' weights), bit 4 + c -> 4 (high); a 16-bit shift by at most 4 keeps
      // each byte's bit inside its byte, and the 0x10 mask drops what crossed from the neighbour
      const __m512i hlo = _mm512_and_si512(_mm512_slli_epi16(qh, 4 - c), b4);
      const __m512i hhi = _mm512_and_si512(_mm512_srli_epi16(qh, c), b4);
      const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), hlo);
      const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), hhi);
      for (int i = 0; i < MR; ++i) {
        isum[i] = _mm512_dpbusd_epi32(isum[i], lo, bcast_dword(xb[i]->qs + 4 * c));
        ihi[i] = _mm512_dpbusd_epi32(ihi[i], hi, bcast_dword(xb[i]->qs + 16 + 4 * c));
      }
    }
    for (int i = 0; i < MR; ++i) isum[i] = _mm512_add_epi32(isum[i], ihi[i]);
  }
};

struct PQ6K {
  using Block = BlockQ6_Kx16;
  static constexpr bool kMins = false;
  static constexpr int kMR = 6;  // 8 would spill: the unpacking needs more registers than q4_K's
  template <int MR>
  static inline void dots(const Block& w, int g, const BlockQ8Act* const* xb, const HalfBias* const* bias,
                          __m512i* isum) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x30);
    __m512i plo[MR], phi[MR];  // weights 0-15 / 16-31 of the group (the two scales' halves)
    for (int i = 0; i < MR; ++i) {
      plo[i] = _mm512_set1_epi32(bias[i]->lo);
      phi[i] = _mm512_set1_epi32(bias[i]->hi);
    }
    for (int p = 0; p < 2; ++p) {
      const __m512i qh = load64(w.qh[g][p]);
      for (int j = 0; j < 2; ++j) {
        const int c = 2 * p + j;
        const __m512i v = load64(w.ql[g][c]);
        // top bits 2j..2j+1 (low nibbles' weights) and 4+2j..5+2j (high) -> bits 4..5
        const __m512i tlo = _mm512_and_si512(_mm512_slli_epi16(qh, 4 - 2 * j), m2);
        const __m512i thi = _mm512_and_si512(j ? _mm512_srli_epi16(qh, 2) : qh, m2);
        const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), tlo);
        const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), thi);
        for (int i = 0; i < MR; ++i) {
          plo[i] = _mm512_dpbusd_epi32(plo[i], lo, bcast_dword(xb[i]->qs + 4 * c));
          phi[i] = _mm512_dpbusd_epi32(phi[i], hi, bcast_dword(xb[i]->qs + 16 + 4 * c));
        }
      }
    }
    const __m512i s0 = s8x16_to_epi32(w.sc[2 * g]), s1 = s8x16_to_epi32(w.sc[2 * g + 1]);
    for (int i = 0; i < MR; ++i)
      isum[i] = _mm512_add_epi32(_mm512_mullo_epi32(plo[i], s0), _mm512_mullo_epi32(phi[i], s1));
  }
};

// y[m .. m+MR, n .. n+16) from the panel starting at `panel` (nsb super-blocks).
// bias: q6_K's HalfBias rows (K / 32 a row) from row m on; nullptr for the others.
template <class P, int MR>
inline void tile(const MatmulArgs& a, const typename P::Block* panel, int64_t nsb, int64_t m, int64_t n,
                 const HalfBias* bias) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const auto& w = panel[s];
    const __m512 d = f16x16_to_ps(w.d);
    __m512 dmin = _mm512_setzero_ps();
    if constexpr (P::kMins) dmin = f16x16_to_ps(w.dmin);
    for (int g = 0; g < 8; ++g) {
      prefetch_kpanel_share(panel, s, g);
      const BlockQ8Act* xb[MR];
      const HalfBias* bb[MR] = {};
      for (int i = 0; i < MR; ++i) {
        xb[i] = &x[i][8 * s + g];
        if (bias) bb[i] = bias + i * 8 * nsb + 8 * s + g;
      }
      __m512i isum[MR];
      P::template dots<MR>(w, g, xb, bb, isum);
      if constexpr (P::kMins) {
        const __m512 sc = _mm512_mul_ps(d, u8x16_to_ps(w.sc[g])), mn = _mm512_mul_ps(dmin, u8x16_to_ps(w.m[g]));
        for (int i = 0; i < MR; ++i) {
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(sc, _mm512_set1_ps(xb[i]->d)), acc[i]);
          acc[i] = _mm512_fnmadd_ps(mn, _mm512_set1_ps(xb[i]->d * float(xb[i]->sum)), acc[i]);
        }
      } else {
        for (int i = 0; i < MR; ++i)
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(d, _mm512_set1_ps(xb[i]->d)), acc[i]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    _mm512_storeu_ps(reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n, acc[i]);
}

// q4_K / q5_K GEMM: y[m .. m+MR, n .. n+16 NP) from the NP panels starting at `panel`, as the q4_0 tiles of
// matmul_panel_avx512.cpp: every activation broadcast feeds NP vpdpbusd, every unpacked weight vector MR, one
// integer chain per output. Each lane's f32 arithmetic is tile()'s, so outputs stay ref's bits. NP = 2, MR = 5
// (kernels_bench gemm K=1024 N=3072 M=512, 1 thread, best of 6: q4_kx16 6.6 -> 5.9 ms, q5_kx16 7.2 -> 6.2 against
// tile()'s 1 x 8 with two chains; 3 x 4 spilled, 3 x 3, 2 x 4 and 2 x 6 were no faster).
template <class P, int NP, int MR>
inline void tile_mins(const MatmulArgs& a, const typename P::Block* panel, int64_t nsb, int64_t m, int64_t n) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m512 acc[NP][MR];
  for (int j = 0; j < NP; ++j)
    for (int i = 0; i < MR; ++i) acc[j][i] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    for (int g = 0; g < 8; ++g) {
      for (int j = 0; j < NP; ++j) prefetch_kpanel_share(panel + j * nsb, s, g);
      const BlockQ8Act* xb[MR];
      for (int i = 0; i < MR; ++i) xb[i] = &x[i][8 * s + g];
      __m512i isum[NP][MR];
      for (int j = 0; j < NP; ++j)
        for (int i = 0; i < MR; ++i) isum[j][i] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {  // unrolled: v selects the unpacking
        __m512i wv[NP];
        for (int j = 0; j < NP; ++j) wv[j] = P::unpack(panel[j * nsb + s], g, v);
        for (int i = 0; i < MR; ++i) {
          const __m512i xv = bcast_dword(xb[i]->qs + q4_vector_x_offset(v));
          for (int j = 0; j < NP; ++j) isum[j][i] = _mm512_dpbusd_epi32(isum[j][i], wv[j], xv);
        }
      }
      for (int j = 0; j < NP; ++j) {
        const auto& w = panel[j * nsb + s];
        const __m512 sc = _mm512_mul_ps(f16x16_to_ps(w.d), u8x16_to_ps(w.sc[g]));
        const __m512 mn = _mm512_mul_ps(f16x16_to_ps(w.dmin), u8x16_to_ps(w.m[g]));
        for (int i = 0; i < MR; ++i) {
          acc[j][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j][i]), _mm512_mul_ps(sc, _mm512_set1_ps(xb[i]->d)), acc[j][i]);
          acc[j][i] = _mm512_fnmadd_ps(mn, _mm512_set1_ps(xb[i]->d * float(xb[i]->sum)), acc[j][i]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    for (int j = 0; j < NP; ++j) _mm512_storeu_ps(y + 16 * j, acc[j][i]);
  }
}

template <class P, int NP>
inline void rows_mins(const MatmulArgs& a, const typename P::Block* panel, int64_t nsb, int64_t n) {
  for_row_tiles<5>(0, a.M, [&](auto r, int64_t m) { tile_mins<P, NP, decltype(r)::value>(a, panel, nsb, m, n); });
}

// tile() over [n0, n1) one panel at a time: decode, and q6_K's GEMM
template <class P>
void matmul_rows(const MatmulArgs& a, int64_t n0, int64_t n1) {
  using Block = typename P::Block;
  const int64_t nsb = a.K / kQK;
  // q6_K's lanes start at -32 * each half's activation sum (backends/cpu/x86/act_half_sums.h)
  std::optional<ActHalfSums<HalfBias>> bias;
  if constexpr (std::is_same_v<P, PQ6K>) bias.emplace(a, [](int32_t lo, int32_t hi) { return HalfBias{-32 * lo, -32 * hi}; });
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16 (ops.cpp splits in 16-row chunks)
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nsb;
    for_row_tiles<P::kMR>(0, a.M, [&](auto r, int64_t m) {
      tile<P, decltype(r)::value>(a, panel, nsb, m, n, bias ? bias->at(m) : nullptr);
    });
  }
}

// Decode of 2..8 sequences at once (the server's continuous batching): all rows against one panel at a time, so
// each weight vector is unpacked once for every row.
template <class P, int... MR>
inline bool decode_rows_mins(const MatmulArgs& a, const typename P::Block* w, int64_t nsb, int64_t n0, int64_t n1,
                             std::integer_sequence<int, MR...>) {
  auto run = [&](auto r) {
    for (int64_t n = n0; n < n1; n += kPanelRows)
      tile_mins<P, 1, decltype(r)::value>(a, w + (n / kPanelRows) * nsb, nsb, 0, n);
    return true;
  };
  return ((a.M == MR + 2 ? run(std::integral_constant<int, MR + 2>{}) : false) || ...);
}

template <class P>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  if constexpr (P::kMins) {
    if (a.M > 1) {  // prefill; decode stays on tile<P, 1> (two chains, one panel at a time)
      using Block = typename P::Block;
      const int64_t nsb = a.K / kQK;
      const Block* w = static_cast<const Block*>(a.w);
      if (a.M <= 8 && decode_rows_mins<P>(a, w, nsb, n0, n1, std::make_integer_sequence<int, 7>{})) return;
      int64_t n = n0;
      for (; n + 2 * kPanelRows <= n1; n += 2 * kPanelRows) rows_mins<P, 2>(a, w + (n / kPanelRows) * nsb, nsb, n);
      if (n < n1) rows_mins<P, 1>(a, w + (n / kPanelRows) * nsb, nsb, n);
      return;
    }
  }
  matmul_rows<P>(a, n0, n1);
}

}  // namespace

void matmul_q4_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4K>(a, n0, n1); }
void matmul_q5_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ5K>(a, n0, n1); }
void matmul_q6_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ6K>(a, n0, n1); }

}  // namespace pipit::avx512
