// AVX-512 row kernels: RMSNorm, SwiGLU, GeGLU, add, scale, softmax. 16 lanes at a time; a row's n % 16 tail is
// one masked step, so any n works. Each keeps ref's order of operations per element; only sums (RMSNorm's sum of
// squares, softmax's denominator) and exp / tanh (simd_avx512.h, <= 2-3 ulp) differ.
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

#include <cmath>

namespace pipit::avx512 {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps, float w_offset) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    s0 = _mm512_fmadd_ps(a, a, s0);
    s1 = _mm512_fmadd_ps(b, b, s1);
  }
  for (; i < n; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(mask16(n - i), x + i);
    s0 = _mm512_fmadd_ps(a, a, s0);
  }
  const float ss = hsum(_mm512_add_ps(s0, s1));
  const __m512 r = _mm512_set1_ps(1.0f / std::sqrt(ss / float(n) + eps));
  const __m512 off = _mm512_set1_ps(w_offset);
  for (i = 0; i < n; i += 16) {
    const __mmask16 mk = mask16(n - i);
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), r),
                                   _mm512_add_ps(off, _mm512_maskz_loadu_ps(mk, w + i)));
    _mm512_mask_storeu_ps(y + i, mk, v);
  }
}

namespace {

template <class F>
inline void gated(const float* gate, const float* up, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 mk = mask16(n - i);
    _mm512_mask_storeu_ps(y + i, mk, f(_mm512_maskz_loadu_ps(mk, gate + i), _mm512_maskz_loadu_ps(mk, up + i)));
  }
}

}  // namespace

// silu(g) * u = g / (1 + e^-g) * u
void swiglu(const float* gate, const float* up, float* y, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  gated(gate, up, y, n, [&](__m512 g, __m512 u) {
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u);
  });
}

// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * u, in ref's order of operations
void geglu(const float* gate, const float* up, float* y, int64_t n) {
  const __m512 c = _mm512_set1_ps(0.7978845608028654f), k = _mm512_set1_ps(0.044715f);
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  gated(gate, up, y, n, [&](__m512 g, __m512 u) {
    const __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(k, g), _mm512_mul_ps(g, g));
    const __m512 t = tanh_ps(_mm512_mul_ps(c, _mm512_add_ps(g, g3)));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(half, g), _mm512_add_ps(one, t)), u);
  });
}

void add(const float* a, const float* b, float* y, int64_t n) {
  gated(a, b, y, n, [](__m512 u, __m512 v) { return _mm512_add_ps(u, v); });
}

void scale(float* x, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
  if (i < n) {
    const __mmask16 mk = mask16(n - i);
    _mm512_mask_storeu_ps(x + i, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), vs));
  }
}

// in place: x = e^(x - max) / sum
void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  __m512 mx = _mm512_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(x + i));
  if (i < n) mx = _mm512_mask_max_ps(mx, mask16(n - i), mx, _mm512_maskz_loadu_ps(mask16(n - i), x + i));
  const __m512 vmax = _mm512_set1_ps(hmax(mx));
  __m512 sum = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax));
    _mm512_storeu_ps(x + i, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (i < n) {
    const __mmask16 mk = mask16(n - i);
    const __m512 e = _mm512_maskz_mov_ps(mk, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + i), vmax)));
    _mm512_mask_storeu_ps(x + i, mk, e);
    sum = _mm512_add_ps(sum, e);
  }
  scale(x, 1.0f / hsum(sum), n);
}

}  // namespace pipit::avx512
