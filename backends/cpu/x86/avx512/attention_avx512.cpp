// AVX-512 attention over f32, f16 or q8_0 keys/values (the KV cache dtype): scores = scale * q.k_j, optional
// soft-cap softcap * tanh(score / softcap), softmax, out = sum_j p_j v_j, keys possibly wrapping around a ring.
//
// Chunked (kernels.h, kAttnChunk) through the driver the SIMD levels share (backends/cpu/attn_chunked.h: chunks of
// 256 keys folded as {m, l, o} states, 64 keys at a time converted to f32 once for every query row of the call, and
// attn_merge for a decode step split over keys across threads); this file gives it the AVX-512 register tiles:
//  - scores: R rows x J keys, 16 lanes of head_dim per FMA (R * J <= 16 accumulators of the 32 registers), then a
//    transposing reduction of 8 accumulators at a time;
//  - values: R rows x W vectors of o (W = 8, 128 lanes, for up to 2 rows: a Qwen3 decode step's GQA pair holds a
//    whole head_dim in registers), over the block's keys in key order.
// Each element of a row's result is computed by the same sequence of operations whatever the tile shape, the other
// rows of the call, or the split of its chunks across calls (scores: one FMA chain per lane over head_dim and the
// same reduction tree for every slot; values: one FMA chain over keys in key order; folds: the noinline fold()
// shared by attn_rows and attn_merge), so attn_rows gives each row attn_row's bits and a split decode step gives
// the unsplit bits (tests/kernels/attention_rows_test.cpp).
#include <algorithm>
#include <cmath>
#include <utility>

// GCC 12 warns "__Y may be used uninitialized" where _mm512_min_ps / _mm512_extractf64x4_pd and friends, inlined
// here, pass their _mm512_undefined_ps() (`__m512 __Y = __Y;`) as the unused merge source: a false positive (as
// "is used uninitialized" where the inlining makes it sure of it, hsum in chunk_softmax).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "backends/cpu/attn_chunked.h"
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

namespace pipit::avx512 {

namespace {

// Lanes [d, d + 16) of a row of hd values: a full mask inside, a partial one at the tail, none past it.
inline __mmask16 lanes_at(int64_t d, int64_t hd) { return d < hd ? mask16(hd - d) : __mmask16(0); }

// One K/V head row (head_dim elements) -> f32, padded with zeros to hdp (a multiple of 16).
// A row of whole vectors (head_dim 64, 128, 256: every model here) takes the unmasked loop: the masked one's
// per-vector mask and branches were ~40% of a decode step's attention with the cache in L2 (kernels_bench
// attn_decode/avx512/f16/qwen3-0.6b/keys=N/l2: 26 -> 34-36 GB/s without them).
struct KvF32 {
  static int64_t bytes(int64_t hd) { return hd * 4; }
  static void row(const uint8_t* p, int64_t hd, int64_t hdp, float* dst) {
    const float* s = reinterpret_cast<const float*>(p);
    if (hd == hdp) {
#pragma GCC unroll 4
      for (int64_t d = 0; d < hd; d += 16) _mm512_storeu_ps(dst + d, _mm512_loadu_ps(s + d));
      return;
    }
    for (int64_t d = 0; d < hdp; d += 16) _mm512_storeu_ps(dst + d, _mm512_maskz_loadu_ps(lanes_at(d, hd), s + d));
  }
  static __m512 load(const uint8_t* p, int64_t d) { return _mm512_loadu_ps(reinterpret_cast<const float*>(p) + d); }
  static constexpr int kGroup = 1;  // vectors load_group gives
  static void load_group(const uint8_t* p, int64_t d, __m512* v) { v[0] = load(p, d); }
};
struct KvF16 {
  static int64_t bytes(int64_t hd) { return hd * 2; }
  static void row(const uint8_t* p, int64_t hd, int64_t hdp, float* dst) {
    const uint16_t* s = reinterpret_cast<const uint16_t*>(p);
    if (hd == hdp) {
#pragma GCC unroll 4
      for (int64_t d = 0; d < hd; d += 16)
        _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + d))));
      return;
    }
    for (int64_t d = 0; d < hdp; d += 16) _mm512_storeu_ps(dst + d, load_f16(s + d, lanes_at(d, hd)));
  }
  static __m512 load(const uint8_t* p, int64_t d) { return load_f16(reinterpret_cast<const uint16_t*>(p) + d); }
  static constexpr int kGroup = 1;
  static void load_group(const uint8_t* p, int64_t d, __m512* v) { v[0] = load(p, d); }
};
// q8_0 rows (head_dim a multiple of 32, so hdp == head_dim): element = d_block * q, the product ref forms
struct KvQ8 {
  static int64_t bytes(int64_t hd) { return hd / kQBlock * int64_t(sizeof(BlockQ8_0)); }
  static void row(const uint8_t* p, int64_t hd, int64_t, float* dst) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
    for (int64_t i = 0; i < hd / kQBlock; ++i, ++b, dst += kQBlock) {
      const __m512 d = _mm512_set1_ps(f16_scalar(b->d));
      for (int k = 0; k < kQBlock; k += 16) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + k));
        _mm512_storeu_ps(dst + k, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))));
      }
    }
  }
  // the scale widened in the vector unit (exact, as _cvtsh_ss): the same float as row's
  static __m512 load(const uint8_t* p, int64_t d) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p) + d / kQBlock;
    const __m512 sd = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(b->d)));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + d % kQBlock));
    return _mm512_mul_ps(sd, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  }
  // a whole block (d a multiple of 32), its scale widened once
  static constexpr int kGroup = 2;
  static void load_group(const uint8_t* p, int64_t d, __m512* v) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p) + d / kQBlock;
    const __m512 sd = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(b->d)));
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
    v[0] = _mm512_mul_ps(sd, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))));
    v[1] = _mm512_mul_ps(sd, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))));
  }
};

