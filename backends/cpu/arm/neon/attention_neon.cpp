// NEON attention for one query row over f32 or f16 keys/values (the KV cache dtype), as ref: scores = scale * q.k_j,
// optional soft-cap softcap * tanh(score / softcap), softmax, out = sum_j p_j v_j; keys may wrap around a ring.
// Scores are computed 4 keys at a time (4 accumulators, one pairwise reduction) and values are accumulated
// 4 keys at a time per 4 lanes of out; head_dim % 4 tails are scalar.
#include "backends/cpu/arm/neon/kernels_neon.h"
#include "backends/cpu/arm/neon/simd_neon.h"

namespace pipit::neon {

namespace {

struct KvF32 {
  static float32x4_t load(const uint8_t* p, int64_t d) { return vld1q_f32(reinterpret_cast<const float*>(p) + d); }
  static float at(const uint8_t* p, int64_t d) { return reinterpret_cast<const float*>(p)[d]; }
};
struct KvF16 {
  static float32x4_t load(const uint8_t* p, int64_t d) { return load_f16(reinterpret_cast<const uint16_t*>(p) + d); }
  static float at(const uint8_t* p, int64_t d) { return f16_scalar(reinterpret_cast<const uint16_t*>(p)[d]); }
};
// q8_0 rows (head_dim a multiple of 32): 4 values of a block, d_block * q as in ref (a 4-byte load: never past
// the block)
struct KvQ8 {
  static float32x4_t load(const uint8_t* p, int64_t d) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p) + (d >> 5);
    int32_t w;
    std::memcpy(&w, b->qs + (d & 31), 4);
    const int16x8_t q16 = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w)));
    return vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q16))), f16_scalar(b->d));
  }
  static float at(const uint8_t* p, int64_t d) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p) + (d >> 5);
    return f16_scalar(b->d) * float(b->qs[d & 31]);
  }
};

template <class KV>
void attn_row(const AttnRowArgs& a) {
  const int64_t n = a.k1 - a.k0, hd = a.head_dim, hd4 = hd & ~int64_t(3);
  float* s = a.scratch;
  const uint8_t* kb = static_cast<const uint8_t*>(a.k);
  const uint8_t* vb = static_cast<const uint8_t*>(a.v);
  // byte offset of the j-th visible key's row; a wrapped ring continues at row 0 (see AttnRowArgs::ring)
  auto off = [&](int64_t j) { return (a.ring > 0 && a.k0 + j >= a.ring ? a.k0 + j - a.ring : a.k0 + j) * a.kv_stride; };
  const float* q = a.q;

  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const uint8_t *k0 = kb + off(j), *k1 = kb + off(j + 1), *k2 = kb + off(j + 2), *k3 = kb + off(j + 3);
    float32x4_t c0 = vdupq_n_f32(0.0f), c1 = c0, c2 = c0, c3 = c0;
    for (int64_t d = 0; d < hd4; d += 4) {
      const float32x4_t qv = vld1q_f32(q + d);
      c0 = vfmaq_f32(c0, qv, KV::load(k0, d));
      c1 = vfmaq_f32(c1, qv, KV::load(k1, d));
      c2 = vfmaq_f32(c2, qv, KV::load(k2, d));
      c3 = vfmaq_f32(c3, qv, KV::load(k3, d));
    }
    float dot[4];
    vst1q_f32(dot, hsum4(c0, c1, c2, c3));
    for (int64_t d = hd4; d < hd; ++d) {
      dot[0] += q[d] * KV::at(k0, d);
      dot[1] += q[d] * KV::at(k1, d);
      dot[2] += q[d] * KV::at(k2, d);
      dot[3] += q[d] * KV::at(k3, d);
    }
    for (int t = 0; t < 4; ++t) s[j + t] = dot[t] * a.scale;
  }
  for (; j < n; ++j) {
    const uint8_t* k0 = kb + off(j);
    float32x4_t c0 = vdupq_n_f32(0.0f);
    for (int64_t d = 0; d < hd4; d += 4) c0 = vfmaq_f32(c0, vld1q_f32(q + d), KV::load(k0, d));
    float dot = vaddvq_f32(c0);
    for (int64_t d = hd4; d < hd; ++d) dot += q[d] * KV::at(k0, d);
    s[j] = dot * a.scale;
  }

  if (a.softcap > 0.0f) {  // s = softcap * tanh(s / softcap); the tail on a padded copy
    const float32x4_t cap = vdupq_n_f32(a.softcap);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(s + i, vmulq_f32(cap, tanh_ps(vdivq_f32(vld1q_f32(s + i), cap))));
    if (i < n) {
      float t[4] = {}, o[4];
      for (int64_t u = 0; u < n - i; ++u) t[u] = s[i + u];
      vst1q_f32(o, vmulq_f32(cap, tanh_ps(vdivq_f32(vld1q_f32(t), cap))));
      for (int64_t u = 0; u < n - i; ++u) s[i + u] = o[u];
    }
  }
  softmax(s, with_sink(s, n, a.has_sink, a.sink));

  float* out = a.out;
  for (int64_t d = 0; d < hd; ++d) out[d] = 0.0f;
  for (j = 0; j + 4 <= n; j += 4) {
    const uint8_t *v0 = vb + off(j), *v1 = vb + off(j + 1), *v2 = vb + off(j + 2), *v3 = vb + off(j + 3);
    const float p0 = s[j], p1 = s[j + 1], p2 = s[j + 2], p3 = s[j + 3];
    for (int64_t d = 0; d < hd4; d += 4) {
      float32x4_t o = vld1q_f32(out + d);
      o = vfmaq_n_f32(o, KV::load(v0, d), p0);
      o = vfmaq_n_f32(o, KV::load(v1, d), p1);
      o = vfmaq_n_f32(o, KV::load(v2, d), p2);
      o = vfmaq_n_f32(o, KV::load(v3, d), p3);
      vst1q_f32(out + d, o);
    }
    for (int64_t d = hd4; d < hd; ++d)
      out[d] += p0 * KV::at(v0, d) + p1 * KV::at(v1, d) + p2 * KV::at(v2, d) + p3 * KV::at(v3, d);
  }
  for (; j < n; ++j) {
    const uint8_t* v0 = vb + off(j);
    for (int64_t d = 0; d < hd4; d += 4) vst1q_f32(out + d, vfmaq_n_f32(vld1q_f32(out + d), KV::load(v0, d), s[j]));
    for (int64_t d = hd4; d < hd; ++d) out[d] += s[j] * KV::at(v0, d);
  }
}

}  // namespace

void attn_row_f32(const AttnRowArgs& a) { attn_row<KvF32>(a); }
void attn_row_f16(const AttnRowArgs& a) { attn_row<KvF16>(a); }
void attn_row_q8_0(const AttnRowArgs& a) { attn_row<KvQ8>(a); }

}  // namespace pipit::neon
