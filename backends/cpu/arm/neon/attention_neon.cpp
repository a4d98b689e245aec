// NEON attention over f32, f16 or q8_0 keys/values (the KV cache dtype): scores = scale * q.k_j, optional soft-cap
// softcap * tanh(score / softcap), softmax, out = sum_j p_j v_j, keys possibly wrapping around a ring.
//
// Chunked through the driver the SIMD levels share (backends/cpu/attn_chunked.h, kernels.h kAttnChunk): chunks of 256
// keys from the first key, each a state {m, l, o} folded in key order; 64 keys at a time converted to f32 once for
// every query row of the call; scores as R rows x J keys register tiles (one FMA chain per lane over head_dim, then
// the same pairwise tree for every slot), values as R rows x 16 lanes over the keys in order, folds in the noinline
// fold() that attn_merge shares. So attn_rows gives each row attn_row's bits, and a split decode step the unsplit
// bits, whatever the grouping or the number of threads.
#include <algorithm>
#include <cmath>
#include <utility>

#include "backends/cpu/attn_chunked.h"
#include "backends/cpu/arm/neon/kernels_neon.h"
#include "backends/cpu/arm/neon/simd_neon.h"

namespace pipit::neon {

namespace {

// One K/V head row (head_dim elements) -> f32, padded with zeros to hdp (a multiple of 4).
struct KvF32 {
  static int64_t bytes(int64_t hd) { return hd * 4; }
  static void row(const uint8_t* p, int64_t hd, int64_t hdp, float* dst) {
    const float* s = reinterpret_cast<const float*>(p);
    int64_t d = 0;
    for (; d + 4 <= hd; d += 4) vst1q_f32(dst + d, vld1q_f32(s + d));
    for (; d < hd; ++d) dst[d] = s[d];
    for (; d < hdp; ++d) dst[d] = 0.0f;
  }
};
struct KvF16 {
  static int64_t bytes(int64_t hd) { return hd * 2; }
  static void row(const uint8_t* p, int64_t hd, int64_t hdp, float* dst) {
    const uint16_t* s = reinterpret_cast<const uint16_t*>(p);
    int64_t d = 0;
    for (; d + 4 <= hd; d += 4) vst1q_f32(dst + d, load_f16(s + d));
    for (; d < hd; ++d) dst[d] = f16_scalar(s[d]);
    for (; d < hdp; ++d) dst[d] = 0.0f;
  }
};
// q8_0 rows (head_dim a multiple of 32, so hdp == head_dim): element = d_block * q, the product ref forms
struct KvQ8 {
  static int64_t bytes(int64_t hd) { return hd / kQBlock * int64_t(sizeof(BlockQ8_0)); }
  static void row(const uint8_t* p, int64_t hd, int64_t, float* dst) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
    for (int64_t i = 0; i < hd / kQBlock; ++i, ++b, dst += kQBlock) {
      const float d = f16_scalar(b->d);
      for (int k = 0; k < kQBlock; k += 8) {
        const int16x8_t q16 = vmovl_s8(vld1_s8(b->qs + k));
        vst1q_f32(dst + k, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q16))), d));
        vst1q_f32(dst + k + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(q16))), d));
      }
    }
  }
};

// The sums of 4 vectors' lanes, one per output lane, by the same tree for every slot: (x0 + x1) + (x2 + x3).
inline float32x4_t reduce4(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d) { return hsum4(a, b, c, d); }

// The tiles and the chunk steps the shared driver (backends/cpu/attn_chunked.h) takes, as one struct.
struct Neon {
  static constexpr int64_t kLanes = 4;

  // Scores of R query rows (q, hdp floats apart) against keys [0, nk) of the f32 block kb (hdp floats apart, zero rows
  // after nk up to a multiple of 8): s[r * ss + j] = scale * q_r . k_j, J keys at a time (entries past nk are written
  // too, from the zero rows, and ignored).
  template <int R>
  static void score_tile(const float* q, const float* kb, int64_t hdp, int64_t nk, float scale, float* s, int64_t ss) {
    constexpr int J = R == 1 ? 8 : R == 2 ? 4 : 2;
    for (int64_t j = 0; j < nk; j += J) {
      float32x4_t acc[8];
      for (auto& c : acc) c = vdupq_n_f32(0.0f);
      const float* k = kb + j * hdp;
      for (int64_t d = 0; d < hdp; d += 4) {
        float32x4_t kv[J];
        for (int jj = 0; jj < J; ++jj) kv[jj] = vld1q_f32(k + jj * hdp + d);
        for (int r = 0; r < R; ++r) {
          const float32x4_t qv = vld1q_f32(q + r * hdp + d);
          for (int jj = 0; jj < J; ++jj) acc[r * J + jj] = vfmaq_f32(acc[r * J + jj], qv, kv[jj]);
        }
      }
      float out[8];
      vst1q_f32(out, vmulq_n_f32(reduce4(acc[0], acc[1], acc[2], acc[3]), scale));
      vst1q_f32(out + 4, vmulq_n_f32(reduce4(acc[4], acc[5], acc[6], acc[7]), scale));
      for (int r = 0; r < R; ++r)
        for (int jj = 0; jj < J; ++jj) s[r * ss + j + jj] = out[r * J + jj];
    }
  }

