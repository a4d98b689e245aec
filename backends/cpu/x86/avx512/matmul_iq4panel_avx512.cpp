// AVX512-VNNI matmul for the iq4_xs panels iq4_xsx16 (core/dtype.h) against BlockQ8Act rows: the q4_kx16 scheme of
// matmul_kpanel_avx512.cpp with a table lookup. A 64-byte chunk holds 4 nibble bytes of each of 16 rows; vpshufb
// turns each nibble into its grid value + 128 (kIq4Values: -127..113, so 1..241, unsigned as vpdpbusd takes it),
// and each row's int32 lane starts at -128 * (the activations' sum), so it ends at the exact sum of value x a.
// Each lane then does the reference's f32 arithmetic (backends/cpu/ref/kquant_ref.cpp): acc = fma(isum,
// (d * (ls - 32)) * da, acc), so every output equals ref bit for bit. Tiles: 8 activation rows x 16 weight rows,
// two int32 chains per row (low / high nibbles); decode is one row.
#include "backends/cpu/matmul_tiles.h"
#include "backends/cpu/prefetch.h"
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

// GCC 12's false "may be used uninitialized" on the intrinsics' undefined merge sources (matmul_kpanel_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pipit::avx512 {

namespace {

constexpr int kMR = 8;

inline __m512i bcast_dword(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512 f16x16_to_ps(const f16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// kIq4Values + 128 in every 128-bit lane: vpshufb's table.
inline __m512i grid_u8() {
  alignas(16) uint8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = uint8_t(kIq4Values[i] + 128);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
}

// y[m .. m+MR, n .. n+16) from the panel starting at `panel` (nsb super-blocks).
template <int MR>
inline void tile(const MatmulArgs& a, const BlockIQ4_XSx16* panel, int64_t nsb, int64_t m, int64_t n) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  const __m512i grid = grid_u8(), m4 = _mm512_set1_epi8(0x0f);
  for (int64_t s = 0; s < nsb; ++s) {
    const auto& w = panel[s];
    const __m512 d = f16x16_to_ps(w.d);
    for (int g = 0; g < 8; ++g) {
      prefetch_kpanel_share(panel, s, g);
      const BlockQ8Act* xb[MR];
      __m512i isum[MR], ihi[MR];
      for (int i = 0; i < MR; ++i) {
        xb[i] = &x[i][8 * s + g];
        isum[i] = _mm512_set1_epi32(-128 * xb[i]->sum);
        ihi[i] = _mm512_setzero_si512();
      }
      for (int c = 0; c < 4; ++c) {  // chunk c: low nibbles are weights 4c.., high nibbles 16 + 4c..
        const __m512i v = _mm512_loadu_si512(w.qs[g][c]);
        const __m512i lo = _mm512_shuffle_epi8(grid, _mm512_and_si512(v, m4));
        const __m512i hi = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        for (int i = 0; i < MR; ++i) {
          isum[i] = _mm512_dpbusd_epi32(isum[i], lo, bcast_dword(xb[i]->qs + 4 * c));
          ihi[i] = _mm512_dpbusd_epi32(ihi[i], hi, bcast_dword(xb[i]->qs + 16 + 4 * c));
        }
      }
      const __m512 sc = _mm512_mul_ps(d, _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.sc[g])))));
      for (int i = 0; i < MR; ++i)
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(isum[i], ihi[i])),
                                 _mm512_mul_ps(sc, _mm512_set1_ps(xb[i]->d)), acc[i]);
    }
  }
  for (int i = 0; i < MR; ++i)
    _mm512_storeu_ps(reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n, acc[i]);
}

}  // namespace

void matmul_iq4_xsx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  const int64_t nsb = a.K / kQK;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16 (ops.cpp splits in 16-row chunks)
    const BlockIQ4_XSx16* panel = static_cast<const BlockIQ4_XSx16*>(a.w) + (n / kPanelRows) * nsb;
    for_row_tiles<kMR>(0, a.M, [&](auto r, int64_t m) { tile<decltype(r)::value>(a, panel, nsb, m, n); });
  }
}

}  // namespace pipit::avx512
