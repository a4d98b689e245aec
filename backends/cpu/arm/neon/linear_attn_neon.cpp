// NEON kernels of linear attention (Gated DeltaNet): causal conv1d + SiLU (4 channels per vector), the gated delta
// rule (delta_rule_impl.h over 4-lane row primitives) and gated RMSNorm; tails of n % 4 run as in ref. Sums are
// reordered against ref (vector lanes, FMA); exp is simd_neon.h's (<= 2 ulp).
#include "backends/cpu/delta_rule_impl.h"
#include "backends/cpu/arm/neon/kernels_neon.h"
#include "backends/cpu/arm/neon/simd_neon.h"

#include <cmath>

namespace pipit::neon {

namespace {

inline float32x4_t silu_ps(float32x4_t x) {  // x / (1 + e^-x)
  return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), exp_ps(vnegq_f32(x))));
}
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

struct Rows4 {
  static float dot(const float* a, const float* b, int64_t n) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
      s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
  }
  static void axpy(float* y, float s, const float* x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), s));
    for (; i < n; ++i) y[i] += s * x[i];
  }
  static void scale(float* y, float s, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(y + i), s));
    for (; i < n; ++i) y[i] *= s;
  }
  static void decay_acc(float* srow, float eg, float* acc, float kd, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const float32x4_t s = vmulq_n_f32(vld1q_f32(srow + i), eg);
      vst1q_f32(srow + i, s);
      vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), s, kd));
    }
    for (; i < n; ++i) {
      srow[i] *= eg;
      acc[i] += kd * srow[i];
    }
  }
  static void update_acc(float* srow, float kd, const float* d, float* acc, float qd, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const float32x4_t s = vfmaq_n_f32(vld1q_f32(srow + i), vld1q_f32(d + i), kd);
      vst1q_f32(srow + i, s);
      vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), s, qd));
    }
    for (; i < n; ++i) {
      srow[i] += kd * d[i];
      acc[i] += qd * srow[i];
    }
  }
};

}  // namespace

void causal_conv(const CausalConvArgs& a, int64_t c0, int64_t c1) {
  const int64_t K = a.K, C = a.C;
  auto input = [&](int64_t src, int64_t c) {  // input src (< 0: from the state window) at channel c
    return src >= 0 ? a.x + src * a.x_stride + c : a.state + (K + src) * C + c;
  };
  for (int64_t t = 0; t < a.n; ++t) {
    float* y = a.y + t * a.y_stride;
    int64_t c = c0;
    for (; c + 4 <= c1; c += 4) {
      float32x4_t s = vdupq_n_f32(0.0f);
      for (int64_t j = 0; j < K; ++j) s = vfmaq_f32(s, vld1q_f32(a.w + j * C + c), vld1q_f32(input(t - (K - 1) + j, c)));
      vst1q_f32(y + c, silu_ps(s));
    }
    for (; c < c1; ++c) {
      float s = 0.0f;
      for (int64_t j = 0; j < K; ++j) s += a.w[j * C + c] * *input(t - (K - 1) + j, c);
      y[c] = silu(s);
    }
  }
  for (int64_t r = 0; r < K; ++r) {  // the window now ends with the last K inputs of (state, x)
    const int64_t src = a.n - K + r;
    const float* in = src >= 0 ? a.x + src * a.x_stride : a.state + (r + a.n) * C;
    std::memmove(a.state + r * C + c0, in + c0, size_t(c1 - c0) * 4);
  }
}

void delta_step(const DeltaRuleArgs& a) { delta_step_impl<Rows4>(a); }
void delta_chunk(const DeltaRuleArgs& a) { delta_chunk_impl<Rows4>(a); }

void rms_norm_gated(const float* x, const float* w, const float* z, float* y, int64_t n, float eps) {
  const float ss = Rows4::dot(x, x, n);
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t h = vmulq_f32(vld1q_f32(w + i), vmulq_n_f32(vld1q_f32(x + i), r));
    vst1q_f32(y + i, vmulq_f32(h, silu_ps(vld1q_f32(z + i))));
  }
  for (; i < n; ++i) y[i] = w[i] * (x[i] * r) * silu(z[i]);
}

}  // namespace pipit::neon
