// The K-quant panels whose two 16-weight halves of a group carry their own scale (q2_K, q3_K, q6_K) need, per
// activation row and 32-weight group, the sums of its two 16-activation halves (q6_K / q3_K start each half's lanes at
// -offset * that sum; q2_K's mins multiply them). They depend on the activations only, so a matmul call forms them
// once here instead of once per panel and group in the tiles: a vpsadbw, moves to and from a general register and
// two broadcasts per group and row, on the critical path of decode's one row. kernels_bench
// gemv/avx512/q6_kx16/K=1024/N=151936, 1 thread, alternating builds: 6.3 -> 4.2-5.3 ms; Qwen3-0.6B Q6_K pp512 at 1
// thread 230-313 -> 357 tok/s, Q2_K 329 -> 360-370. Whole-model decode was unchanged (memory-bound there).
// SSE2 only, so the AVX2 / AVX-VNNI and AVX-512 kernels share it; internal linkage, as matmul_tiles.h (each level's
// copy is compiled with its own flags).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels.h"

namespace pipit {
namespace {

// Sum of 16 int8s: biased to unsigned, summed by vpsadbw into two 64-bit halves.
inline int32_t sum16(const int8_t* q) {
  const __m128i u = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)), _mm_set1_epi8(char(0x80)));
  const __m128i s = _mm_sad_epu8(u, _mm_setzero_si128());
  return int32_t(_mm_cvtsi128_si32(s) + _mm_extract_epi16(s, 4)) - 16 * 128;
}

// A kernel's per-half values (Entry, from form(lo, hi): the two half sums of a group) for every activation row and
// 32-weight group of a call: at(m) is row m's K / 32 entries. On the stack up to 16 KiB (decode's rows up to
// K = 65536), past that (a prefill) on the heap for the call only.
template <class Entry>
class ActHalfSums {
 public:
  template <class Form>
  ActHalfSums(const MatmulArgs& a, Form form) : ng_(a.K / kQBlock) {
    Entry* e = stack_;
    if (a.M * ng_ > kStack) {
      heap_.resize(size_t(a.M * ng_));
      e = heap_.data();
    }
    data_ = e;
    for (int64_t m = 0; m < a.M; ++m) {
      const auto* x = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + m * a.x_stride);
      for (int64_t b = 0; b < ng_; ++b, ++e) {
        const int32_t lo = sum16(x[b].qs);
        *e = form(lo, x[b].sum - lo);
      }
    }
  }
  ActHalfSums(const ActHalfSums&) = delete;
  ActHalfSums& operator=(const ActHalfSums&) = delete;
  const Entry* at(int64_t m) const { return data_ + m * ng_; }

 private:
  static constexpr int64_t kStack = 16384 / int64_t(sizeof(Entry));
  int64_t ng_;
  Entry stack_[kStack];
  std::vector<Entry> heap_;
  const Entry* data_ = nullptr;
};

// Two int32 start values, one per half (q6_K, q3_K: -offset * the half's sum).
struct HalfBias {
  int32_t lo, hi;
};

// (lo, hi) as one int16 pair (q2_K's mins, q3_K's scale correction on AVX2: one vpmaddwd with the rows' pairs).
inline int32_t half_pair16(int32_t lo, int32_t hi) { return int32_t(uint32_t(uint16_t(lo)) | (uint32_t(hi) << 16)); }

}  // namespace
}  // namespace pipit
