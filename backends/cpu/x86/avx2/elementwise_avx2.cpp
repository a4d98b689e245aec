// AVX2 row kernels: RMSNorm, SwiGLU, GeGLU, add, scale, softmax. Each does 8 lanes at a time and finishes a row's
// n % 8 tail with masked loads and stores, so any n works. Each keeps ref's order of operations per element; only
// sums (RMSNorm's sum of squares, softmax's denominator) and exp / tanh (simd_avx2.h, <= 2-3 ulp) differ.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

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

}  // namespace pipit::avx2
