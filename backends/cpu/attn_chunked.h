// The chunked attention driver the SIMD levels share (AVX2, AVX-512, NEON); each level's attention_*.cpp supplies
// the register-tile kernels and instantiates it. The scheme (kernels.h, kAttnChunk):
//  - a row's keys are taken in chunks of 256 from its first key; each chunk gives a state {max score m, sum of
//    e^(s - m), sum of e^(s - m) v}, and states are folded in key order (Isa::fold, shared with attn_merge);
//  - within a chunk, 64 keys at a time are converted to f32 once (KV::row: f32 copy, f16 widening, q8_0 element =
//    d * q as ref forms it) and used by every query row of the call (the heads of a GQA group times a block of
//    tokens), so a K/V row is read and converted once per job instead of once per query row;
//  - scores run as R rows x J keys register tiles (Isa::score_tile<R>), values as R rows x lanes of o over the
//    block's keys in key order (Isa::value_tile<R>).
// A level keeps each element of a row's result on the same sequence of operations whatever the tile shape, the
// other rows of the call or the split of its chunks across calls, so attn_rows gives each row attn_row's bits and a
// split decode step gives the unsplit bits (tests/kernels/attention_rows_test.cpp).
//
// What Isa provides (all static):
//   kLanes                 head_dim is padded with zeros to a multiple of this (hdp)
//   score_tile<R>(q, kb, hdp, nk, scale, s, ss)   s[r * ss + j] = scale * q_r . k_j for j < nk rounded up to the
//                          tile's key count (<= 8; the block has zero rows there)
//   value_tile<R>(e, vb, hdp, n, o)               o_r[0, hdp) += sum_{j < n} e_r[j] v_j in key order
//   chunk_softmax(s, n, softcap) -> {m, l}       soft-cap, max, e^(s - m) in place; entries after n up to the
//                          vector width become 0 (a row's scores have kAttnChunk + 16 floats)
//   fold(acc, c, hd), finish(acc, hd, has_sink, sink, out)   (noinline in the level: attn_merge runs the same code)
// and KV::row(p, hd, hdp, dst): one cache head row -> hdp floats, zero-padded; KV::bytes(hd): that row's size.
// Optionally (Isa::kDirect, with KV::load(p, d): lanes [d, d + kLanes) of a cache row as f32), tiles that read the
// cache rows in place, for calls of up to 4 rows (a decode step's GQA group) and head_dim a multiple of kLanes:
//   score_tile_kv<KV, R>(q, kp, hd, nk, scale, s, ss)  as score_tile, key j's row at kp[j] (kp[j] for j in
//                          [nk, nk rounded up to 8) points at a zero row)
//   value_tile_kv<KV, R>(e, vp, hd, n, o)               as value_tile, key j's row at vp[j]
// KV::load gives the very floats KV::row writes and the tiles keep each lane's operations and their order, so both
// ways give the same bits (attention_rows_test compares 1-row calls, which read in place, with calls of many rows,
// which convert).
//
// Internal linkage (anonymous namespace): each level's instantiation is compiled with that level's target flags
// and must never be merged with another level's by the linker.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/attn_one_row.h"
#include "backends/cpu/kernels.h"

