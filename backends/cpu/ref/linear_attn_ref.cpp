// Reference kernels of linear attention (Gated DeltaNet): causal conv1d + SiLU, the gated delta rule (token by token
// and chunked, see delta_rule_impl.h), gated RMSNorm. reference: HF modeling_qwen3_5.py (causal_conv1d_fn /
// causal_conv1d_update torch fallbacks, torch_recurrent_gated_delta_rule, torch_chunk_gated_delta_rule,
// Qwen3_5RMSNormGated).
#include <cmath>

#include "backends/cpu/delta_rule_impl.h"
#include "backends/cpu/ref/ref.h"

namespace pipit::ref {

namespace {
float silu(float x) { return x / (1.0f + std::exp(-x)); }

struct ScalarRows {
  static float dot(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  }
  static void axpy(float* y, float s, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += s * x[i];
  }
  static void scale(float* y, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] *= s;
  }
  static void decay_acc(float* srow, float eg, float* acc, float kd, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      srow[i] *= eg;
      acc[i] += kd * srow[i];
    }
  }
  static void update_acc(float* srow, float kd, const float* d, float* acc, float qd, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      srow[i] += kd * d[i];
      acc[i] += qd * srow[i];
    }
  }
};
}  // namespace

// Output t sees the K inputs ending at t: taps j < K - 1 - t come from the state (the inputs before this call).
void causal_conv(const CausalConvArgs& a, int64_t c0, int64_t c1) {
  const int64_t K = a.K, C = a.C;
  for (int64_t t = 0; t < a.n; ++t) {
    float* y = a.y + t * a.y_stride;
    for (int64_t c = c0; c < c1; ++c) {
      float s = 0.0f;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t src = t - (K - 1) + j;  // input index; < 0: state row K + src
        const float in = src >= 0 ? a.x[src * a.x_stride + c] : a.state[(K + src) * C + c];
        s += a.w[j * C + c] * in;
      }
      y[c] = silu(s);
    }
  }
  // the window now ends with the last K inputs of (state, x)
  for (int64_t r = 0; r < K; ++r) {
    const int64_t src = a.n - K + r;
    for (int64_t c = c0; c < c1; ++c)
      a.state[r * C + c] = src >= 0 ? a.x[src * a.x_stride + c] : a.state[(r + a.n) * C + c];
  }
}

void delta_step(const DeltaRuleArgs& a) { delta_step_impl<ScalarRows>(a); }
void delta_chunk(const DeltaRuleArgs& a) { delta_chunk_impl<ScalarRows>(a); }

// HF Qwen3_5RMSNormGated: weight * (x * rsqrt(mean(x^2) + eps)), then * silu(gate); plain weight (no 1 + w).
void rms_norm_gated(const float* x, const float* w, const float* z, float* y, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * r) * silu(z[i]);
}

}  // namespace pipit::ref
