// AVX512-VNNI matmuls for the row-interleaved panel dtypes q4_0x16 / q8_0x16 / mxfp4x16 / iq4_nlx16 / q4_1x16 /
// q5_0x16 / q5_1x16 (core/dtype.h) against BlockQ8Act rows.
// A 64-byte load of a panel block holds 4 quant bytes of each of 16 weight rows, so one vpdpbusd with a broadcast
// activation dword adds 4 products into each of 16 lanes, lane r belonging to row r: 8 of them give the 16 rows'
// exact block dot products in one register, without horizontal sums. vpdpbusd multiplies unsigned by signed bytes:
// q4 nibbles are unsigned already (q = w + 8), q8 bytes become w + 128 by xor 0x80, mxfp4 nibbles their doubled
// E2M1 value + 12 in [0, 24] by one vpshufb from a 16-entry table (kMxfp4Int8 + 12), iq4_nl nibbles their grid
// value + 128 (kIq4Values + 128, 1..241) the same way; the lanes start at -offset * sum(a) (BlockQ8Act::sum) so
// they hold the signed dot. Then, per block, f32 acc += float(dot) * (d_w d_a).
// GEMM (prefill) is a register tile of up to 4 activation rows x 3 panels (48 weight rows): every unpacked weight
// vector feeds 4 vpdpbusd and every activation broadcast 3 (Zen 5: 1.36x the 8 rows x 1 panel tile, the f32 scale
// work per block being the same). Decode (M = 1) is the same code with one row and one panel, streaming a thread's
// panels in address order.
// Each row's arithmetic is the same whatever M is: results do not depend on how many rows share the batch.
#include <utility>

#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/prefetch.h"
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

