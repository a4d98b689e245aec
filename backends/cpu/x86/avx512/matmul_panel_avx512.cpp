// AVX512-VNNI matmuls for the row-interleaved panel dtypes q4_0x16 / q8_0x16 (core/dtype.h) against BlockQ8Act rows.
// A 64-byte load of a panel block holds 4 quant bytes of each of 16 weight rows, so one vpdpbusd with a broadcast
// activation dword adds 4 products into each of 16 lanes, lane r belonging to row r: 8 of them give the 16 rows'
// exact block dot products in one register, without horizontal sums. vpdpbusd multiplies unsigned by signed bytes:
// q4 nibbles are unsigned already (q = w + 8), q8 bytes become w + 128 by xor 0x80; the lanes start at
// -offset * sum(a) (BlockQ8Act::sum) so they hold the signed dot. Then, per block, f32 acc += float(dot) * (d_w d_a).
// GEMM (prefill) is a register tile of up to 8 activation rows x 16 weight rows: every unpacked weight vector feeds
// 8 vpdpbusd. Decode (M = 1) is the same code with one row, streaming a thread's panels in address order.
// Each row's arithmetic is the same whatever M is: results do not depend on how many rows share the batch.
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

namespace pipit::avx512 {

namespace {

constexpr int kMR = 8;  // activation rows per tile

inline __m512i bcast_dword(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Panel formats: each adds the 16 rows' block dot products (unsigned weight x signed activation) to isum[i].
struct PQ4 {
  using Block = BlockQ4_0x16;
  static constexpr int kOffset = 8;
  template <int MR>
  static inline void dots(const Block& w, const BlockQ8Act* const* x, int64_t b, __m512i* isum) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i isum_hi[MR];  // a second chain per row: with one row, 8 dependent vpdpbusd would bound the speed
    for (int i = 0; i < MR; ++i) isum_hi[i] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {  // chunk c: low nibbles are weights 4c.., high nibbles 16 + 4c..
      const __m512i v = _mm512_loadu_si512(w.qs + 64 * c);
      const __m512i lo = _mm512_and_si512(v, m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      for (int i = 0; i < MR; ++i) {
        isum[i] = _mm512_dpbusd_epi32(isum[i], lo, bcast_dword(x[i][b].qs + 4 * c));
        isum_hi[i] = _mm512_dpbusd_epi32(isum_hi[i], hi, bcast_dword(x[i][b].qs + 16 + 4 * c));
      }
    }
    for (int i = 0; i < MR; ++i) isum[i] = _mm512_add_epi32(isum[i], isum_hi[i]);
  }
};
struct PQ8 {
  using Block = BlockQ8_0x16;
  static constexpr int kOffset = 128;
  template <int MR>
  static inline void dots(const Block& w, const BlockQ8Act* const* x, int64_t b, __m512i* isum) {
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    __m512i isum_odd[MR];  // chunks 1, 3, 5, 7 in a second chain
    for (int i = 0; i < MR; ++i) isum_odd[i] = _mm512_setzero_si512();
    for (int g = 0; g < 8; g += 2) {  // chunk g: weights 4g..4g+3 of each row
      const __m512i v0 = _mm512_xor_si512(_mm512_loadu_si512(w.qs + 64 * g), flip);
      const __m512i v1 = _mm512_xor_si512(_mm512_loadu_si512(w.qs + 64 * g + 64), flip);
      for (int i = 0; i < MR; ++i) {
        isum[i] = _mm512_dpbusd_epi32(isum[i], v0, bcast_dword(x[i][b].qs + 4 * g));
        isum_odd[i] = _mm512_dpbusd_epi32(isum_odd[i], v1, bcast_dword(x[i][b].qs + 4 * g + 4));
      }
    }
    for (int i = 0; i < MR; ++i) isum[i] = _mm512_add_epi32(isum[i], isum_odd[i]);
  }
};

// y[m .. m+MR, n .. n+16) from the panel starting at `panel`.
template <class P, int MR>
inline void tile(const MatmulArgs& a, const typename P::Block* panel, int64_t m, int64_t n) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t nb = a.K / kQBlock;
  for (int64_t b = 0; b < nb; ++b) {
    const auto& w = panel[b];
    __m512i isum[MR];
    for (int i = 0; i < MR; ++i) isum[i] = _mm512_set1_epi32(-P::kOffset * x[i][b].sum);
    P::template dots<MR>(w, x, b, isum);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.d)));
    for (int i = 0; i < MR; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i]), _mm512_mul_ps(dw, _mm512_set1_ps(x[i][b].d)), acc[i]);
  }
  for (int i = 0; i < MR; ++i)
    _mm512_storeu_ps(reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n, acc[i]);
}

template <class P>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  using Block = typename P::Block;
  const int64_t nb = a.K / kQBlock;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16 (ops.cpp splits in 16-row chunks)
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nb;
    int64_t m = 0;
    for (; m + kMR <= a.M; m += kMR) tile<P, kMR>(a, panel, m, n);
    switch (a.M - m) {
      case 7: tile<P, 7>(a, panel, m, n); break;
      case 6: tile<P, 6>(a, panel, m, n); break;
      case 5: tile<P, 5>(a, panel, m, n); break;
      case 4: tile<P, 4>(a, panel, m, n); break;
      case 3: tile<P, 3>(a, panel, m, n); break;
      case 2: tile<P, 2>(a, panel, m, n); break;
      case 1: tile<P, 1>(a, panel, m, n); break;
      default: break;
    }
  }
}

}  // namespace

void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ8>(a, n0, n1); }
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4>(a, n0, n1); }

}  // namespace pipit::avx512
