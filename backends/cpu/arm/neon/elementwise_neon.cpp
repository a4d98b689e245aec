// NEON row kernels: RMSNorm, LayerNorm, SwiGLU, GeGLU, the vision GELUs, add, scale, softmax. 4 lanes at a time; a row's n % 4 tail goes
// through the same vector code on a zero-padded copy, so every element gets the same numerics. Each keeps ref's
// order of operations per element; only sums and exp / tanh (simd_neon.h, <= 2-3 ulp) differ.
#include "backends/cpu/arm/neon/kernels_neon.h"
#include "backends/cpu/arm/neon/simd_neon.h"

#include <algorithm>
#include <cmath>

namespace pipit::neon {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps, float w_offset) {
  float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
    s0 = vfmaq_f32(s0, a, a);
    s1 = vfmaq_f32(s1, b, b);
  }
  for (; i + 4 <= n; i += 4) {
    const float32x4_t a = vld1q_f32(x + i);
    s0 = vfmaq_f32(s0, a, a);
  }
  float ss = vaddvq_f32(vaddq_f32(s0, s1));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  const float32x4_t off = vdupq_n_f32(w_offset);
  for (i = 0; i + 4 <= n; i += 4)
    vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), r), vaddq_f32(off, vld1q_f32(w + i))));
  for (; i < n; ++i) y[i] = (x[i] * r) * (w_offset + w[i]);
}

namespace {

// y = f(gate, up) over a row; the tail runs f on zero-padded copies
template <class F>
inline void gated(const float* gate, const float* up, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, f(vld1q_f32(gate + i), vld1q_f32(up + i)));
  if (i < n) {
    float g[4] = {}, u[4] = {}, o[4];
    for (int64_t t = 0; t < n - i; ++t) g[t] = gate[i + t], u[t] = up[i + t];
    vst1q_f32(o, f(vld1q_f32(g), vld1q_f32(u)));
    for (int64_t t = 0; t < n - i; ++t) y[i + t] = o[t];
  }
}

}  // namespace

// silu(g) * u = g / (1 + e^-g) * u
void swiglu(const float* gate, const float* up, float* y, int64_t n) {
  gated(gate, up, y, n, [](float32x4_t g, float32x4_t u) {
    const float32x4_t e = exp_ps(vnegq_f32(g));
    return vmulq_f32(vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e)), u);
  });
}

// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * u, in ref's order of operations
void geglu(const float* gate, const float* up, float* y, int64_t n) {
  gated(gate, up, y, n, [](float32x4_t g, float32x4_t u) {
    const float32x4_t g3 = vmulq_f32(vmulq_n_f32(g, 0.044715f), vmulq_f32(g, g));
    const float32x4_t t = tanh_ps(vmulq_n_f32(vaddq_f32(g, g3), 0.7978845608028654f));
    return vmulq_f32(vmulq_f32(vmulq_n_f32(g, 0.5f), vaddq_f32(vdupq_n_f32(1.0f), t)), u);
  });
}

void add(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
  for (; i < n; ++i) y[i] = a[i] + b[i];
}

void scale(float* x, float s, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), s));
  for (; i < n; ++i) x[i] *= s;
}

// in place: x = e^(x - max) / sum
void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float32x4_t mx = vdupq_n_f32(-INFINITY);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) mx = vmaxq_f32(mx, vld1q_f32(x + i));
  float m = vmaxvq_f32(mx);
  for (int64_t t = i; t < n; ++t) m = std::fmax(m, x[t]);
  const float32x4_t vmax = vdupq_n_f32(m);
  float32x4_t sum = vdupq_n_f32(0.0f);
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t e = exp_ps(vsubq_f32(vld1q_f32(x + i), vmax));
    vst1q_f32(x + i, e);
    sum = vaddq_f32(sum, e);
  }
  float s = vaddvq_f32(sum);
  if (i < n) {
    float t[4] = {m, m, m, m}, o[4];
    for (int64_t j = 0; j < n - i; ++j) t[j] = x[i + j];
    vst1q_f32(o, exp_ps(vsubq_f32(vld1q_f32(t), vmax)));
    for (int64_t j = 0; j < n - i; ++j) x[i + j] = o[j], s += o[j];
  }
  scale(x, 1.0f / s, n);
}

namespace {

// x = f(x) in place; the tail runs f on a zero-padded copy
template <class F>
inline void unary(float* x, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, f(vld1q_f32(x + i)));
  if (i < n) {
    float t[4] = {};
    for (int64_t j = 0; j < n - i; ++j) t[j] = x[i + j];
    vst1q_f32(t, f(vld1q_f32(t)));
    for (int64_t j = 0; j < n - i; ++j) x[i + j] = t[j];
  }
}

}  // namespace

