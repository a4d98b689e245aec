// AVX2 attention over f32, f16 or q8_0 keys/values (the KV cache dtype): scores = scale * q.k_j, optional soft-cap
// softcap * tanh(score / softcap), softmax, out = sum_j p_j v_j, keys possibly wrapping around a ring.
//
// Chunked (kernels.h, kAttnChunk): a row's keys are taken in chunks of 256 from its first key; each chunk gives a
// state {max score m, sum of e^(s - m), sum of e^(s - m) v}, and states are folded in key order. Within a chunk, 64
// keys at a time are converted to f32 once (dequantized: q8_0 element = d * q as ref forms it) and used by every
// query row of the call (the heads of a GQA group times a block of tokens), so a K/V row is read and converted once
// per job instead of once per query row, and the products run as register tiles:
//  - scores: R rows x J keys (R * J <= 8 accumulators over head_dim, then one transposing reduction);
//  - values: R rows x 16 lanes of o, over the chunk's keys in order.
// Each element of a row's result is computed by the same sequence of operations whatever the tile shape, the other
// rows of the call, or the split of its chunks across calls (scores: one FMA chain per lane over head_dim and the
// same reduction tree for every slot; values: one FMA chain over keys in key order; folds: the noinline fold()
// shared by attn_rows and attn_merge), so attn_rows gives each row attn_row's bits and a split decode step gives
// the unsplit bits (tests/kernels/attention_rows_test.cpp).
#include <algorithm>
#include <cmath>
#include <utility>

#include "backends/cpu/attn_one_row.h"
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

namespace pipit::avx2 {

namespace {

constexpr int64_t kBlock = 64;  // keys converted to f32 at a time (32 KiB for head_dim 128: L1/L2-resident)

// One K/V head row (head_dim elements) -> f32, padded with zeros to hdp (a multiple of 8).
struct KvF32 {
  static void row(const uint8_t* p, int64_t hd, int64_t hdp, float* dst) {
    const float* s = reinterpret_cast<const float*>(p);
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(dst + d, _mm256_loadu_ps(s + d));
    if (d < hd) _mm256_storeu_ps(dst + d, _mm256_maskload_ps(s + d, tail_mask(hd - d)));
    for (d = (hd + 7) / 8 * 8; d < hdp; d += 8) _mm256_storeu_ps(dst + d, _mm256_setzero_ps());
  }
};
struct KvF16 {
  static void row(const uint8_t* p, int64_t hd, int64_t hdp, float* dst) {
    const uint16_t* s = reinterpret_cast<const uint16_t*>(p);
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(dst + d, load_f16(s + d));
    if (d < hd) {
      alignas(16) uint16_t t[8] = {};
      for (int64_t i = d; i < hd; ++i) t[i - d] = s[i];
      _mm256_storeu_ps(dst + d, load_f16(t));
      d += 8;
    }
    for (; d < hdp; d += 8) _mm256_storeu_ps(dst + d, _mm256_setzero_ps());
  }
};
// q8_0 rows (head_dim a multiple of 32, so hdp == head_dim): element = d_block * q, the product ref forms
struct KvQ8 {
  static void row(const uint8_t* p, int64_t hd, int64_t, float* dst) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
    for (int64_t i = 0; i < hd / kQBlock; ++i, ++b, dst += kQBlock) {
      const __m256 d = _mm256_set1_ps(f16_scalar(b->d));
      for (int k = 0; k < kQBlock; k += 8) {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + k));
        _mm256_storeu_ps(dst + k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
      }
    }
  }
};