namespace pipit {
namespace {

constexpr int64_t kAttnBlock = 64;

// The scalar half of Isa::fold (acc = fold(acc, c), kernels.h): m and l of the folded state, and the factors a, b
// the level then applies to o (o = a o_acc + b o_c).
struct FoldFactors {
  float a, b;
};
inline FoldFactors fold_scalars(float* acc, const float* c) {
  const float m = std::max(acc[0], c[0]);
  const float a = std::exp(acc[0] - m), b = std::exp(c[0] - m);
  acc[0] = m;
  acc[1] = std::fma(c[1], b, acc[1] * a);
  return {a, b};
}
// The scalar half of Isa::finish: the factor o is multiplied by for the output, o / l, the sink logit joining l
// (its probability dropped) when has_sink.
inline float finish_factor(const float* acc, bool has_sink, float sink) {
  if (!has_sink) return 1.0f / acc[1];
  const float m = std::max(acc[0], sink), a = std::exp(acc[0] - m);
  return a / std::fma(acc[1], a, std::exp(sink - m));
}  // keys converted to f32 at a time (32 KiB for head_dim 128: L1/L2-resident)

// A level whose tiles can read K/V rows in place (see above).
template <class Isa>
concept DirectKvTiles = Isa::kDirect;

template <class Isa, class KV>
void attn_rows_chunked(const AttnRowsArgs& a) {
  const int64_t nq = a.n_q, hd = a.head_dim, hdp = (hd + Isa::kLanes - 1) / Isa::kLanes * Isa::kLanes;
  const int64_t ss = kAttnChunk + 16, st = hdp + 8;
  int64_t n[kAttnMaxRows], n_max = 0;
  for (int64_t i = 0; i < nq; ++i) n_max = std::max(n_max, n[i] = a.k1[i] - a.k0);
  // scratch (attn_scratch_floats): scores (ss per row) | q padded (hdp per row) | chunk state {m, l, o} | running
  // state | f32 key block
  float* sc = a.scratch;
  float* qp = sc + nq * ss;
  float* cs = qp + nq * hdp;
  float* acc = cs + nq * st;
  float* kvb = acc + nq * st;
  for (int64_t i = 0; i < nq; ++i) {
    std::copy(a.q[i], a.q[i] + hd, qp + i * hdp);
    std::fill(qp + i * hdp + hd, qp + (i + 1) * hdp, 0.0f);
  }
  const uint8_t* kb = static_cast<const uint8_t*>(a.k);
  const uint8_t* vb = static_cast<const uint8_t*>(a.v);
  // byte offset of the j-th visible key's row; a wrapped ring continues at row 0 (see AttnRowArgs::ring)
  auto off = [&](int64_t j) { return (a.ring > 0 && a.k0 + j >= a.ring ? a.k0 + j - a.ring : a.k0 + j) * a.kv_stride; };
  // keys [j0, j1) -> kvb rows, zero rows after them up to a multiple of 8 (the widest score tile). A head's rows are
  // a cache row apart (all kv heads of a position share one), a strided walk the hardware prefetchers follow poorly
  // from DRAM, so the K pass fetches the K row kAhead keys on (to L1) and the V row too (to L2: V is read after the
  // chunk's softmax; a chunk's V rows are 64 KiB at head_dim 128 f16). 24 keys: measured against 8, 16 and 40
  // (pipit bench -d 4096 -n 64, Qwen3-0.6B shape, f16 KV: 8 keys ahead 12.8 / 25.3 tok/s at 1 / 2 threads, 24 keys
  // 16.4 / 24.9, 40 keys 15.2 / 21.4; no prefetch 9.3 at 1 thread).
  constexpr int64_t kAhead = 24;
  const int64_t row_bytes = KV::bytes(hd);
  auto convert = [&](const uint8_t* base, int64_t j0, int64_t j1, bool fetch) {
    for (int64_t j = j0; j < j1; ++j) {
      if (fetch && j + kAhead < n_max) {
        const int64_t o = off(j + kAhead);
        for (int64_t b = 0; b < row_bytes; b += 64) {
          __builtin_prefetch(kb + o + b, 0, 3);
          __builtin_prefetch(vb + o + b, 0, 2);
        }
      }
      KV::row(base + off(j), hd, hdp, kvb + (j - j0) * hdp);
    }
    std::fill(kvb + (j1 - j0) * hdp, kvb + (j1 - j0 + 7) / 8 * 8 * hdp, 0.0f);
  };

  // Reading K/V in place (a decode step: up to 4 rows, so every row fits one tile and each K/V row is read once
  // either way): the block conversion's store and reload of every element held a decode step's attention far below
  // the memory's speed (kernels_bench attn_decode/avx512/f16/qwen3-0.6b/keys=256: 19 -> 41 GB/s from L2, 12 -> 18
  // from DRAM, one thread). Many rows (prefill) keep the conversion: there it is shared by all the rows' tiles.
  bool direct = false;
  if constexpr (DirectKvTiles<Isa>) direct = nq <= 4 && hd == hdp;
  const uint8_t* kp[kAttnChunk + 8];  // direct: the chunk's K and V rows, then the zero row up to a multiple of 8
  const uint8_t* vp[kAttnChunk + 8];
  if (direct) std::fill(reinterpret_cast<uint8_t*>(kvb), reinterpret_cast<uint8_t*>(kvb) + row_bytes, uint8_t(0));
  if (direct)  // the first kAhead keys too, which nothing fetched ahead (a split decode step: each job's start)
    for (int64_t j = 0; j < std::min(kAhead, n_max); ++j) {
      const int64_t o = off(j);
      for (int64_t b = 0; b < row_bytes; b += 64) {
        __builtin_prefetch(kb + o + b, 0, 3);
        __builtin_prefetch(vb + o + b, 0, 2);
      }
    }

  for (int64_t c0 = 0; c0 < n_max; c0 += kAttnChunk) {
    const int64_t c1 = std::min(c0 + kAttnChunk, n_max);
    if (direct) {
      for (int64_t j = c0; j < c1; ++j) kp[j - c0] = kb + off(j), vp[j - c0] = vb + off(j);
      for (int64_t j = c1 - c0; j < (c1 - c0 + 7) / 8 * 8; ++j) kp[j] = vp[j] = reinterpret_cast<uint8_t*>(kvb);
    }
    // 1. scores of the chunk, a block of keys at a time (direct: 8 keys at a time), tiles of up to 4 rows
    if (direct) {
      // fetching the rows kAhead keys on as the conversion does
      for (int64_t j0 = c0; j0 < c1; j0 += 8) {
        for (int64_t j = j0 + kAhead; j < std::min(j0 + kAhead + 8, n_max); ++j) {
          const int64_t o = off(j);
          for (int64_t b = 0; b < row_bytes; b += 64) {
            __builtin_prefetch(kb + o + b, 0, 3);
            __builtin_prefetch(vb + o + b, 0, 2);
          }
        }
        int64_t kend = j0;  // the keys some row sees among these 8
        for (int64_t i = 0; i < nq; ++i) kend = std::max(kend, std::min(n[i], std::min(j0 + 8, c1)));
        if (kend == j0) continue;
        const uint8_t* const* k8 = kp + (j0 - c0);
        float* s = sc + (j0 - c0);
        if constexpr (DirectKvTiles<Isa>) switch (nq) {
            case 4: Isa::template score_tile_kv<KV, 4>(qp, k8, hd, kend - j0, a.scale, s, ss); break;
            case 3: Isa::template score_tile_kv<KV, 3>(qp, k8, hd, kend - j0, a.scale, s, ss); break;
            case 2: Isa::template score_tile_kv<KV, 2>(qp, k8, hd, kend - j0, a.scale, s, ss); break;
            default: Isa::template score_tile_kv<KV, 1>(qp, k8, hd, kend - j0, a.scale, s, ss); break;
          }
      }
    }
    for (int64_t b0 = c0; b0 < c1 && !direct; b0 += kAttnBlock) {
      const int64_t b1 = std::min(b0 + kAttnBlock, c1);
      convert(kb, b0, b1, true);
      for (int64_t i0 = 0; i0 < nq; i0 += 4) {
        const int R = int(std::min<int64_t>(4, nq - i0));
        int64_t kend = b0;  // the keys the tile's rows see in this block
        for (int r = 0; r < R; ++r) kend = std::max(kend, std::min(n[i0 + r], b1));
        if (kend == b0) continue;
        const float* q = qp + i0 * hdp;
        float* s = sc + i0 * ss + (b0 - c0);
        switch (R) {
          case 4: Isa::template score_tile<4>(q, kvb, hdp, kend - b0, a.scale, s, ss); break;
          case 3: Isa::template score_tile<3>(q, kvb, hdp, kend - b0, a.scale, s, ss); break;
          case 2: Isa::template score_tile<2>(q, kvb, hdp, kend - b0, a.scale, s, ss); break;
          default: Isa::template score_tile<1>(q, kvb, hdp, kend - b0, a.scale, s, ss); break;
        }
      }
    }
    // 2. each row's chunk softmax: m, l, weights e in place of the scores; o = 0
    for (int64_t i = 0; i < nq; ++i) {
      if (n[i] <= c0) continue;
      const auto [m, l] = Isa::chunk_softmax(sc + i * ss, std::min(n[i], c1) - c0, a.softcap);
      float* c = cs + i * st;
      c[0] = m;
      c[1] = l;
      std::fill(c + 2, c + 2 + hdp, 0.0f);
    }
    // 3. o += e v over the chunk's keys, a block at a time (direct: the whole chunk at once, still in key order)
    if (direct) {
      const float* e[4];
      float* o[4];
      int64_t cnt[4], nc = kAttnChunk;  // each row's keys in this chunk; the keys all rows have
      int R = 0;
      for (int64_t i = 0; i < nq; ++i) {
        if (n[i] <= c0) continue;
        e[R] = sc + i * ss;
        o[R] = cs + i * st + 2;
        cnt[R] = std::min(n[i], c1) - c0;
        nc = std::min(nc, cnt[R]);
        ++R;
      }
      if constexpr (DirectKvTiles<Isa>) {
        switch (R) {
          case 4: Isa::template value_tile_kv<KV, 4>(e, vp, hd, nc, o); break;
          case 3: Isa::template value_tile_kv<KV, 3>(e, vp, hd, nc, o); break;
          case 2: Isa::template value_tile_kv<KV, 2>(e, vp, hd, nc, o); break;
          case 1: Isa::template value_tile_kv<KV, 1>(e, vp, hd, nc, o); break;
          default: break;
        }
        for (int r = 0; r < R; ++r)
          if (cnt[r] > nc) {
            const float* er = e[r] + nc;
            Isa::template value_tile_kv<KV, 1>(&er, vp + nc, hd, cnt[r] - nc, o + r);
          }
      }
    }
    for (int64_t b0 = c0; b0 < c1 && !direct; b0 += kAttnBlock) {
      const int64_t b1 = std::min(b0 + kAttnBlock, c1);
      int64_t vend = b0;
      for (int64_t i = 0; i < nq; ++i) vend = std::max(vend, std::min(n[i], b1));
      if (vend == b0) continue;
      convert(vb, b0, vend, false);
      int64_t rows[kAttnMaxRows], nr = 0;  // rows with keys in this block
      for (int64_t i = 0; i < nq; ++i)
        if (n[i] > b0) rows[nr++] = i;
      for (int64_t t = 0; t < nr; t += 4) {
        const int R = int(std::min<int64_t>(4, nr - t));
        const float* e[4];
        float* o[4];
        int64_t cnt[4], nc = kAttnBlock;  // each row's keys in this block; the keys all R rows have
        for (int r = 0; r < R; ++r) {
          const int64_t i = rows[t + r];
          e[r] = sc + i * ss + (b0 - c0);
          o[r] = cs + i * st + 2;
          cnt[r] = std::min(n[i], b1) - b0;
          nc = std::min(nc, cnt[r]);
        }
        switch (R) {  // the shared keys through the R-row tile, then each row's remaining ones through a tile of 1
          case 4: Isa::template value_tile<4>(e, kvb, hdp, nc, o); break;
          case 3: Isa::template value_tile<3>(e, kvb, hdp, nc, o); break;
          case 2: Isa::template value_tile<2>(e, kvb, hdp, nc, o); break;
          default: Isa::template value_tile<1>(e, kvb, hdp, nc, o); break;
        }
        for (int r = 0; r < R; ++r)
          if (cnt[r] > nc) {
            const float* er = e[r] + nc;
            Isa::template value_tile<1>(&er, kvb + nc * hdp, hdp, cnt[r] - nc, o + r);
          }
      }
    }
    // 4. fold the chunk into each row's running state (the first chunk is the state)
    for (int64_t i = 0; i < nq; ++i) {
      if (n[i] <= c0) continue;
      if (c0 == 0) std::copy(cs + i * st, cs + i * st + 2 + hd, acc + i * st);
      else Isa::fold(acc + i * st, cs + i * st, hd);
    }
  }
  for (int64_t i = 0; i < nq; ++i) {
    if (a.state[0]) {  // split job: this call's keys are one chunk; its state goes out as is
      std::copy(acc + i * st, acc + i * st + 2 + hd, a.state[i]);
    } else if (n[i] == 0) {
      std::fill(a.out[i], a.out[i] + hd, 0.0f);
    } else {
      Isa::finish(acc + i * st, hd, a.has_sink, a.sink[i], a.out[i]);
    }
  }
}

// attn_row as attn_rows of one query, so a lone row and the same row inside a group agree by construction
template <class Isa, class KV>
void attn_row_chunked(const AttnRowArgs& a) {
  attn_rows_chunked<Isa, KV>(attn_one_row(a));
}

// out = the fold of n chunk states in order (kernels.h, AttnMergeFn), through the same fold / finish as attn_rows
template <class Isa>
void attn_merge_chunked(const float* states, int64_t n, int64_t head_dim, bool has_sink, float sink, float* scratch,
                        float* out) {
  if (n <= 0) {
    std::fill(out, out + head_dim, 0.0f);
    return;
  }
  std::copy(states, states + 2 + head_dim, scratch);
  for (int64_t c = 1; c < n; ++c) Isa::fold(scratch, states + c * (head_dim + 2), head_dim);
  Isa::finish(scratch, head_dim, has_sink, sink, out);
}

}  // namespace
}  // namespace pipit
