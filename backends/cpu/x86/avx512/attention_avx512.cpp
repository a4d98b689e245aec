// AVX-512 attention for query rows over f32 or f16 keys/values, as ref: scores = scale * q.k_j, optional
// soft-cap softcap * tanh(score / softcap), softmax, out = sum_j p_j v_j; keys may wrap around a ring.
// Scores 4 keys at a time (4 accumulators, one transposing reduction); values accumulated 4 keys at a time per
// 16 lanes of out; head_dim tails are masked. attn_rows runs several query rows that share K/V (a GQA group over a
// block of tokens: the prefill case) with each 4-key group converted to f32 once for all of them; attn_row is
// attn_rows of one row, so a row's result is the same bits however queries are grouped.
#include "backends/cpu/attn_one_row.h"
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

#include <algorithm>
#include <climits>

namespace pipit::avx512 {

namespace {

struct KvF32 {
  static constexpr bool kPrefetch = true;
  static constexpr int64_t kBytes = 4;
  static __m512 load(const uint8_t* p, int64_t d, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(p) + d);
  }
};
struct KvF16 {
  static constexpr bool kPrefetch = true;
  static constexpr int64_t kBytes = 2;
  static __m512 load(const uint8_t* p, int64_t d, __mmask16 m) { return load_f16(reinterpret_cast<const uint16_t*>(p) + d, m); }
};

// q8_0 rows (head_dim a multiple of 32, so d is a multiple of 16 and the mask is full): 16 values of a block,
// d_block * q as in ref. kBytes: the prefetch length per row (the scales add 1/16).
struct KvQ8 {
  static constexpr bool kPrefetch = true;
  static constexpr int64_t kBytes = 1;
  static __m512 load(const uint8_t* p, int64_t d, __mmask16) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p) + (d >> 5);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + (d & 31)));
    return _mm512_mul_ps(_mm512_set1_ps(f16_scalar(b->d)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  }
};

// K/V rows are head_dim values a cache row apart (all kv heads of a position share a row): a strided walk the
// hardware prefetcher does not follow, so rows a few keys ahead are prefetched by hand.
constexpr int64_t kAheadKeys = 8;
template <class Row>
inline void prefetch_rows(Row row, int64_t j, int64_t n, int64_t bytes) {
  for (int64_t r = j; r < std::min(n, j + 4); ++r)
    for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(row(r)) + b, _MM_HINT_T0);
}

// Scores of one query row for the keys [j0, n): groups of 4 keys (4 accumulators, one transposing reduction)
// while a whole group fits, then one key at a time. `key(j)` gives the f32-convertible row of key j.
template <class KV, class KeyRow>
inline void scores(const float* q, int64_t hd, float scale, int64_t j0, int64_t n, float* s, KeyRow key) {
  int64_t j = j0;
  for (; j + 4 <= n; j += 4) {
    if constexpr (KV::kPrefetch) prefetch_rows(key, j + kAheadKeys, n, hd * KV::kBytes);
    const uint8_t *k0 = key(j), *k1 = key(j + 1), *k2 = key(j + 2), *k3 = key(j + 3);
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps(), c3 = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      const __m512 qv = _mm512_maskz_loadu_ps(mk, q + d);
      c0 = _mm512_fmadd_ps(qv, KV::load(k0, d, mk), c0);
      c1 = _mm512_fmadd_ps(qv, KV::load(k1, d, mk), c1);
      c2 = _mm512_fmadd_ps(qv, KV::load(k2, d, mk), c2);
      c3 = _mm512_fmadd_ps(qv, KV::load(k3, d, mk), c3);
    }
    _mm_storeu_ps(s + j, _mm_mul_ps(hsum4(c0, c1, c2, c3), _mm_set1_ps(scale)));
  }
  for (; j < n; ++j) {
    __m512 c0 = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      c0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, q + d), KV::load(key(j), d, mk), c0);
    }
    s[j] = hsum(c0) * scale;
  }
}