// The sums of 8 vectors' lanes, one per output lane, by the same tree for every slot:
// ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)).
inline __m256 reduce8(const __m256* c) {
  const __m256 t0 = _mm256_hadd_ps(c[0], c[1]), t1 = _mm256_hadd_ps(c[2], c[3]);
  const __m256 t2 = _mm256_hadd_ps(c[4], c[5]), t3 = _mm256_hadd_ps(c[6], c[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Scores of R query rows (q, hdp floats apart) against keys [0, nk) of the f32 block kb (hdp floats apart, zero
// rows after nk up to a multiple of 8): s[r * ss + j] = scale * q_r . k_j, J keys at a time (entries past nk are
// written too, from the zero rows, and ignored).
template <int R>
void score_tile(const float* q, const float* kb, int64_t hdp, int64_t nk, float scale, float* s, int64_t ss) {
  constexpr int J = R == 1 ? 8 : R == 2 ? 4 : 2;
  const __m256 vs = _mm256_set1_ps(scale);
  for (int64_t j = 0; j < nk; j += J) {
    __m256 acc[8];
    for (auto& c : acc) c = _mm256_setzero_ps();
    const float* k = kb + j * hdp;
    for (int64_t d = 0; d < hdp; d += 8) {
      __m256 kv[J];
      for (int jj = 0; jj < J; ++jj) kv[jj] = _mm256_loadu_ps(k + jj * hdp + d);
      for (int r = 0; r < R; ++r) {
        const __m256 qv = _mm256_loadu_ps(q + r * hdp + d);
        for (int jj = 0; jj < J; ++jj) acc[r * J + jj] = _mm256_fmadd_ps(qv, kv[jj], acc[r * J + jj]);
      }
    }
    alignas(32) float out[8];
    _mm256_store_ps(out, _mm256_mul_ps(reduce8(acc), vs));
    for (int r = 0; r < R; ++r)
      for (int jj = 0; jj < J; ++jj) s[r * ss + j + jj] = out[r * J + jj];
  }
}

// o_r[0, hdp) += sum_j e_r[j] v_j for R rows over keys j in [0, n[r]) of the f32 block vb, in key order; the keys
// all R rows have go through the shared tile, each row's remaining keys through a tile of one.
template <int R>
void value_tile(const float* const* e, const float* vb, int64_t hdp, const int64_t* n, float* const* o) {
  int64_t nc = n[0];
  for (int r = 1; r < R; ++r) nc = std::min(nc, n[r]);
  int64_t d = 0;
  for (; d + 16 <= hdp; d += 16) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = _mm256_loadu_ps(o[r] + d), acc[r][1] = _mm256_loadu_ps(o[r] + d + 8);
    for (int64_t j = 0; j < nc; ++j) {
      const __m256 v0 = _mm256_loadu_ps(vb + j * hdp + d), v1 = _mm256_loadu_ps(vb + j * hdp + d + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 p = _mm256_broadcast_ss(e[r] + j);
        acc[r][0] = _mm256_fmadd_ps(p, v0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(p, v1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(o[r] + d, acc[r][0]), _mm256_storeu_ps(o[r] + d + 8, acc[r][1]);
  }
  if (d < hdp) {  // hdp % 16 == 8
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_loadu_ps(o[r] + d);
    for (int64_t j = 0; j < nc; ++j) {
      const __m256 v0 = _mm256_loadu_ps(vb + j * hdp + d);
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(e[r] + j), v0, acc[r]);
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(o[r] + d, acc[r]);
  }
  if constexpr (R > 1) {
    for (int r = 0; r < R; ++r)
      if (n[r] > nc) {
        const float* er = e[r] + nc;
        const int64_t rest = n[r] - nc;
        value_tile<1>(&er, vb + nc * hdp, hdp, &rest, o + r);
      }
  }
}

// acc = fold(acc, c) for states {m, l, o[hd]} (kernels.h). noinline: attn_rows and attn_merge must run the very
// same instructions (no call-site-dependent contraction or scheduling of the scalar part).
[[gnu::noinline]] void fold(float* acc, const float* c, int64_t hd) {
  const float m = std::max(acc[0], c[0]);
  const float a = std::exp(acc[0] - m), b = std::exp(c[0] - m);
  acc[0] = m;
  acc[1] = std::fma(c[1], b, acc[1] * a);
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  float* o = acc + 2;
  const float* oc = c + 2;
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8)
    _mm256_storeu_ps(o + d, _mm256_fmadd_ps(_mm256_loadu_ps(oc + d), vb, _mm256_mul_ps(_mm256_loadu_ps(o + d), va)));
  if (d < hd) {
    const __m256i mk = tail_mask(hd - d);
    _mm256_maskstore_ps(o + d, mk, _mm256_fmadd_ps(_mm256_maskload_ps(oc + d, mk), vb,
                                                   _mm256_mul_ps(_mm256_maskload_ps(o + d, mk), va)));
  }
}

// out = o / l for a folded state, the sink logit joining l (its probability dropped) when has_sink.
[[gnu::noinline]] void finish(const float* acc, int64_t hd, bool has_sink, float sink, float* out) {
  float f;
  if (has_sink) {
    const float m = std::max(acc[0], sink), a = std::exp(acc[0] - m);
    f = a / std::fma(acc[1], a, std::exp(sink - m));
  } else {
    f = 1.0f / acc[1];
  }
  const __m256 vf = _mm256_set1_ps(f);
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc + 2 + d), vf));
  if (d < hd) {
    const __m256i mk = tail_mask(hd - d);
    _mm256_maskstore_ps(out + d, mk, _mm256_mul_ps(_mm256_maskload_ps(acc + 2 + d, mk), vf));
  }
}

// Soft-cap, max, e^(s - m) in place and their sum for one row's n scores of a chunk; the entries after n up to a
// multiple of 8 become 0. Returns {m, l}.
std::pair<float, float> chunk_softmax(float* s, int64_t n, float softcap) {
  const int64_t n8 = n / 8 * 8;
  const __m256i mk = tail_mask(n - n8);
  if (softcap > 0.0f) {
    const __m256 cap = _mm256_set1_ps(softcap);
    for (int64_t j = 0; j < n8; j += 8)
      _mm256_storeu_ps(s + j, _mm256_mul_ps(cap, tanh_ps(_mm256_div_ps(_mm256_loadu_ps(s + j), cap))));
    if (n8 < n)
      _mm256_maskstore_ps(s + n8, mk, _mm256_mul_ps(cap, tanh_ps(_mm256_div_ps(_mm256_maskload_ps(s + n8, mk), cap))));
  }
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 mx = ninf;
  for (int64_t j = 0; j < n8; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + j));
  if (n8 < n) mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, _mm256_maskload_ps(s + n8, mk), _mm256_castsi256_ps(mk)));
  alignas(32) float t[8];
  _mm256_store_ps(t, mx);
  float m = t[0];
  for (int i = 1; i < 8; ++i) m = std::max(m, t[i]);
  const __m256 vm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < n8; j += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (n8 < n) {
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + n8), vm)), _mm256_castsi256_ps(mk));
    _mm256_storeu_ps(s + n8, e);
    sum = _mm256_add_ps(sum, e);
  }
  __m256 c[8] = {sum, _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                 _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  _mm256_store_ps(t, reduce8(c));
  return {m, t[0]};
}

