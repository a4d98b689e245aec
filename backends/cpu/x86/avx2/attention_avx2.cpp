// AVX2 attention over f32, f16 or q8_0 keys/values (the KV cache dtype): scores = scale * q.k_j, optional soft-cap
// softcap * tanh(score / softcap), softmax, out = sum_j p_j v_j, keys possibly wrapping around a ring.
//
// Chunked (kernels.h, kAttnChunk) through the driver the SIMD levels share (backends/cpu/attn_chunked.h: chunks of
// 256 keys folded as {m, l, o} states, 64 keys at a time converted to f32 once for every query row of the call);
// this file gives it the AVX2 register tiles:
//  - scores: R rows x J keys (R * J <= 8 accumulators over head_dim, then one transposing reduction);
//  - values: R rows x 16 lanes of o, over the block's keys in order.
// Each element of a row's result is computed by the same sequence of operations whatever the tile shape, the other
// rows of the call, or the split of its chunks across calls (scores: one FMA chain per lane over head_dim and the
// same reduction tree for every slot; values: one FMA chain over keys in key order; folds: the noinline fold()
// shared by attn_rows and attn_merge), so attn_rows gives each row attn_row's bits and a split decode step gives
// the unsplit bits (tests/kernels/attention_rows_test.cpp).
#include <algorithm>
#include <cmath>
#include <utility>

#include "backends/cpu/attn_chunked.h"
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

namespace pipit::avx2 {

namespace {

// One K/V head row (head_dim elements) -> f32, padded with zeros to hdp (a multiple of 8).
struct KvF32 {
  static int64_t bytes(int64_t hd) { return hd * 4; }
  static void row(const uint8_t* p, int64_t hd, int64_t hdp, float* dst) {
    const float* s = reinterpret_cast<const float*>(p);
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(dst + d, _mm256_loadu_ps(s + d));
    if (d < hd) _mm256_storeu_ps(dst + d, _mm256_maskload_ps(s + d, tail_mask(hd - d)));
    for (d = (hd + 7) / 8 * 8; d < hdp; d += 8) _mm256_storeu_ps(dst + d, _mm256_setzero_ps());
  }
};
struct KvF16 {
  static int64_t bytes(int64_t hd) { return hd * 2; }
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
  static int64_t bytes(int64_t hd) { return hd / kQBlock * int64_t(sizeof(BlockQ8_0)); }
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

// The tiles and the chunk steps the shared driver (backends/cpu/attn_chunked.h) takes, as one struct.
struct Avx2 {
  static constexpr int64_t kLanes = 8;

  // Scores of R query rows (q, hdp floats apart) against keys [0, nk) of the f32 block kb (hdp floats apart, zero
  // rows after nk up to a multiple of 8): s[r * ss + j] = scale * q_r . k_j, J keys at a time (entries past nk are
  // written too, from the zero rows, and ignored).
  template <int R>
  static void score_tile(const float* q, const float* kb, int64_t hdp, int64_t nk, float scale, float* s, int64_t ss) {
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

  // o_r[0, hdp) += sum_j e_r[j] v_j for R rows over keys j in [0, nc) of the f32 block vb, in key order.
  template <int R>
  static void value_tile(const float* const* e, const float* vb, int64_t hdp, int64_t nc, float* const* o) {
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
  }

  // acc = fold(acc, c) for states {m, l, o[hd]} (kernels.h). noinline: attn_rows and attn_merge must run the very
  // same instructions (no call-site-dependent contraction or scheduling of the scalar part).
  [[gnu::noinline]] static void fold(float* acc, const float* c, int64_t hd) {
    const auto [a, b] = fold_scalars(acc, c);
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
  [[gnu::noinline]] static void finish(const float* acc, int64_t hd, bool has_sink, float sink, float* out) {
    const float f = finish_factor(acc, has_sink, sink);
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
  static std::pair<float, float> chunk_softmax(float* s, int64_t n, float softcap) {
    const int64_t n8 = n / 8 * 8;
    const __m256i mk = tail_mask(n - n8);
    if (softcap > 0.0f) {
      const __m256 cap = _mm256_set1_ps(softcap);
      for (int64_t j = 0; j < n8; j += 8)
        _mm256_storeu_ps(s + j, _mm256_mul_ps(cap, tanh_ps(_mm256_div_ps(_mm256_loadu_ps(s + j), cap))));
      if (n8 < n)
        _mm256_maskstore_ps(s + n8, mk,
                            _mm256_mul_ps(cap, tanh_ps(_mm256_div_ps(_mm256_maskload_ps(s + n8, mk), cap))));
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
};

}  // namespace

void attn_merge(const float* states, int64_t n, int64_t head_dim, bool has_sink, float sink, float* scratch,
                float* out) {
  attn_merge_chunked<Avx2>(states, n, head_dim, has_sink, sink, scratch, out);
}

void attn_row_f32(const AttnRowArgs& a) { attn_row_chunked<Avx2, KvF32>(a); }
void attn_row_f16(const AttnRowArgs& a) { attn_row_chunked<Avx2, KvF16>(a); }
void attn_row_q8_0(const AttnRowArgs& a) { attn_row_chunked<Avx2, KvQ8>(a); }
void attn_rows_f32(const AttnRowsArgs& a) { attn_rows_chunked<Avx2, KvF32>(a); }
void attn_rows_f16(const AttnRowsArgs& a) { attn_rows_chunked<Avx2, KvF16>(a); }
void attn_rows_q8_0(const AttnRowsArgs& a) { attn_rows_chunked<Avx2, KvQ8>(a); }

}  // namespace pipit::avx2
