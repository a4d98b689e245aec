// AVX2 row kernels: RMSNorm, LayerNorm, SwiGLU, GeGLU, the vision GELUs, add, scale, softmax. Each does 8 lanes at a time and finishes a row's
// n % 8 tail with masked loads and stores, so any n works. Each keeps ref's order of operations per element; only
// sums (RMSNorm's sum of squares, softmax's denominator) and exp / tanh (simd_avx2.h, <= 2-3 ulp) differ.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

#include <algorithm>
#include <cmath>

namespace pipit::avx2 {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps, float w_offset) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    s0 = _mm256_fmadd_ps(a, a, s0);
    s1 = _mm256_fmadd_ps(b, b, s1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_loadu_ps(x + i);
    s0 = _mm256_fmadd_ps(a, a, s0);
  }
  if (i < n) {
    const __m256 a = _mm256_maskload_ps(x + i, tail_mask(n - i));
    s1 = _mm256_fmadd_ps(a, a, s1);
  }
  const float ss = hsum(_mm256_add_ps(s0, s1));
  const __m256 r = _mm256_set1_ps(1.0f / std::sqrt(ss / float(n) + eps));
  const __m256 off = _mm256_set1_ps(w_offset);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), r),
                                          _mm256_add_ps(off, _mm256_loadu_ps(w + i))));
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    const __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(x + i, mask), r),
                                   _mm256_add_ps(off, _mm256_maskload_ps(w + i, mask)));
    _mm256_maskstore_ps(y + i, mask, v);
  }
}

namespace {

// y = f(gate, up) over a row, 8 lanes at a time plus a masked tail.
template <class F>
inline void gated(const float* gate, const float* up, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, mask, f(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask)));
  }
}

}  // namespace

// silu(g) * u = g / (1 + e^-g) * u
void swiglu(const float* gate, const float* up, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  gated(gate, up, y, n, [&](__m256 g, __m256 u) {
    const __m256 e = exp_ps(_mm256_xor_ps(g, sign));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u);
  });
}

// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * u, in ref's order of operations
void geglu(const float* gate, const float* up, float* y, int64_t n) {
  const __m256 c = _mm256_set1_ps(0.7978845608028654f), k = _mm256_set1_ps(0.044715f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  gated(gate, up, y, n, [&](__m256 g, __m256 u) {
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(k, g), _mm256_mul_ps(g, g));
    const __m256 t = tanh_ps(_mm256_mul_ps(c, _mm256_add_ps(g, g3)));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(half, g), _mm256_add_ps(one, t)), u);
  });
}

void add(const float* a, const float* b, float* y, int64_t n) {
  gated(a, b, y, n, [](__m256 u, __m256 v) { return _mm256_add_ps(u, v); });
}

void scale(float* x, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    _mm256_maskstore_ps(x + i, mask, _mm256_mul_ps(_mm256_maskload_ps(x + i, mask), vs));
  }
}

// in place: x = e^(x - max) / sum
void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 mx = ninf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
  const __m256i mask = tail_mask(n - i);
  if (i < n) mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, mask), _mm256_castsi256_ps(mask)));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const __m256 vmax = _mm256_set1_ps(_mm_cvtss_f32(m4));

  __m256 sum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (i < n) {
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), vmax)), _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(x + i, mask, e);
    sum = _mm256_add_ps(sum, e);
  }
  scale(x, 1.0f / hsum(sum), n);
}

namespace {

// x = f(x) in place, 8 lanes at a time plus a masked tail
template <class F>
inline void unary(float* x, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    _mm256_maskstore_ps(x + i, mask, f(_mm256_maskload_ps(x + i, mask)));
  }
}

}  // namespace

// 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2). erfc(|z|) = t P(t) e^{-z^2}, t = 1 / (1 + p |z|)
// (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7), so 1 + erf(z) is that for z < 0 and 2 minus it for z >= 0:
// computed directly on the negative side, where 1 + erf(z) is small, instead of as 1 minus something close to 1.
void gelu(float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
  unary(x, n, [&](__m256 v) {
    const __m256 z = _mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f));
    const __m256 az = _mm256_andnot_ps(sign, z);
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), az, one));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    const __m256 c = _mm256_mul_ps(_mm256_mul_ps(p, t), exp_ps(_mm256_xor_ps(_mm256_mul_ps(az, az), sign)));
    const __m256 opz = _mm256_blendv_ps(_mm256_sub_ps(two, c), c, _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), opz);
  });
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in ref's order of operations
void gelu_tanh(float* x, int64_t n) {
  const __m256 c = _mm256_set1_ps(0.7978845608028654f), k = _mm256_set1_ps(0.044715f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  unary(x, n, [&](__m256 g) {
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(k, g), _mm256_mul_ps(g, g));
    const __m256 t = tanh_ps(_mm256_mul_ps(c, _mm256_add_ps(g, g3)));
    return _mm256_mul_ps(_mm256_mul_ps(half, g), _mm256_add_ps(one, t));
  });
}

// x / (1 + e^{-1.702 x})
void quick_gelu(float* x, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), k = _mm256_set1_ps(-1.702f);
  unary(x, n, [&](__m256 v) { return _mm256_div_ps(v, _mm256_add_ps(one, exp_ps(_mm256_mul_ps(k, v)))); });
}

// Two passes in f32 lanes (ref: double): the mean, then the variance around it with the corrected two-pass formula
// (the second pass also sums d = x - mean, which moves the mean by sum(d) / n and takes sum(d)^2 / n off the squares:
// the rounding of the first mean, large when the mean is far from 0, cancels); then (x - mean) inv w + b.
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  const __m256i mask = tail_mask(n % 8);
  const int64_t nv = n / 8 * 8;
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= nv; i += 16) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i < nv; i += 8) s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
  if (nv < n) s1 = _mm256_add_ps(s1, _mm256_maskload_ps(x + nv, mask));
  const float mean = hsum(_mm256_add_ps(s0, s1)) / float(n);
  __m256 vm = _mm256_set1_ps(mean);
  s0 = s1 = _mm256_setzero_ps();
  __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
  for (i = 0; i + 16 <= nv; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm), d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm);
    s0 = _mm256_fmadd_ps(d0, d0, s0);
    s1 = _mm256_fmadd_ps(d1, d1, s1);
    c0 = _mm256_add_ps(c0, d0);
    c1 = _mm256_add_ps(c1, d1);
  }
  for (; i < nv; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
    s0 = _mm256_fmadd_ps(d, d, s0);
    c0 = _mm256_add_ps(c0, d);
  }
  if (nv < n) {
    const __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + nv, mask), vm), _mm256_castsi256_ps(mask));
    s1 = _mm256_fmadd_ps(d, d, s1);
    c1 = _mm256_add_ps(c1, d);
  }
  const float c = hsum(_mm256_add_ps(c0, c1));
  const float var = std::max(0.0f, (hsum(_mm256_add_ps(s0, s1)) - c * c / float(n)) / float(n));
  vm = _mm256_set1_ps(mean + c / float(n));
  const __m256 inv = _mm256_set1_ps(1.0f / std::sqrt(var + eps));
  for (i = 0; i < nv; i += 8) {
    const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), inv);
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(d, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i)));
  }
  if (nv < n) {
    const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + nv, mask), vm), inv);
    _mm256_maskstore_ps(y + nv, mask, _mm256_fmadd_ps(d, _mm256_maskload_ps(w + nv, mask), _mm256_maskload_ps(b + nv, mask)));
  }
}

}  // namespace pipit::avx2