template <class KV>
void attn_rows(const AttnRowsArgs& a) {
  const int64_t nq = a.n_q, hd = a.head_dim, hdp = (hd + 7) / 8 * 8, ss = kAttnChunk + 16, st = hdp + 8;
  int64_t n[kAttnMaxRows], n_max = 0;
  for (int64_t i = 0; i < nq; ++i) n_max = std::max(n_max, n[i] = a.k1[i] - a.k0);
  // scratch: scores (ss per row) | q padded (hdp per row) | chunk state {m, l, o} | running state | f32 key block
  float* sc = a.scratch;
  float* qp = sc + nq * ss;
  float* cs = qp + nq * hdp;
  float* acc = cs + nq * st;
  float* kvb = acc + nq * st;
  for (int64_t i = 0; i < nq; ++i) {
    float* dst = qp + i * hdp;
    for (int64_t d = 0; d < hd; ++d) dst[d] = a.q[i][d];
    for (int64_t d = hd; d < hdp; ++d) dst[d] = 0.0f;
  }
  const uint8_t* kb = static_cast<const uint8_t*>(a.k);
  const uint8_t* vb = static_cast<const uint8_t*>(a.v);
  // byte offset of the j-th visible key's row; a wrapped ring continues at row 0 (see AttnRowArgs::ring)
  auto off = [&](int64_t j) { return (a.ring > 0 && a.k0 + j >= a.ring ? a.k0 + j - a.ring : a.k0 + j) * a.kv_stride; };
  // keys [j0, j1) -> kvb rows, zero rows after them up to a multiple of 8
  auto convert = [&](const uint8_t* base, int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) KV::row(base + off(j), hd, hdp, kvb + (j - j0) * hdp);
    for (int64_t j = j1 - j0; j < (j1 - j0 + 7) / 8 * 8; ++j)
      for (int64_t d = 0; d < hdp; d += 8) _mm256_storeu_ps(kvb + j * hdp + d, _mm256_setzero_ps());
  };

  for (int64_t c0 = 0; c0 < n_max; c0 += kAttnChunk) {
    const int64_t c1 = std::min(c0 + kAttnChunk, n_max);
    // 1. scores of the chunk, a block of keys at a time, tiles of up to 4 rows
    for (int64_t b0 = c0; b0 < c1; b0 += kBlock) {
      const int64_t b1 = std::min(b0 + kBlock, c1);
      convert(kb, b0, b1);
      for (int64_t i0 = 0; i0 < nq; i0 += 4) {
        const int R = int(std::min<int64_t>(4, nq - i0));
        int64_t kend = b0;  // the keys the tile's rows see in this block
        for (int r = 0; r < R; ++r) kend = std::max(kend, std::min(n[i0 + r], b1));
        if (kend == b0) continue;
        const float* q = qp + i0 * hdp;
        float* s = sc + i0 * ss + (b0 - c0);
        switch (R) {
          case 4: score_tile<4>(q, kvb, hdp, kend - b0, a.scale, s, ss); break;
          case 3: score_tile<3>(q, kvb, hdp, kend - b0, a.scale, s, ss); break;
          case 2: score_tile<2>(q, kvb, hdp, kend - b0, a.scale, s, ss); break;
          default: score_tile<1>(q, kvb, hdp, kend - b0, a.scale, s, ss); break;
        }
      }
    }
    // 2. each row's chunk softmax: m, l, weights e in place of the scores; o = 0
    for (int64_t i = 0; i < nq; ++i) {
      if (n[i] <= c0) continue;
      const auto [m, l] = chunk_softmax(sc + i * ss, std::min(n[i], c1) - c0, a.softcap);
      float* c = cs + i * st;
      c[0] = m;
      c[1] = l;
      for (int64_t d = 0; d < hdp; d += 8) _mm256_storeu_ps(c + 2 + d, _mm256_setzero_ps());
    }
    // 3. o += e v over the chunk's keys, a block at a time
    for (int64_t b0 = c0; b0 < c1; b0 += kBlock) {
      const int64_t b1 = std::min(b0 + kBlock, c1);
      int64_t vend = b0;
      for (int64_t i = 0; i < nq; ++i) vend = std::max(vend, std::min(n[i], b1));
      if (vend == b0) continue;
      convert(vb, b0, vend);
      int64_t rows[kAttnMaxRows], nr = 0;  // rows with keys in this block
      for (int64_t i = 0; i < nq; ++i)
        if (n[i] > b0) rows[nr++] = i;
      for (int64_t t = 0; t < nr; t += 4) {
        const int R = int(std::min<int64_t>(4, nr - t));
        const float* e[4];
        float* o[4];
        int64_t cnt[4];
        for (int r = 0; r < R; ++r) {
          const int64_t i = rows[t + r];
          e[r] = sc + i * ss + (b0 - c0);
          o[r] = cs + i * st + 2;
          cnt[r] = std::min(n[i], b1) - b0;
        }
        switch (R) {
          case 4: value_tile<4>(e, kvb, hdp, cnt, o); break;
          case 3: value_tile<3>(e, kvb, hdp, cnt, o); break;
          case 2: value_tile<2>(e, kvb, hdp, cnt, o); break;
          default: value_tile<1>(e, kvb, hdp, cnt, o); break;
        }
      }
    }
    // 4. fold the chunk into each row's running state (the first chunk is the state)
    for (int64_t i = 0; i < nq; ++i) {
      if (n[i] <= c0) continue;
      if (c0 == 0) std::copy(cs + i * st, cs + i * st + 2 + hd, acc + i * st);
      else fold(acc + i * st, cs + i * st, hd);
    }
  }
  for (int64_t i = 0; i < nq; ++i) {
    if (a.state[0]) {  // split job: this call's keys are one chunk; its state goes out as is
      std::copy(acc + i * st, acc + i * st + 2 + hd, a.state[i]);
    } else if (n[i] == 0) {
      std::fill(a.out[i], a.out[i] + hd, 0.0f);
    } else {
      finish(acc + i * st, hd, a.has_sink, a.sink[i], a.out[i]);
    }
  }
}

