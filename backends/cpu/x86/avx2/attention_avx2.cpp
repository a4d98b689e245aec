// AVX2 attention for one query row over f32 or f16 keys/values (the KV cache dtype), as ref: scores = scale * q.k_j,
// optional soft-cap softcap * tanh(score / softcap), softmax, out = sum_j p_j v_j; keys may wrap around a ring.
// Scores are computed 4 keys at a time (4 accumulators, one transposing reduction) and values are accumulated
// 4 keys at a time per 8 lanes of out.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

namespace pipit::avx2 {

namespace {

struct KvF32 {
  static __m256 load(const uint8_t* p, int64_t d) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + d); }
  static float at(const uint8_t* p, int64_t d) { return reinterpret_cast<const float*>(p)[d]; }
};
struct KvF16 {
  static __m256 load(const uint8_t* p, int64_t d) { return load_f16(reinterpret_cast<const uint16_t*>(p) + d); }
  static float at(const uint8_t* p, int64_t d) { return f16_scalar(reinterpret_cast<const uint16_t*>(p)[d]); }
};
// q8_0 rows (head_dim a multiple of 32): 8 values of a block, d_block * q as in ref
struct KvQ8 {
  static __m256 load(const uint8_t* p, int64_t d) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p) + (d >> 5);
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + (d & 31)));
    return _mm256_mul_ps(_mm256_set1_ps(f16_scalar(b->d)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
  }
  static float at(const uint8_t* p, int64_t d) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p) + (d >> 5);
    return f16_scalar(b->d) * float(b->qs[d & 31]);
  }
};

template <class KV>
void attn_row(const AttnRowArgs& a) {
  const int64_t n = a.k1 - a.k0, hd = a.head_dim, hd8 = hd & ~int64_t(7);
  float* s = a.scratch;
  const uint8_t* kb = static_cast<const uint8_t*>(a.k);
  const uint8_t* vb = static_cast<const uint8_t*>(a.v);
  // byte offset of the j-th visible key's row; a wrapped ring continues at row 0 (see AttnRowArgs::ring)
  auto off = [&](int64_t j) { return (a.ring > 0 && a.k0 + j >= a.ring ? a.k0 + j - a.ring : a.k0 + j) * a.kv_stride; };
  const float* q = a.q;

  // scores, 4 keys at a time
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const uint8_t *k0 = kb + off(j), *k1 = kb + off(j + 1), *k2 = kb + off(j + 2), *k3 = kb + off(j + 3);
    __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps(), c2 = _mm256_setzero_ps(), c3 = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd8; d += 8) {
      const __m256 qv = _mm256_loadu_ps(q + d);
      c0 = _mm256_fmadd_ps(qv, KV::load(k0, d), c0);
      c1 = _mm256_fmadd_ps(qv, KV::load(k1, d), c1);
      c2 = _mm256_fmadd_ps(qv, KV::load(k2, d), c2);
      c3 = _mm256_fmadd_ps(qv, KV::load(k3, d), c3);
    }
    alignas(16) float dot[4];
    _mm_store_ps(dot, hsum4(c0, c1, c2, c3));
    for (int64_t d = hd8; d < hd; ++d) {
      dot[0] += q[d] * KV::at(k0, d);
      dot[1] += q[d] * KV::at(k1, d);
      dot[2] += q[d] * KV::at(k2, d);
      dot[3] += q[d] * KV::at(k3, d);
    }
    for (int t = 0; t < 4; ++t) s[j + t] = dot[t] * a.scale;
  }
  for (; j < n; ++j) {
    const uint8_t* k0 = kb + off(j);
    __m256 c0 = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd8; d += 8) c0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), KV::load(k0, d), c0);
    float dot = hsum(c0);
    for (int64_t d = hd8; d < hd; ++d) dot += q[d] * KV::at(k0, d);
    s[j] = dot * a.scale;
  }

  if (a.softcap > 0.0f) {  // s = softcap * tanh(s / softcap)
    const __m256 cap = _mm256_set1_ps(a.softcap);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(s + i, _mm256_mul_ps(cap, tanh_ps(_mm256_div_ps(_mm256_loadu_ps(s + i), cap))));
    if (i < n) {
      const __m256i mask = tail_mask(n - i);
      _mm256_maskstore_ps(s + i, mask, _mm256_mul_ps(cap, tanh_ps(_mm256_div_ps(_mm256_maskload_ps(s + i, mask), cap))));
    }
  }
  softmax(s, with_sink(s, n, a.has_sink, a.sink));

  // out = sum_j p_j v_j
  float* out = a.out;
  for (int64_t d = 0; d < hd; ++d) out[d] = 0.0f;
  for (j = 0; j + 4 <= n; j += 4) {
    const uint8_t *v0 = vb + off(j), *v1 = vb + off(j + 1), *v2 = vb + off(j + 2), *v3 = vb + off(j + 3);
    const __m256 p0 = _mm256_set1_ps(s[j]), p1 = _mm256_set1_ps(s[j + 1]);
    const __m256 p2 = _mm256_set1_ps(s[j + 2]), p3 = _mm256_set1_ps(s[j + 3]);
    for (int64_t d = 0; d < hd8; d += 8) {
      __m256 o = _mm256_loadu_ps(out + d);
      o = _mm256_fmadd_ps(p0, KV::load(v0, d), o);
      o = _mm256_fmadd_ps(p1, KV::load(v1, d), o);
      o = _mm256_fmadd_ps(p2, KV::load(v2, d), o);
      o = _mm256_fmadd_ps(p3, KV::load(v3, d), o);
      _mm256_storeu_ps(out + d, o);
    }
    for (int64_t d = hd8; d < hd; ++d)
      out[d] += s[j] * KV::at(v0, d) + s[j + 1] * KV::at(v1, d) + s[j + 2] * KV::at(v2, d) + s[j + 3] * KV::at(v3, d);
  }
  for (; j < n; ++j) {
    const uint8_t* v0 = vb + off(j);
    const __m256 p0 = _mm256_set1_ps(s[j]);
    for (int64_t d = 0; d < hd8; d += 8)
      _mm256_storeu_ps(out + d, _mm256_fmadd_ps(p0, KV::load(v0, d), _mm256_loadu_ps(out + d)));
    for (int64_t d = hd8; d < hd; ++d) out[d] += s[j] * KV::at(v0, d);
  }
}

}  // namespace

void attn_row_f32(const AttnRowArgs& a) { attn_row<KvF32>(a); }
void attn_row_f16(const AttnRowArgs& a) { attn_row<KvF16>(a); }
void attn_row_q8_0(const AttnRowArgs& a) { attn_row<KvQ8>(a); }

}  // namespace pipit::avx2
