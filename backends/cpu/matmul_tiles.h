// The loop over register tiles that the dense matmul kernels share (AVX-512 f32 / f16 / bf16 and bf16dot, Arm
// BFMMLA bf16dot): each supplies one tile, y[m .. m + MR) x [n .. n + NR), whose outputs are the same instruction
// sequence whatever MR and NR (so a row of a batch equals the row alone), and this walks [n0, n1):
//  - decode (M = 1): T::kDecodeNR weight rows per tile, then 4, then 1 (the tile reads them one after another);
//  - M > 1: blocks of x rows small enough to stay in L2 (about 256 KiB) go through every T::kMR x T::kNR tile of
//    [n0, n1), so the weights are read once per block and x once per block from L2; the columns left take 4
//    weight rows, then 1, as decode's do (a tile reduces each group of 4 outputs together: a column of 4 or 1
//    must fall where decode has one, or a row of a batch would not keep the row's bits alone).
//  - long rows (K > T::kKChunk where a level sets it): each column's tiles run over k in chunks of kKChunk, so the
//    chunk's kNR weight rows stay in L1 while the column's x rows pass (8 bf16 rows of K = 2560, Qwen3-4B's width,
//    are 40 KiB: with x they overflowed a 48 KiB L1). A tile keeps its accumulators in `state` between chunks (a
//    store and a reload: the same values), so each output is the same instruction sequence as unchunked.
// T provides kMR, kNR, kDecodeNR (>= 4), kXBytes (bytes of one x element), kKChunk (0: never chunk; else a
// multiple of the tile's k step) and `template <int MR, int NR> static void tile(const MatmulArgs&, int64_t m,
// int64_t n)`; with kKChunk, also tile(a, m, n, const KSpan&): k in [k0, k1), accumulators from state unless k0
// == 0, into state unless k1 == K (then the outputs). State per tile: kMR * kNR * kStateLanes floats.
// Internal linkage (anonymous namespace): each level's instantiation is compiled with that level's target flags.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernels.h"

namespace pipit {
namespace {

// The integer kernels read a q4 block of a 16-row panel (q4_0x16, a q4_Kx16 group) as 8 weight vectors of 4 weights
// per row: v = 2c the low nibbles of 64-byte chunk c (weights 4c .. 4c + 3), v = 2c + 1 its high nibbles (weights
// 16 + 4c ..). The first of the 4 activation bytes vector v multiplies:
constexpr int q4_vector_x_offset(int v) { return v % 2 ? 16 + 4 * (v / 2) : 4 * (v / 2); }

template <int R, class F>
inline void row_tail(int64_t r, int64_t m, F& f) {
  if constexpr (R > 0) {
    if (r == R) f(std::integral_constant<int, R>{}, m);
    else row_tail<R - 1>(r, m, f);
  }
}
// f(std::integral_constant<int, R>{}, m) for the register tiles of x rows [m0, m1): full tiles of MR rows, then one
// of the 1 .. MR - 1 rows left (kernels take a tile's row count as a template argument). Shared by every tiled
// matmul (here, and the integer panel kernels).
template <int MR, class F>
inline void for_row_tiles(int64_t m0, int64_t m1, F&& f) {
  int64_t m = m0;
  for (; m + MR <= m1; m += MR) f(std::integral_constant<int, MR>{}, m);
  row_tail<MR - 1>(m1 - m, m, f);
}

struct KSpan {
  int64_t k0, k1;
  float* state;
};
constexpr int64_t kStateLanes = 16;       // floats of one accumulator (a zmm)
constexpr int64_t kMaxChunkedTiles = 32;  // row tiles of an x block when chunking over k (their state: on the stack)

// Weight rows [n, n + NR) against x rows [m0, m1); state: kMaxChunkedTiles tiles' accumulators when chunking.
template <class T, int NR>
inline void matmul_column(const MatmulArgs& a, int64_t n, int64_t m0, int64_t m1, float* state) {
  if constexpr (T::kKChunk > 0) {
    if (a.K > T::kKChunk) {
      for (int64_t k0 = 0; k0 < a.K; k0 += T::kKChunk) {
        const int64_t k1 = std::min(a.K, k0 + T::kKChunk);
        int64_t t = 0;
        for_row_tiles<T::kMR>(m0, m1, [&](auto r, int64_t m) {
          T::template tile<decltype(r)::value, NR>(a, m, n, KSpan{k0, k1, state + t++ * T::kMR * T::kNR * kStateLanes});
        });
      }
      return;
    }
  }
  for_row_tiles<T::kMR>(m0, m1, [&](auto r, int64_t m) { T::template tile<decltype(r)::value, NR>(a, m, n); });
}

template <class T>
void matmul_tiled(const MatmulArgs& a, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (a.M == 1) {
    for (; n + T::kDecodeNR <= n1; n += T::kDecodeNR) T::template tile<1, T::kDecodeNR>(a, 0, n);
    if constexpr (T::kDecodeNR > 4)
      for (; n + 4 <= n1; n += 4) T::template tile<1, 4>(a, 0, n);
    for (; n < n1; ++n) T::template tile<1, 1>(a, 0, n);
    return;
  }
  int64_t mb = std::max<int64_t>(T::kMR, (int64_t(256) << 10) / (a.K * T::kXBytes) / T::kMR * T::kMR);
  constexpr int64_t kStateFloats = T::kKChunk > 0 ? kMaxChunkedTiles * T::kMR * T::kNR * kStateLanes : 1;
  alignas(64) float state[kStateFloats];
  if (T::kKChunk > 0 && a.K > T::kKChunk) mb = std::min(mb, kMaxChunkedTiles * T::kMR);
  for (int64_t m0 = 0; m0 < a.M; m0 += mb) {
    const int64_t m1 = std::min(a.M, m0 + mb);
    for (n = n0; n + T::kNR <= n1; n += T::kNR) matmul_column<T, T::kNR>(a, n, m0, m1, state);
    if constexpr (T::kNR > 4)
      for (; n + 4 <= n1; n += 4) matmul_column<T, 4>(a, n, m0, m1, state);
    for (; n < n1; ++n) matmul_column<T, 1>(a, n, m0, m1, state);
  }
}

}  // namespace
}  // namespace pipit
