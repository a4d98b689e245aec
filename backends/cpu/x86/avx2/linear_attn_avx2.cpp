// AVX2 kernels of linear attention (Gated DeltaNet): causal conv1d + SiLU (8 channels per vector), the gated delta
// rule (delta_rule_impl.h over 8-lane row primitives) and gated RMSNorm. Tails use masked loads and stores. Sums
// are reordered against ref (vector lanes, FMA); exp is simd_avx2.h's (<= 2 ulp).
#include "backends/cpu/delta_rule_impl.h"
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/simd_avx2.h"

#include <cmath>

namespace pipit::avx2 {

namespace {

inline __m256 silu_ps(__m256 x) {  // x / (1 + e^-x)
  const __m256 e = exp_ps(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

struct Rows8 {
  static float dot(const float* a, const float* b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    if (i < n) {
      const __m256i m = tail_mask(n - i);
      s1 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), s1);
    }
    return hsum(_mm256_add_ps(s0, s1));
  }
  static void axpy(float* y, float s, const float* x, int64_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    if (i < n) {
      const __m256i m = tail_mask(n - i);
      _mm256_maskstore_ps(y + i, m, _mm256_fmadd_ps(vs, _mm256_maskload_ps(x + i, m), _mm256_maskload_ps(y + i, m)));
    }
  }
  static void scale(float* y, float s, int64_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(vs, _mm256_loadu_ps(y + i)));
    if (i < n) {
      const __m256i m = tail_mask(n - i);
      _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(vs, _mm256_maskload_ps(y + i, m)));
    }
  }
  static void decay_acc(float* srow, float eg, float* acc, float kd, int64_t n) {
    const __m256 ve = _mm256_set1_ps(eg), vk = _mm256_set1_ps(kd);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(srow + i), ve);
      _mm256_storeu_ps(srow + i, s);
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vk, s, _mm256_loadu_ps(acc + i)));
    }
    if (i < n) {
      const __m256i m = tail_mask(n - i);
      const __m256 s = _mm256_mul_ps(_mm256_maskload_ps(srow + i, m), ve);
      _mm256_maskstore_ps(srow + i, m, s);
      _mm256_maskstore_ps(acc + i, m, _mm256_fmadd_ps(vk, s, _mm256_maskload_ps(acc + i, m)));
    }
  }
  static void update_acc(float* srow, float kd, const float* d, float* acc, float qd, int64_t n) {
    const __m256 vk = _mm256_set1_ps(kd), vq = _mm256_set1_ps(qd);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 s = _mm256_fmadd_ps(vk, _mm256_loadu_ps(d + i), _mm256_loadu_ps(srow + i));
      _mm256_storeu_ps(srow + i, s);
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vq, s, _mm256_loadu_ps(acc + i)));
    }
    if (i < n) {
      const __m256i m = tail_mask(n - i);
      const __m256 s = _mm256_fmadd_ps(vk, _mm256_maskload_ps(d + i, m), _mm256_maskload_ps(srow + i, m));
      _mm256_maskstore_ps(srow + i, m, s);
      _mm256_maskstore_ps(acc + i, m, _mm256_fmadd_ps(vq, s, _mm256_maskload_ps(acc + i, m)));
    }
  }
};

}  // namespace

void causal_conv(const CausalConvArgs& a, int64_t c0, int64_t c1) {
  const int64_t K = a.K, C = a.C;
  for (int64_t t = 0; t < a.n; ++t) {
    float* y = a.y + t * a.y_stride;
    for (int64_t c = c0; c < c1; c += 8) {
      const __m256i m = tail_mask(c1 - c);  // all lanes but in the last block
      __m256 s = _mm256_setzero_ps();
      for (int64_t j = 0; j < K; ++j) {
        const int64_t src = t - (K - 1) + j;
        const float* in = src >= 0 ? a.x + src * a.x_stride + c : a.state + (K + src) * C + c;
        s = _mm256_fmadd_ps(_mm256_maskload_ps(a.w + j * C + c, m), _mm256_maskload_ps(in, m), s);
      }
      _mm256_maskstore_ps(y + c, m, silu_ps(s));
    }
  }
  for (int64_t r = 0; r < K; ++r) {  // the window now ends with the last K inputs of (state, x)
    const int64_t src = a.n - K + r;
    for (int64_t c = c0; c < c1; c += 8) {
      const __m256i m = tail_mask(c1 - c);
      const float* in = src >= 0 ? a.x + src * a.x_stride + c : a.state + (r + a.n) * C + c;
      _mm256_maskstore_ps(a.state + r * C + c, m, _mm256_maskload_ps(in, m));
    }
  }
}

void delta_step(const DeltaRuleArgs& a) { delta_step_impl<Rows8>(a); }
void delta_chunk(const DeltaRuleArgs& a) { delta_chunk_impl<Rows8>(a); }

void rms_norm_gated(const float* x, const float* w, const float* z, float* y, int64_t n, float eps) {
  const float ss = Rows8::dot(x, x, n);
  const __m256 r = _mm256_set1_ps(1.0f / std::sqrt(ss / float(n) + eps));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 h = _mm256_mul_ps(_mm256_maskload_ps(w + i, m), _mm256_mul_ps(_mm256_maskload_ps(x + i, m), r));
    _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(h, silu_ps(_mm256_maskload_ps(z + i, m))));
  }
}

}  // namespace pipit::avx2
