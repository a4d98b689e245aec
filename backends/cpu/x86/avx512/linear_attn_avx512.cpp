// AVX-512 kernels of linear attention (Gated DeltaNet): causal conv1d + SiLU (16 channels per vector), the gated
// delta rule (delta_rule_impl.h over 16-lane row primitives) and gated RMSNorm. Tails use lane masks. Sums are
// reordered against ref (vector lanes, FMA); exp is simd_avx512.h's (<= 2 ulp).
#include "backends/cpu/delta_rule_impl.h"
#include "backends/cpu/x86/avx512/kernels_avx512.h"
#include "backends/cpu/x86/avx512/simd_avx512.h"

#include <cmath>

namespace pipit::avx512 {

namespace {

inline __m512 silu_ps(__m512 x) {  // x / (1 + e^-x)
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

struct Rows16 {
  static float dot(const float* a, const float* b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
      const __mmask16 m = mask16(n - i);
      s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return hsum(_mm512_add_ps(s0, s1));
  }
  static void axpy(float* y, float s, const float* x, int64_t n) {
    const __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = mask16(n - i);
      _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(vs, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
    }
  }
  static void scale(float* y, float s, int64_t n) {
    const __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = mask16(n - i);
      _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(m, y + i)));
    }
  }
  static void decay_acc(float* srow, float eg, float* acc, float kd, int64_t n) {
    const __m512 ve = _mm512_set1_ps(eg), vk = _mm512_set1_ps(kd);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = mask16(n - i);
      const __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, srow + i), ve);
      _mm512_mask_storeu_ps(srow + i, m, s);
      _mm512_mask_storeu_ps(acc + i, m, _mm512_fmadd_ps(vk, s, _mm512_maskz_loadu_ps(m, acc + i)));
    }
  }
  static void update_acc(float* srow, float kd, const float* d, float* acc, float qd, int64_t n) {
    const __m512 vk = _mm512_set1_ps(kd), vq = _mm512_set1_ps(qd);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = mask16(n - i);
      const __m512 s = _mm512_fmadd_ps(vk, _mm512_maskz_loadu_ps(m, d + i), _mm512_maskz_loadu_ps(m, srow + i));
      _mm512_mask_storeu_ps(srow + i, m, s);
      _mm512_mask_storeu_ps(acc + i, m, _mm512_fmadd_ps(vq, s, _mm512_maskz_loadu_ps(m, acc + i)));
    }
  }
};

}  // namespace

void causal_conv(const CausalConvArgs& a, int64_t c0, int64_t c1) {
  const int64_t K = a.K, C = a.C;
  for (int64_t t = 0; t < a.n; ++t) {
    float* y = a.y + t * a.y_stride;
    for (int64_t c = c0; c < c1; c += 16) {
      const __mmask16 m = mask16(c1 - c);
      __m512 s = _mm512_setzero_ps();
      for (int64_t j = 0; j < K; ++j) {
        const int64_t src = t - (K - 1) + j;
        const float* in = src >= 0 ? a.x + src * a.x_stride + c : a.state + (K + src) * C + c;
        s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a.w + j * C + c), _mm512_maskz_loadu_ps(m, in), s);
      }
      _mm512_mask_storeu_ps(y + c, m, silu_ps(s));
    }
  }
  for (int64_t r = 0; r < K; ++r) {  // the window now ends with the last K inputs of (state, x)
    const int64_t src = a.n - K + r;
    for (int64_t c = c0; c < c1; c += 16) {
      const __mmask16 m = mask16(c1 - c);
      const float* in = src >= 0 ? a.x + src * a.x_stride + c : a.state + (r + a.n) * C + c;
      _mm512_mask_storeu_ps(a.state + r * C + c, m, _mm512_maskz_loadu_ps(m, in));
    }
  }
}

void delta_step(const DeltaRuleArgs& a) { delta_step_impl<Rows16>(a); }
void delta_chunk(const DeltaRuleArgs& a) { delta_chunk_impl<Rows16>(a); }

void rms_norm_gated(const float* x, const float* w, const float* z, float* y, int64_t n, float eps) {
  const float ss = Rows16::dot(x, x, n);
  const __m512 r = _mm512_set1_ps(1.0f / std::sqrt(ss / float(n) + eps));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    const __m512 h = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), r));
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(h, silu_ps(_mm512_maskz_loadu_ps(m, z + i))));
  }
}

}  // namespace pipit::avx512