// Panel formats: the weight bytes of one block in 8 vectors, each 4 quant values of each of the 16 rows, unsigned
// (unpack(w, v)), where the 4 activation bytes that vector v multiplies start (x_offset(v)), and the 16 rows' block
// scales (scale(w)).
inline __m512 f16_scales(const f16_t* d) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d)));
}
struct PQ4 {
  using Block = BlockQ4_0x16;
  static constexpr int kOffset = 8;
  static constexpr bool kMins = false;
  // the vectors as q4_vector_x_offset (matmul_tiles.h) numbers them
  static inline __m512i unpack(const Block& w, int v) { return load_nibbles(w.qs + 64 * (v / 2), v % 2); }
  static constexpr int x_offset(int v) { return q4_vector_x_offset(v); }
  static inline __m512 scale(const Block& w) { return f16_scales(w.d); }
};
struct PMX {
  using Block = BlockMXFP4x16;
  static constexpr int kOffset = 12;
  static constexpr bool kMins = false;
  static inline __m512i unpack(const Block& w, int v) {
    const __m128i lut4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Int8));
    const __m512i lut = _mm512_broadcast_i32x4(_mm_add_epi8(lut4, _mm_set1_epi8(kOffset)));
    return _mm512_shuffle_epi8(lut, load_nibbles(w.qs + 64 * (v / 2), v % 2));
  }
  static constexpr int x_offset(int v) { return q4_vector_x_offset(v); }
  // 2^(e - 128) per row, as e8m0_half_to_f32 (core/dtype.h): (e - 1) << 23, or the subnormals 2^21 << e for e < 2
  static inline __m512 scale(const Block& w) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.e)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, sub));
  }
};
// iq4_nl: the nibbles' grid value (kIq4Values, -127..113) + 128, 1..241, by one vpshufb; lanes start at -128 sum(a)
struct PIQ4 {
  using Block = BlockIQ4_NLx16;
  static constexpr int kOffset = 128;
  static constexpr bool kMins = false;
  static inline __m512i unpack(const Block& w, int v) {
    const __m128i lut4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values));
    const __m512i lut = _mm512_broadcast_i32x4(_mm_add_epi8(lut4, _mm_set1_epi8(char(kOffset))));
    return _mm512_shuffle_epi8(lut, load_nibbles(w.qs + 64 * (v / 2), v % 2));
  }
  static constexpr int x_offset(int v) { return q4_vector_x_offset(v); }
  static inline __m512 scale(const Block& w) { return f16_scales(w.d); }
};
struct PQ8 {
  using Block = BlockQ8_0x16;
  static constexpr int kOffset = 128;
  static constexpr bool kMins = false;
  // vector g: weights 4g..4g+3 of each row, made unsigned (w + 128) by flipping the sign bit
  static inline __m512i unpack(const Block& w, int v) {
    return _mm512_xor_si512(_mm512_loadu_si512(w.qs + 64 * v), _mm512_set1_epi8(char(0x80)));
  }
  static constexpr int x_offset(int v) { return 4 * v; }
  static inline __m512 scale(const Block& w) { return f16_scales(w.d); }
};
// q4_1 / q5_1 (w = d q + m): unsigned nibbles (q4_0x16's order) or q5's 0..31 as they are, lanes starting at 0,
// and the rows' mins (mins(w)), added per block as acc = fma(m, d_a sum(a), acc) after the scaled dot: ref's order
// (kquant_ref.cpp).
struct PQ41 {
  using Block = BlockQ4_1x16;
  static constexpr int kOffset = 0;
  static constexpr bool kMins = true;
  static inline __m512i unpack(const Block& w, int v) { return load_nibbles(w.qs + 64 * (v / 2), v % 2); }
  static constexpr int x_offset(int v) { return q4_vector_x_offset(v); }
  static inline __m512 scale(const Block& w) { return f16_scales(w.d); }
  static inline __m512 mins(const Block& w) { return f16_scales(w.m); }
};
// q5_0 / q5_1 panels: vector v's nibbles with its fifth bits put back by one masked add of 16 (qh holds vector v's
// 64-bit byte mask, core/dtype.h), q = 0..31 unsigned; q5_0's lanes start at -16 sum(a) (w = d (q - 16)).
template <class Block>
inline __m512i q5_unpack(const Block& w, int v) {
  uint64_t bits;
  __builtin_memcpy(&bits, w.qh + 8 * v, 8);
  const __m512i nib = load_nibbles(w.qs + 64 * (v / 2), v % 2);
  return _mm512_mask_add_epi8(nib, _cvtu64_mask64(bits), nib, _mm512_set1_epi8(16));
}
struct PQ50 {
  using Block = BlockQ5_0x16;
  static constexpr int kOffset = 16;
  static constexpr bool kMins = false;
  static inline __m512i unpack(const Block& w, int v) { return q5_unpack(w, v); }
  static constexpr int x_offset(int v) { return q4_vector_x_offset(v); }
  static inline __m512 scale(const Block& w) { return f16_scales(w.d); }
};
struct PQ51 {
  using Block = BlockQ5_1x16;
  static constexpr int kOffset = 0;
  static constexpr bool kMins = true;
  static inline __m512i unpack(const Block& w, int v) { return q5_unpack(w, v); }
  static constexpr int x_offset(int v) { return q4_vector_x_offset(v); }
  static inline __m512 scale(const Block& w) { return f16_scales(w.d); }
  static inline __m512 mins(const Block& w) { return f16_scales(w.m); }
};