  // o_r[0, hdp) += sum_j e_r[j] v_j for R rows over keys j in [0, nc) of the f32 block vb, in key order.
  template <int R>
  static void value_tile(const float* const* e, const float* vb, int64_t hdp, int64_t nc, float* const* o) {
    int64_t d = 0;
    for (; d + 16 <= hdp; d += 16) {
      float32x4_t acc[R][4];
      for (int r = 0; r < R; ++r)
        for (int u = 0; u < 4; ++u) acc[r][u] = vld1q_f32(o[r] + d + 4 * u);
      for (int64_t j = 0; j < nc; ++j) {
        float32x4_t v[4];
        for (int u = 0; u < 4; ++u) v[u] = vld1q_f32(vb + j * hdp + d + 4 * u);
        for (int r = 0; r < R; ++r) {
          const float32x4_t p = vdupq_n_f32(e[r][j]);
          for (int u = 0; u < 4; ++u) acc[r][u] = vfmaq_f32(acc[r][u], p, v[u]);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int u = 0; u < 4; ++u) vst1q_f32(o[r] + d + 4 * u, acc[r][u]);
    }
    for (; d < hdp; d += 4) {
      float32x4_t acc[R];
      for (int r = 0; r < R; ++r) acc[r] = vld1q_f32(o[r] + d);
      for (int64_t j = 0; j < nc; ++j) {
        const float32x4_t v0 = vld1q_f32(vb + j * hdp + d);
        for (int r = 0; r < R; ++r) acc[r] = vfmaq_f32(acc[r], vdupq_n_f32(e[r][j]), v0);
      }
      for (int r = 0; r < R; ++r) vst1q_f32(o[r] + d, acc[r]);
    }
  }

  // acc = fold(acc, c) for states {m, l, o[hd]} (kernels.h). noinline: attn_rows and attn_merge must run the very
  // same instructions.
  [[gnu::noinline]] static void fold(float* acc, const float* c, int64_t hd) {
    const auto [a, b] = fold_scalars(acc, c);
    float* o = acc + 2;
    const float* oc = c + 2;
    int64_t d = 0;
    for (; d + 4 <= hd; d += 4) vst1q_f32(o + d, vfmaq_n_f32(vmulq_n_f32(vld1q_f32(o + d), a), vld1q_f32(oc + d), b));
    for (; d < hd; ++d) o[d] = std::fma(oc[d], b, o[d] * a);
  }

  // out = o / l for a folded state, the sink logit joining l (its probability dropped) when has_sink.
  [[gnu::noinline]] static void finish(const float* acc, int64_t hd, bool has_sink, float sink, float* out) {
    const float f = finish_factor(acc, has_sink, sink);
    int64_t d = 0;
    for (; d + 4 <= hd; d += 4) vst1q_f32(out + d, vmulq_n_f32(vld1q_f32(acc + 2 + d), f));
    for (; d < hd; ++d) out[d] = acc[2 + d] * f;
  }

  // Soft-cap, max, e^(s - m) in place and their sum for one row's n scores of a chunk; the entries after n up to a
  // multiple of 4 become 0. Returns {m, l}.
  static std::pair<float, float> chunk_softmax(float* s, int64_t n, float softcap) {
    const int64_t n4 = (n + 3) / 4 * 4;
    if (softcap > 0.0f) {
      const float32x4_t cap = vdupq_n_f32(softcap);
      for (int64_t j = 0; j < n4; j += 4)
        vst1q_f32(s + j, vmulq_f32(cap, tanh_ps(vdivq_f32(vld1q_f32(s + j), cap))));
    }
    for (int64_t j = n; j < n4; ++j) s[j] = -INFINITY;  // the tail: e = 0, no part in the max
    float32x4_t mx = vdupq_n_f32(-INFINITY);
    for (int64_t j = 0; j < n4; j += 4) mx = vmaxq_f32(mx, vld1q_f32(s + j));
    const float m = vmaxvq_f32(mx);
    const float32x4_t vm = vdupq_n_f32(m);
    float32x4_t sum = vdupq_n_f32(0.0f);
    for (int64_t j = 0; j < n4; j += 4) {
      const float32x4_t e = exp_ps(vsubq_f32(vld1q_f32(s + j), vm));
      vst1q_f32(s + j, e);
      sum = vaddq_f32(sum, e);
    }
    const float32x4_t z = vdupq_n_f32(0.0f);
    return {m, vgetq_lane_f32(reduce4(sum, z, z, z), 0)};
  }
};

}  // namespace

void attn_merge(const float* states, int64_t n, int64_t head_dim, bool has_sink, float sink, float* scratch,
                float* out) {
  attn_merge_chunked<Neon>(states, n, head_dim, has_sink, sink, scratch, out);
}

void attn_row_f32(const AttnRowArgs& a) { attn_row_chunked<Neon, KvF32>(a); }
void attn_row_f16(const AttnRowArgs& a) { attn_row_chunked<Neon, KvF16>(a); }
void attn_row_q8_0(const AttnRowArgs& a) { attn_row_chunked<Neon, KvQ8>(a); }
void attn_rows_f32(const AttnRowsArgs& a) { attn_rows_chunked<Neon, KvF32>(a); }
void attn_rows_f16(const AttnRowsArgs& a) { attn_rows_chunked<Neon, KvF16>(a); }
void attn_rows_q8_0(const AttnRowsArgs& a) { attn_rows_chunked<Neon, KvQ8>(a); }

}  // namespace pipit::neon
