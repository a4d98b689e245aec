// Reference row kernels: RMSNorm, LayerNorm, gated activations, the vision towers' GELUs, add, scale, softmax.
#include <cmath>

#include "backends/cpu/ref/ref.h"

namespace pipit::ref {

// reference: HF LlamaRMSNorm — y = x / sqrt(mean(x^2) + eps) * (w_offset + w); Gemma uses w_offset = 1.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps, float w_offset) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * r) * (w_offset + w[i]);
}

// silu(g) * u with silu(g) = g / (1 + exp(-g))
void swiglu(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// gelu_pytorch_tanh(g) * u: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
void geglu(const float* gate, const float* up, float* y, int64_t n) {
  const float c = 0.7978845608028654f;  // sqrt(2/pi)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = 0.5f * g * (1.0f + std::tanh(c * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void softmax(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// nn.GELU(): 0.5 x (1 + erf(x / sqrt(2)))
void gelu(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

// gelu_pytorch_tanh: geglu's formula without the up factor
void gelu_tanh(float* x, int64_t n) {
  const float c = 0.7978845608028654f;  // sqrt(2/pi)
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::tanh(c * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}

// HF quick_gelu: x * sigmoid(1.702 x)
void quick_gelu(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-1.702f * x[i]));
}

// Two passes in double: the mean, then the biased variance around it; the result in float as nn.LayerNorm.
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= double(n);
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= double(n);
  const float inv = float(1.0 / std::sqrt(var + double(eps)));
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - float(mean)) * inv * w[i] + b[i];
}

}  // namespace pipit::ref