// y[m .. m+MR, n .. n+16 NP) from the NP panels starting at `panel` (nb blocks each). Every activation dword
// broadcast feeds NP vpdpbusd and every unpacked weight vector MR: at NP = 3, MR = 4 a block is 96 vpdpbusd, 12 int
// and 12 f32 accumulators. With fewer than 4 outputs (decode) each keeps two integer chains, so that vpdpbusd's
// latency does not bound the speed.
template <class P, int NP, int MR>
inline void tile(const MatmulArgs& a, const typename P::Block* panel, int64_t nb, int64_t m, int64_t n) {
  constexpr int kChains = NP * MR >= 4 ? 1 : 2;
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m512 acc[NP][MR];
  for (int j = 0; j < NP; ++j)
    for (int i = 0; i < MR; ++i) acc[j][i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (NP == 1) prefetch_panel_ahead(panel, b);  // (batched) decode (backends/cpu/prefetch.h)
    __m512i isum[kChains][NP][MR];
    for (int i = 0; i < MR; ++i) {
      const __m512i init = _mm512_set1_epi32(-P::kOffset * x[i][b].sum);
      for (int j = 0; j < NP; ++j) {
        isum[0][j][i] = init;
        if constexpr (kChains == 2) isum[1][j][i] = _mm512_setzero_si512();
      }
    }
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {  // unrolled: v selects the unpacking and the accumulator chain
      __m512i wv[NP];
      for (int j = 0; j < NP; ++j) wv[j] = P::unpack(panel[j * nb + b], v);
      for (int i = 0; i < MR; ++i) {
        const __m512i xv = bcast_dword(x[i][b].qs + P::x_offset(v));
        for (int j = 0; j < NP; ++j) isum[v % kChains][j][i] = _mm512_dpbusd_epi32(isum[v % kChains][j][i], wv[j], xv);
      }
    }
    for (int j = 0; j < NP; ++j) {
      const __m512 dw = P::scale(panel[j * nb + b]);
      for (int i = 0; i < MR; ++i) {
        __m512i s = isum[0][j][i];
        if constexpr (kChains == 2) s = _mm512_add_epi32(s, isum[1][j][i]);
        acc[j][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(x[i][b].d)), acc[j][i]);
      }
      if constexpr (P::kMins) {
        const __m512 mw = P::mins(panel[j * nb + b]);
        for (int i = 0; i < MR; ++i)
          acc[j][i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x[i][b].d * float(x[i][b].sum)), acc[j][i]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    for (int j = 0; j < NP; ++j) _mm512_storeu_ps(y + 16 * j, acc[j][i]);
  }
}

// All M rows against NP panels: tiles of 4 rows, then the rest.
template <class P, int NP>
inline void rows(const MatmulArgs& a, const typename P::Block* panel, int64_t nb, int64_t n) {
  for_row_tiles<4>(0, a.M, [&](auto r, int64_t m) { tile<P, NP, decltype(r)::value>(a, panel, nb, m, n); });
}

// Decode of 1..16 sequences at once (the server's continuous batching): every row against one panel at a time (8
// rows a tile, the second tile reading the panel from L1), the panels streamed in address order with the decode
// prefetch, so the weights come from DRAM once per step whatever M is. The GEMM tiles below stream 3 panels at once
// without a prefetch: at M = 2..8 that cost 2-3x the one-row pass (kernels_bench batch/avx512/q4_0x16, M = 2:
// 6.5 -> 3.1 ms, M = 8: 10.5 -> 5.4 ms, one thread; q8_0x16 M = 8: 11.1 -> 8.1 ms).
template <class P, int MR>
inline void decode_rows(const MatmulArgs& a, const typename P::Block* w, int64_t nb, int64_t n0, int64_t n1) {
  constexpr int kHi = MR > 8 ? MR - 8 : 0;
  for (int64_t n = n0; n < n1; n += kPanelRows) {
    const typename P::Block* panel = w + (n / kPanelRows) * nb;
    tile<P, 1, MR - kHi>(a, panel, nb, 0, n);
    if constexpr (kHi > 0) tile<P, 1, kHi>(a, panel, nb, 8, n);
  }
}

template <class P, int... MR>
inline bool decode_rows_of(const MatmulArgs& a, const typename P::Block* w, int64_t nb, int64_t n0, int64_t n1,
                           std::integer_sequence<int, MR...>) {
  return ((a.M == MR + 1 ? (decode_rows<P, MR + 1>(a, w, nb, n0, n1), true) : false) || ...);
}

template <class P>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  using Block = typename P::Block;
  const int64_t nb = a.K / kQBlock;
  const Block* w = static_cast<const Block*>(a.w);
  int64_t n = n0;  // n0, n1: multiples of 16 (ops.cpp splits in 16-row chunks)
  if (a.M <= 16 && decode_rows_of<P>(a, w, nb, n0, n1, std::make_integer_sequence<int, 16>{})) return;
  for (; n + 3 * kPanelRows <= n1; n += 3 * kPanelRows) rows<P, 3>(a, w + (n / kPanelRows) * nb, nb, n);
  if (n1 - n == 2 * kPanelRows) rows<P, 2>(a, w + (n / kPanelRows) * nb, nb, n);
  if (n1 - n == kPanelRows) rows<P, 1>(a, w + (n / kPanelRows) * nb, nb, n);
}

}  // namespace

void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ8>(a, n0, n1); }
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4>(a, n0, n1); }
void matmul_mxfp4x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PMX>(a, n0, n1); }
void matmul_iq4_nlx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PIQ4>(a, n0, n1); }
void matmul_q4_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ41>(a, n0, n1); }
void matmul_q5_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ51>(a, n0, n1); }
void matmul_q5_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ50>(a, n0, n1); }

}  // namespace pipit::avx512