template <class KV>
void attn_row(const AttnRowArgs& a) {  // attn_rows of one query (backends/cpu/attn_one_row.h)
  attn_rows<KV>(attn_one_row(a));
}

}  // namespace

void attn_merge(const float* states, int64_t n, int64_t head_dim, bool has_sink, float sink, float* scratch,
                float* out) {
  if (n <= 0) {
    std::fill(out, out + head_dim, 0.0f);
    return;
  }
  std::copy(states, states + 2 + head_dim, scratch);
  for (int64_t c = 1; c < n; ++c) fold(scratch, states + c * (head_dim + 2), head_dim);
  finish(scratch, head_dim, has_sink, sink, out);
}

void attn_row_f32(const AttnRowArgs& a) { attn_row<KvF32>(a); }
void attn_row_f16(const AttnRowArgs& a) { attn_row<KvF16>(a); }
void attn_row_q8_0(const AttnRowArgs& a) { attn_row<KvQ8>(a); }
void attn_rows_f32(const AttnRowsArgs& a) { attn_rows<KvF32>(a); }
void attn_rows_f16(const AttnRowsArgs& a) { attn_rows<KvF16>(a); }
void attn_rows_q8_0(const AttnRowsArgs& a) { attn_rows<KvQ8>(a); }

}  // namespace pipit::avx2
