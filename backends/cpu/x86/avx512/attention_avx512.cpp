// AVX-512 attention for one query row over f32 or f16 keys/values, as ref: scores = scale * q.k_j, optional
// soft-cap softcap * tanh(score / softcap), softmax, out = sum_j p_j v_j; keys may wrap around a ring.
// Scores 4 keys at a time (4 accumulators, one transposing reduction); values accumulated 4 keys at a time per
// 16 lanes of out; head_dim tails are masked.
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

namespace pipit::avx512 {

namespace {

struct KvF32 {
  static __m512 load(const uint8_t* p, int64_t d, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(p) + d);
  }
};
struct KvF16 {
  static __m512 load(const uint8_t* p, int64_t d, __mmask16 m) { return load_f16(reinterpret_cast<const uint16_t*>(p) + d, m); }
};

template <class KV>
void attn_row(const AttnRowArgs& a) {
  const int64_t n = a.k1 - a.k0, hd = a.head_dim;
  float* s = a.scratch;
  const uint8_t* kb = static_cast<const uint8_t*>(a.k);
  const uint8_t* vb = static_cast<const uint8_t*>(a.v);
  // byte offset of the j-th visible key's row; a wrapped ring continues at row 0 (see AttnRowArgs::ring)
  auto off = [&](int64_t j) { return (a.ring > 0 && a.k0 + j >= a.ring ? a.k0 + j - a.ring : a.k0 + j) * a.kv_stride; };
  const float* q = a.q;

  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const uint8_t *k0 = kb + off(j), *k1 = kb + off(j + 1), *k2 = kb + off(j + 2), *k3 = kb + off(j + 3);
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps(), c3 = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      const __m512 qv = _mm512_maskz_loadu_ps(mk, q + d);
      c0 = _mm512_fmadd_ps(qv, KV::load(k0, d, mk), c0);
      c1 = _mm512_fmadd_ps(qv, KV::load(k1, d, mk), c1);
      c2 = _mm512_fmadd_ps(qv, KV::load(k2, d, mk), c2);
      c3 = _mm512_fmadd_ps(qv, KV::load(k3, d, mk), c3);
    }
    _mm_storeu_ps(s + j, _mm_mul_ps(hsum4(c0, c1, c2, c3), _mm_set1_ps(a.scale)));
  }
  for (; j < n; ++j) {
    __m512 c0 = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      c0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, q + d), KV::load(kb + off(j), d, mk), c0);
    }
    s[j] = hsum(c0) * a.scale;
  }

  if (a.softcap > 0.0f) {  // s = softcap * tanh(s / softcap)
    const __m512 cap = _mm512_set1_ps(a.softcap);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 mk = mask16(n - i);
      _mm512_mask_storeu_ps(s + i, mk, _mm512_mul_ps(cap, tanh_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(mk, s + i), cap))));
    }
  }
  softmax(s, n);

  float* out = a.out;
  for (int64_t d = 0; d < hd; d += 16) _mm512_mask_storeu_ps(out + d, mask16(hd - d), _mm512_setzero_ps());
  for (j = 0; j + 4 <= n; j += 4) {
    const uint8_t *v0 = vb + off(j), *v1 = vb + off(j + 1), *v2 = vb + off(j + 2), *v3 = vb + off(j + 3);
    const __m512 p0 = _mm512_set1_ps(s[j]), p1 = _mm512_set1_ps(s[j + 1]);
    const __m512 p2 = _mm512_set1_ps(s[j + 2]), p3 = _mm512_set1_ps(s[j + 3]);
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
    const __m512 p0 = _mm512_set1_ps(s[j]);
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 mk = mask16(hd - d);
      _mm512_mask_storeu_ps(out + d, mk, _mm512_fmadd_ps(p0, KV::load(vb + off(j), d, mk), _mm512_maskz_loadu_ps(mk, out + d)));
    }
  }
}

}  // namespace

void attn_row_f32(const AttnRowArgs& a) { attn_row<KvF32>(a); }
void attn_row_f16(const AttnRowArgs& a) { attn_row<KvF16>(a); }

}  // namespace pipit::avx512