// out += sum_j p_j v_j for the keys [j0, n): groups of 4 keys while a whole group fits, then one at a time.
template <class KV, class ValRow>
inline void weighted_values(const float* p, int64_t hd, int64_t j0, int64_t n, float* out, ValRow val) {
  int64_t j = j0;
  for (; j + 4 <= n; j += 4) {
    if constexpr (KV::kPrefetch) prefetch_rows(val, j + kAheadKeys, n, hd * KV::kBytes);
    const uint8_t *v0 = val(j), *v1 = val(j + 1), *v2 = val(j + 2), *v3 = val(j + 3);
    const __m512 p0 = _mm512_set1_ps(p[j]), p1 = _mm512_set1_ps(p[j + 1]);
    const __m512 p2 = _mm512_set1_ps(p[j + 2]), p3 = _mm512_set1_ps(p[j + 3]);
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      __m512 o = _mm512_maskz_loadu_ps(mk, out + d);
      o = _mm512_fmadd_ps(p0, KV::load(v0, d, mk), o);
      o = _mm512_fmadd_ps(p1, KV::load(v1, d, mk), o);
      o = _mm512_fmadd_ps(p2, KV::load(v2, d, mk), o);
      o = _mm512_fmadd_ps(p3, KV::load(v3, d, mk), o);
      _mm512_mask_storeu_ps(out + d, mk, o);
    }
  }
  for (; j < n; ++j) {
    const __m512 p0 = _mm512_set1_ps(p[j]);
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      _mm512_mask_storeu_ps(out + d, mk, _mm512_fmadd_ps(p0, KV::load(val(j), d, mk), _mm512_maskz_loadu_ps(mk, out + d)));
    }
  }
}

// Scores of R query rows for the 4 keys whose f32 rows are kf[0..3] (one group): each row's accumulators see the
// same FMAs in the same order as in scores() (so the same bits); the K vectors are loaded once for the R rows.
template <int R>
inline void scores_group(const float* const* q, const float* kf, int64_t hd, float scale, int64_t j, float* const* s) {
  __m512 c[R][4];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < 4; ++t) c[i][t] = _mm512_setzero_ps();
  for (int64_t d = 0; d < hd; d += 16) {
    const __mmask16 mk = mask16(hd - d);
    __m512 kv[4];
    for (int t = 0; t < 4; ++t) kv[t] = _mm512_maskz_loadu_ps(mk, kf + t * hd + d);
    for (int i = 0; i < R; ++i) {
      const __m512 qv = _mm512_maskz_loadu_ps(mk, q[i] + d);
      for (int t = 0; t < 4; ++t) c[i][t] = _mm512_fmadd_ps(qv, kv[t], c[i][t]);
    }
  }
  for (int i = 0; i < R; ++i)
    _mm_storeu_ps(s[i] + j, _mm_mul_ps(hsum4(c[i][0], c[i][1], c[i][2], c[i][3]), _mm_set1_ps(scale)));
}

// out_i += sum over the group's 4 keys of p_i[j + t] v_t for R query rows, in weighted_values()' order; the V
// vectors (f32 rows vf[0..3]) are loaded once for the R rows.
template <int R>
inline void values_group(const float* const* p, const float* vf, int64_t hd, int64_t j, float* const* out) {
  __m512 pb[R][4];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < 4; ++t) pb[i][t] = _mm512_set1_ps(p[i][j + t]);
  for (int64_t d = 0; d < hd; d += 16) {
    const __mmask16 mk = mask16(hd - d);
    __m512 vv[4];
    for (int t = 0; t < 4; ++t) vv[t] = _mm512_maskz_loadu_ps(mk, vf + t * hd + d);
    for (int i = 0; i < R; ++i) {
      __m512 o = _mm512_maskz_loadu_ps(mk, out[i] + d);
      for (int t = 0; t < 4; ++t) o = _mm512_fmadd_ps(pb[i][t], vv[t], o);
      _mm512_mask_storeu_ps(out[i] + d, mk, o);
    }
  }
}

// Rows j .. j+3 of K or V as f32 in buf (4 x hd), so several query rows can use one conversion.
template <class KV, class Row>
inline void convert4(int64_t hd, int64_t j, int64_t n, float* buf, Row row) {
  prefetch_rows(row, j + kAheadKeys, n, hd * KV::kBytes);
  for (int r = 0; r < 4; ++r)
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      _mm512_mask_storeu_ps(buf + r * hd + d, mk, KV::load(row(j + r), d, mk));
    }
}