// The sums of 8 vectors' lanes, one per output lane, by the same tree for every slot: the two 256-bit halves
// added, then ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)) over the 8 lanes left.
inline __m256 reduce8(const __m512* c) {
  __m256 h[8];
  for (int i = 0; i < 8; ++i)
    h[i] = _mm256_add_ps(_mm512_castps512_ps256(c[i]),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c[i]), 1)));
  const __m256 t0 = _mm256_hadd_ps(h[0], h[1]), t1 = _mm256_hadd_ps(h[2], h[3]);
  const __m256 t2 = _mm256_hadd_ps(h[4], h[5]), t3 = _mm256_hadd_ps(h[6], h[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// A score tile's R x J accumulators (acc[r * J + jj], padded to NA) reduced 8 at a time, scaled, and written to
// s[r * ss + jj]: the one ending of score_tile and score_tile_kv.
template <int R, int J, int NA>
inline void store_scores(const __m512 (&acc)[NA], __m256 vs, float* s, int64_t ss) {
  alignas(32) float out[NA];
  for (int g = 0; g < NA; g += 8) _mm256_store_ps(out + g, _mm256_mul_ps(reduce8(acc + g), vs));
  for (int r = 0; r < R; ++r)
    for (int jj = 0; jj < J; ++jj) s[r * ss + jj] = out[r * J + jj];
}

// The tiles and the chunk steps the shared driver (backends/cpu/attn_chunked.h) takes, as one struct.
struct Avx512 {
  static constexpr int64_t kLanes = 16;
  static constexpr bool kDirect = true;  // score_tile_kv / value_tile_kv below

  // Scores of R query rows (q, hdp floats apart) against keys [0, nk) of the f32 block kb (hdp floats apart, zero
  // rows after nk up to a multiple of 8): s[r * ss + j] = scale * q_r . k_j, J keys at a time (entries past nk are
  // written too, from the zero rows, and ignored). R * J accumulators, reduced 8 at a time (12 padded to 16).
  template <int R>
  static void score_tile(const float* q, const float* kb, int64_t hdp, int64_t nk, float scale, float* s, int64_t ss) {
    constexpr int J = R <= 2 ? 8 : 4;
    constexpr int NA = (R * J + 7) / 8 * 8;
    const __m256 vs = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < nk; j += J) {
      __m512 acc[NA];
      for (auto& c : acc) c = _mm512_setzero_ps();
      const float* k = kb + j * hdp;
      for (int64_t d = 0; d < hdp; d += 16) {
        __m512 kv[J];
        for (int jj = 0; jj < J; ++jj) kv[jj] = _mm512_loadu_ps(k + jj * hdp + d);
        for (int r = 0; r < R; ++r) {
          const __m512 qv = _mm512_loadu_ps(q + r * hdp + d);
          for (int jj = 0; jj < J; ++jj) acc[r * J + jj] = _mm512_fmadd_ps(qv, kv[jj], acc[r * J + jj]);
        }
      }
      store_scores<R, J>(acc, vs, s + j, ss);
    }
  }

  // score_tile with key j's cache row at kp[j], widened as it is loaded (the same floats KV::row writes, the same
  // FMA chains and reduction, so the same bits).
  template <class KV, int R>
  static void score_tile_kv(const float* q, const uint8_t* const* kp, int64_t hd, int64_t nk, float scale, float* s,
                            int64_t ss) {
    constexpr int J = R <= 2 ? 8 : 4;
    constexpr int NA = (R * J + 7) / 8 * 8;
    const __m256 vs = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < nk; j += J) {
      __m512 acc[NA];
      for (auto& c : acc) c = _mm512_setzero_ps();
      // q8_0: a block of each row at a time (its scale widened once), each vector into its accumulators in lane
      // order as below; the pragmas keep acc in registers (GCC left the loops rolled, acc in memory). f16 / f32
      // take the loop below only (G = 1).
      constexpr int G = KV::kGroup;
      int64_t d = 0;
      if constexpr (G > 1)
        for (; d + 16 * G <= hd; d += 16 * G)
#pragma GCC unroll 8
          for (int jj = 0; jj < J; ++jj) {
            __m512 kv[G];
            KV::load_group(kp[j + jj], d, kv);
#pragma GCC unroll 2
            for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
              for (int r = 0; r < R; ++r)
                acc[r * J + jj] = _mm512_fmadd_ps(_mm512_loadu_ps(q + r * hd + d + 16 * g), kv[g], acc[r * J + jj]);
          }
      for (; d < hd; d += 16) {
        __m512 kv[J];
        for (int jj = 0; jj < J; ++jj) kv[jj] = KV::load(kp[j + jj], d);
        for (int r = 0; r < R; ++r) {
          const __m512 qv = _mm512_loadu_ps(q + r * hd + d);
          for (int jj = 0; jj < J; ++jj) acc[r * J + jj] = _mm512_fmadd_ps(qv, kv[jj], acc[r * J + jj]);
        }
      }
      store_scores<R, J>(acc, vs, s + j, ss);
    }
  }

  // value_lanes with key j's cache row at vp[j], widened as it is loaded.
  template <class KV, int R, int W>
  static inline void value_lanes_kv(const float* const* e, const uint8_t* const* vp, int64_t nc, int64_t d0,
                                    float* const* o) {
    __m512 acc[R][W];
    for (int r = 0; r < R; ++r)
      for (int w = 0; w < W; ++w) acc[r][w] = _mm512_loadu_ps(o[r] + d0 + 16 * w);
    for (int64_t j = 0; j < nc; ++j) {
      __m512 v[W];
      if constexpr (W % KV::kGroup == 0) {
        for (int w = 0; w < W; w += KV::kGroup) KV::load_group(vp[j], d0 + 16 * w, v + w);
      } else {
        for (int w = 0; w < W; ++w) v[w] = KV::load(vp[j], d0 + 16 * w);
      }
      for (int r = 0; r < R; ++r) {
        const __m512 p = _mm512_set1_ps(e[r][j]);
        for (int w = 0; w < W; ++w) acc[r][w] = _mm512_fmadd_ps(p, v[w], acc[r][w]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int w = 0; w < W; ++w) _mm512_storeu_ps(o[r] + d0 + 16 * w, acc[r][w]);
  }

  // value_tile with key j's cache row at vp[j] (hd a multiple of 16)
  template <class KV, int R>
  static void value_tile_kv(const float* const* e, const uint8_t* const* vp, int64_t hd, int64_t nc, float* const* o) {
    constexpr int W = R <= 2 ? 8 : 4;
    int64_t d = 0;
    for (; d + 16 * W <= hd; d += 16 * W) value_lanes_kv<KV, R, W>(e, vp, nc, d, o);
    for (; d + 64 <= hd; d += 64) value_lanes_kv<KV, R, 4>(e, vp, nc, d, o);
    for (; d < hd; d += 16) value_lanes_kv<KV, R, 1>(e, vp, nc, d, o);
  }

  // o_r[d0, d0 + 16 W) += sum_{j < nc} e_r[j] v_j for R rows, in key order (one FMA chain per lane).
  template <int R, int W>
  static inline void value_lanes(const float* const* e, const float* vb, int64_t hdp, int64_t nc, int64_t d0,
                                 float* const* o) {
    __m512 acc[R][W];
    for (int r = 0; r < R; ++r)
      for (int w = 0; w < W; ++w) acc[r][w] = _mm512_loadu_ps(o[r] + d0 + 16 * w);
    for (int64_t j = 0; j < nc; ++j) {
      __m512 v[W];
      for (int w = 0; w < W; ++w) v[w] = _mm512_loadu_ps(vb + j * hdp + d0 + 16 * w);
      for (int r = 0; r < R; ++r) {
        const __m512 p = _mm512_set1_ps(e[r][j]);
        for (int w = 0; w < W; ++w) acc[r][w] = _mm512_fmadd_ps(p, v[w], acc[r][w]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int w = 0; w < W; ++w) _mm512_storeu_ps(o[r] + d0 + 16 * w, acc[r][w]);
  }

  // o_r[0, hdp) += sum_j e_r[j] v_j for R rows over keys j in [0, nc) of the f32 block vb, in key order.
  template <int R>
  static void value_tile(const float* const* e, const float* vb, int64_t hdp, int64_t nc, float* const* o) {
    constexpr int W = R <= 2 ? 8 : 4;  // R * W <= 16 accumulators
    int64_t d = 0;
    for (; d + 16 * W <= hdp; d += 16 * W) value_lanes<R, W>(e, vb, hdp, nc, d, o);
    for (; d + 64 <= hdp; d += 64) value_lanes<R, 4>(e, vb, hdp, nc, d, o);
    for (; d < hdp; d += 16) value_lanes<R, 1>(e, vb, hdp, nc, d, o);
  }

  // acc = fold(acc, c) for states {m, l, o[hd]} (kernels.h). noinline: attn_rows and attn_merge must run the very
  // same instructions (no call-site-dependent contraction or scheduling of the scalar part).
  [[gnu::noinline]] static void fold(float* acc, const float* c, int64_t hd) {
    const auto [a, b] = fold_scalars(acc, c);
    const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
    float* o = acc + 2;
    const float* oc = c + 2;
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      _mm512_mask_storeu_ps(o + d, mk, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, oc + d), vb,
                                                       _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, o + d), va)));
    }
  }

  // out = o / l for a folded state, the sink logit joining l (its probability dropped) when has_sink.
  [[gnu::noinline]] static void finish(const float* acc, int64_t hd, bool has_sink, float sink, float* out) {
    const float f = finish_factor(acc, has_sink, sink);
    const __m512 vf = _mm512_set1_ps(f);
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      _mm512_mask_storeu_ps(out + d, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, acc + 2 + d), vf));
    }
  }

  // Soft-cap, max, e^(s - m) in place and their sum for one row's n scores of a chunk; the entries after n up to a
  // multiple of 16 become 0. Returns {m, l}.
  static std::pair<float, float> chunk_softmax(float* s, int64_t n, float softcap) {
    if (softcap > 0.0f) {
      const __m512 cap = _mm512_set1_ps(softcap);
      for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 mk = mask16(n - j);
        _mm512_mask_storeu_ps(s + j, mk,
                              _mm512_mul_ps(cap, tanh_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(mk, s + j), cap))));
      }
    }
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 mx = ninf;
    for (int64_t j = 0; j < n; j += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(ninf, mask16(n - j), s + j));
    const float m = hmax(mx);
    const __m512 vm = _mm512_set1_ps(m);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 mk = mask16(n - j);
      const __m512 e = _mm512_maskz_mov_ps(mk, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), vm)));
      _mm512_storeu_ps(s + j, e);
      sum = _mm512_add_ps(sum, e);
    }
    return {m, hsum(sum)};
  }
};

}  // namespace

void attn_merge(const float* states, int64_t n, int64_t head_dim, bool has_sink, float sink, float* scratch,
                float* out) {
  attn_merge_chunked<Avx512>(states, n, head_dim, has_sink, sink, scratch, out);
}

void attn_row_f32(const AttnRowArgs& a) { attn_row_chunked<Avx512, KvF32>(a); }
void attn_row_f16(const AttnRowArgs& a) { attn_row_chunked<Avx512, KvF16>(a); }
void attn_row_q8_0(const AttnRowArgs& a) { attn_row_chunked<Avx512, KvQ8>(a); }
void attn_rows_f32(const AttnRowsArgs& a) { attn_rows_chunked<Avx512, KvF32>(a); }
void attn_rows_f16(const AttnRowsArgs& a) { attn_rows_chunked<Avx512, KvF16>(a); }
void attn_rows_q8_0(const AttnRowsArgs& a) { attn_rows_chunked<Avx512, KvQ8>(a); }

}  // namespace pipit::avx512