// 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2). erfc(|z|) = t P(t) e^{-z^2}, t = 1 / (1 + p |z|)
// (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7), so 1 + erf(z) is that for z < 0 and 2 minus it for z >= 0:
// computed directly on the negative side, where 1 + erf(z) is small, instead of as 1 minus something close to 1.
void gelu(float* x, int64_t n) {
  unary(x, n, [](float32x4_t v) {
    const float32x4_t z = vmulq_n_f32(v, 0.70710678118654752f), az = vabsq_f32(z), one = vdupq_n_f32(1.0f);
    const float32x4_t t = vdivq_f32(one, vfmaq_n_f32(one, az, 0.3275911f));
    float32x4_t p = vdupq_n_f32(1.061405429f);
    p = vfmaq_f32(vdupq_n_f32(-1.453152027f), p, t);
    p = vfmaq_f32(vdupq_n_f32(1.421413741f), p, t);
    p = vfmaq_f32(vdupq_n_f32(-0.284496736f), p, t);
    p = vfmaq_f32(vdupq_n_f32(0.254829592f), p, t);
    const float32x4_t c = vmulq_f32(vmulq_f32(p, t), exp_ps(vnegq_f32(vmulq_f32(az, az))));
    const float32x4_t opz = vbslq_f32(vcltq_f32(z, vdupq_n_f32(0.0f)), c, vsubq_f32(vdupq_n_f32(2.0f), c));
    return vmulq_f32(vmulq_n_f32(v, 0.5f), opz);
  });
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in ref's order of operations
void gelu_tanh(float* x, int64_t n) {
  unary(x, n, [](float32x4_t g) {
    const float32x4_t g3 = vmulq_f32(vmulq_n_f32(g, 0.044715f), vmulq_f32(g, g));
    const float32x4_t t = tanh_ps(vmulq_n_f32(vaddq_f32(g, g3), 0.7978845608028654f));
    return vmulq_f32(vmulq_n_f32(g, 0.5f), vaddq_f32(vdupq_n_f32(1.0f), t));
  });
}

// x / (1 + e^{-1.702 x})
void quick_gelu(float* x, int64_t n) {
  unary(x, n, [](float32x4_t v) { return vdivq_f32(v, vaddq_f32(vdupq_n_f32(1.0f), exp_ps(vmulq_n_f32(v, -1.702f)))); });
}

// Two passes in f32 lanes (ref: double): the mean, then the variance around it with the corrected two-pass formula
// (the second pass also sums d = x - mean, which moves the mean by sum(d) / n and takes sum(d)^2 / n off the squares:
// the rounding of the first mean, large when the mean is far from 0, cancels); then (x - mean) inv w + b.
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 = vaddq_f32(s0, vld1q_f32(x + i));
    s1 = vaddq_f32(s1, vld1q_f32(x + i + 4));
  }
  for (; i + 4 <= n; i += 4) s0 = vaddq_f32(s0, vld1q_f32(x + i));
  float sum = vaddvq_f32(vaddq_f32(s0, s1));
  for (; i < n; ++i) sum += x[i];
  float mean = sum / float(n);
  float32x4_t vm = vdupq_n_f32(mean);
  s0 = s1 = vdupq_n_f32(0.0f);
  float32x4_t c0 = vdupq_n_f32(0.0f), c1 = vdupq_n_f32(0.0f);
  for (i = 0; i + 8 <= n; i += 8) {
    const float32x4_t d0 = vsubq_f32(vld1q_f32(x + i), vm), d1 = vsubq_f32(vld1q_f32(x + i + 4), vm);
    s0 = vfmaq_f32(s0, d0, d0);
    s1 = vfmaq_f32(s1, d1, d1);
    c0 = vaddq_f32(c0, d0);
    c1 = vaddq_f32(c1, d1);
  }
  for (; i + 4 <= n; i += 4) {
    const float32x4_t d = vsubq_f32(vld1q_f32(x + i), vm);
    s0 = vfmaq_f32(s0, d, d);
    c0 = vaddq_f32(c0, d);
  }
  float ss = vaddvq_f32(vaddq_f32(s0, s1)), c = vaddvq_f32(vaddq_f32(c0, c1));
  for (; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean), c += x[i] - mean;
  const float var = std::max(0.0f, (ss - c * c / float(n)) / float(n));
  mean += c / float(n);
  vm = vdupq_n_f32(mean);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (i = 0; i + 4 <= n; i += 4)
    vst1q_f32(y + i, vfmaq_f32(vld1q_f32(b + i), vmulq_n_f32(vsubq_f32(vld1q_f32(x + i), vm), inv), vld1q_f32(w + i)));
  for (; i < n; ++i) y[i] = std::fma((x[i] - mean) * inv, w[i], b[i]);
}

}  // namespace pipit::neon