// Every query row follows the same steps as if it were alone: scores in groups of 4 keys from k0 while a group fits
// the row's own key count, then single keys; soft-cap; softmax; values in the same grouping. The groups that fit every
// row are done once for all rows from an f32 copy of the 4 keys (exact, so the same values), the rest row by row.
template <class KV>
void attn_rows(const AttnRowsArgs& a) {
  const int64_t hd = a.head_dim, nq = a.n_q;
  int64_t n[kAttnMaxRows], n_max = 0, shared = INT64_MAX;
  for (int64_t i = 0; i < nq; ++i) {
    n[i] = a.k1[i] - a.k0;
    n_max = std::max(n_max, n[i]);
    shared = std::min(shared, n[i] / 4 * 4);  // keys in groups of 4 for every row
  }
  if (nq == 1) shared = 0;  // nothing to share: read K/V in place (and need no scratch beyond the scores)
  const int64_t s_stride = n_max + (a.has_sink ? 1 : 0);  // a sink logit after each row's scores
  float* buf = a.scratch + nq * s_stride;
  float* srow[kAttnMaxRows];  // each row's scores, then probabilities
  for (int64_t i = 0; i < nq; ++i) srow[i] = a.scratch + i * s_stride;
  const uint8_t* kb = static_cast<const uint8_t*>(a.k);
  const uint8_t* vb = static_cast<const uint8_t*>(a.v);
  // byte offset of the j-th visible key's row; a wrapped ring continues at row 0 (see AttnRowArgs::ring)
  auto off = [&](int64_t j) { return (a.ring > 0 && a.k0 + j >= a.ring ? a.k0 + j - a.ring : a.k0 + j) * a.kv_stride; };
  auto krow = [&](int64_t j) { return kb + off(j); };
  auto vrow = [&](int64_t j) { return vb + off(j); };

  for (int64_t j = 0; j < shared; j += 4) {  // 1. scores: shared groups, then each row's own remainder
    prefetch_rows(vrow, j, shared, hd * KV::kBytes);  // V rows are read after the softmax: fetch them meanwhile
    convert4<KV>(hd, j, shared, buf, krow);
    int64_t i = 0;
    for (; i + 4 <= nq; i += 4) scores_group<4>(a.q + i, buf, hd, a.scale, j, srow + i);
    for (; i < nq; ++i) scores_group<1>(a.q + i, buf, hd, a.scale, j, srow + i);
  }
  for (int64_t i = 0; i < nq; ++i) {
    float* s = srow[i];
    scores<KV>(a.q[i], hd, a.scale, shared, n[i], s, krow);
    if (a.softcap > 0.0f) {  // s = softcap * tanh(s / softcap)
      const __m512 cap = _mm512_set1_ps(a.softcap);
      for (int64_t j = 0; j < n[i]; j += 16) {
        const __mmask16 mk = mask16(n[i] - j);
        _mm512_mask_storeu_ps(s + j, mk, _mm512_mul_ps(cap, tanh_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(mk, s + j), cap))));
      }
    }
    softmax(s, with_sink(s, n[i], a.has_sink, a.sink[i]));
    for (int64_t d = 0; d < hd; d += 16) _mm512_mask_storeu_ps(a.out[i] + d, mask16(hd - d), _mm512_setzero_ps());
  }
  for (int64_t j = 0; j < shared; j += 4) {  // 2. values, in the same order
    convert4<KV>(hd, j, shared, buf, vrow);
    int64_t i = 0;
    for (; i + 4 <= nq; i += 4) values_group<4>(srow + i, buf, hd, j, a.out + i);
    for (; i < nq; ++i) values_group<1>(srow + i, buf, hd, j, a.out + i);
  }
  for (int64_t i = 0; i < nq; ++i) weighted_values<KV>(srow[i], hd, shared, n[i], a.out[i], vrow);
}

template <class KV>
void attn_row(const AttnRowArgs& a) {  // attn_rows of one query (backends/cpu/attn_one_row.h)
  attn_rows<KV>(attn_one_row(a));
}

}  // namespace

void attn_row_f32(const AttnRowArgs& a) { attn_row<KvF32>(a); }
void attn_row_f16(const AttnRowArgs& a) { attn_row<KvF16>(a); }
void attn_rows_f32(const AttnRowsArgs& a) { attn_rows<KvF32>(a); }
void attn_rows_f16(const AttnRowsArgs& a) { attn_rows<KvF16>(a); }
void attn_row_q8_0(const AttnRowArgs& a) { attn_row<KvQ8>(a); }
void attn_rows_q8_0(const AttnRowsArgs& a) { attn_rows<KvQ8>(a); }

}  // namespace pipit::avx512
