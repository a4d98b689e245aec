// The AVX-VNNI dot policy for the shared integer panel tiles (x86/avx2/int8_dot_avx2.h says what a policy gives):
// vpdpbusd adds the 4 u8 x s8 products of each int32 lane in one instruction, so partial sums are int32 from the
// start and need no widening. The sums are the same integers as MaddubsDot's, so the tiles give the same bits.
#pragma once

#include "backends/cpu/x86/avx2/int8_dot_avx2.h"

namespace pipit {
namespace {

struct VnniDot {
  static __m256i zero() { return _mm256_setzero_si256(); }
  static __m256i add(__m256i p, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(p, u, s); }
  static __m256i widen(__m256i p) { return p; }
  static __m256i scale(__m256i s32) { return s32; }
  static __m256i widen_scaled(__m256i p, __m256i s) { return _mm256_mullo_epi32(p, s); }
  static __m256i acc(__m256i a, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(a, u, s); }
};

}  // namespace
}  // namespace pipit
