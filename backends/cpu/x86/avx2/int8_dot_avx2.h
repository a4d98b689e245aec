// Exact int32 dot products of u8 x s8 bytes on 256-bit vectors (4 products per int32 lane), as a policy the integer
// panel tiles take (matmul_panel_avx2.h, matmul_kpanel_avx2.h): the AVX2 level instantiates them with MaddubsDot,
// the AVX-VNNI level (x86/avxvnni/int8_dot_avxvnni.h) with VnniDot. A policy gives
//   zero(), add(p, u, s), widen(p): a running sum of several steps widened to int32 lanes once. MaddubsDot keeps
//     it as int16 pair sums (vpmaddubsw), so the caller bounds it: every tile documents why it cannot saturate;
//   scale(s32), widen_scaled(p, s): widen(p) * s32 per int32 lane (q6_K's int8 group scales), s = scale(s32) made
//     once per group;
//   acc(a, u, s): a + one step, in int32 lanes.
// Internal linkage (anonymous namespace): each level's instantiation is compiled with that level's target flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace pipit {
namespace {

inline __m256i bcast_dword(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

struct MaddubsDot {
  static __m256i zero() { return _mm256_setzero_si256(); }
  static __m256i add(__m256i p, __m256i u, __m256i s) { return _mm256_add_epi16(p, _mm256_maddubs_epi16(u, s)); }
  static __m256i widen(__m256i p) { return _mm256_madd_epi16(p, _mm256_set1_epi16(1)); }
  // the scale as the int16 pair (s, s) of each lane: vpmaddwd multiplies both pair sums by it and adds them
  static __m256i scale(__m256i s32) {
    return _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s32, 16));
  }
  static __m256i widen_scaled(__m256i p, __m256i s) { return _mm256_madd_epi16(p, s); }
  static __m256i acc(__m256i a, __m256i u, __m256i s) { return _mm256_add_epi32(a, widen(_mm256_maddubs_epi16(u, s))); }
};

}  // namespace
}  // namespace pipit
