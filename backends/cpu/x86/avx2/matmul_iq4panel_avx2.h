// 256-bit integer matmul for the iq4_xs panels iq4_xsx16 (core/dtype.h) against BlockQ8Act rows, shared by the AVX2
// level (matmul_iq4panel_avx2.cpp) and the AVX-VNNI level (x86/avxvnni/matmul_iq4panel_avxvnni.cpp) through the dot
// policy D (int8_dot_avx2.h), in the scheme of matmul_kpanel_avx2.h (a chunk's 32-byte halves are rows 0-7 and
// 8-15, one int32 lane per row). vpshufb maps each nibble to its grid value (kIq4Values, -127..113):
//  - vpdpbusd (VnniDot): the value + 128 (1..241) is unsigned as it takes it, and each lane starts at -128 * (the
//    activations' sum);
//  - vpmaddubsw (MaddubsDot): |value| x sign(a, value), whose pair sums (<= 2 * 127 * 127) fit int16 but two of them
//    do not, so each step is widened to int32 at once (D::acc).
// Either way the int32 lane is the exact group dot, and each lane then does the reference's f32 arithmetic
// (kquant_ref.cpp): acc = fma(isum, (d * (ls - 32)) * da, acc). So every output equals ref bit for bit.
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

constexpr int kIq4MR = 3;  // activation rows per tile, as matmul_kpanel_avx2.h's kKPanelMR

// A 16-byte table in both 128-bit lanes: f(kIq4Values[i]).
template <class F>
inline __m256i iq4_table(F f) {
  alignas(16) int8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = int8_t(f(int(kIq4Values[i])));
  return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
}

// y[m .. m+MR, n .. n+16) from the panel starting at `panel` (nsb super-blocks).
template <class D, int MR>
inline void iq4_tile(const MatmulArgs& a, const BlockIQ4_XSx16* panel, int64_t nsb, int64_t m, int64_t n) {
  constexpr bool kSigned = std::is_same_v<D, MaddubsDot>;
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  __m256 acc[2][MR];
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < MR; ++i) acc[h][i] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i t_val = iq4_table([](int v) { return v; });  // signed values (MaddubsDot's signs)
  const __m256i t_w = kSigned ? iq4_table([](int v) { return v < 0 ? -v : v; })   // |value|
                               : iq4_table([](int v) { return v + 128; });       // value + 128
  for (int64_t s = 0; s < nsb; ++s) {
    const BlockIQ4_XSx16& w = panel[s];
    for (int g = 0; g < 8; ++g) {
      prefetch_kpanel_share(panel, s, g);
      const BlockQ8Act* xb[MR];
      for (int i = 0; i < MR; ++i) xb[i] = &x[i][8 * s + g];
      for (int h = 0; h < 2; ++h) {
        __m256i isum[MR];
        for (int i = 0; i < MR; ++i) isum[i] = kSigned ? _mm256_setzero_si256() : _mm256_set1_epi32(-128 * xb[i]->sum);
        for (int c = 0; c < 4; ++c) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs[g][c] + 32 * h));
          const __m256i nlo = _mm256_and_si256(v, m4), nhi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          const __m256i lo = _mm256_shuffle_epi8(t_w, nlo), hi = _mm256_shuffle_epi8(t_w, nhi);
          if constexpr (kSigned) {
            const __m256i slo = _mm256_shuffle_epi8(t_val, nlo), shi = _mm256_shuffle_epi8(t_val, nhi);
            for (int i = 0; i < MR; ++i) {
              isum[i] = D::acc(isum[i], lo, _mm256_sign_epi8(bcast_dword(xb[i]->qs + 4 * c), slo));
              isum[i] = D::acc(isum[i], hi, _mm256_sign_epi8(bcast_dword(xb[i]->qs + 16 + 4 * c), shi));
            }
          } else {
            for (int i = 0; i < MR; ++i) {
              isum[i] = D::acc(isum[i], lo, bcast_dword(xb[i]->qs + 4 * c));
              isum[i] = D::acc(isum[i], hi, bcast_dword(xb[i]->qs + 16 + 4 * c));
            }
          }
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.d + 8 * h)));
        const __m256 sc = _mm256_mul_ps(d, _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.sc[g] + 8 * h)))));
        for (int i = 0; i < MR; ++i)
          acc[h][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(sc, _mm256_set1_ps(xb[i]->d)),
                                      acc[h][i]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    _mm256_storeu_ps(y, acc[0][i]);
    _mm256_storeu_ps(y + 8, acc[1][i]);
  }
}

template <class D>
void matmul_iq4_panels(const MatmulArgs& a, int64_t n0, int64_t n1) {
  const int64_t nsb = a.K / kQK;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16
    const BlockIQ4_XSx16* panel = static_cast<const BlockIQ4_XSx16*>(a.w) + (n / kPanelRows) * nsb;
    for_row_tiles<kIq4MR>(0, a.M, [&](auto r, int64_t m) { iq4_tile<D, decltype(r)::value>(a, panel, nsb, m, n); });
  }
}

}  // namespace
}  // namespace pipit
