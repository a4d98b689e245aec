// The gated delta rule (kernels.h: DeltaRuleArgs) written once over a handful of row primitives, so that the scalar
// reference and each ISA run the same algorithm and differ only in how a row of dv (or dk) floats is processed.
// V provides (all on n contiguous floats):
//   dot(a, b, n)                      -> sum a[i] b[i]
//   axpy(y, s, x, n)                  y += s x
//   scale(y, s, n)                    y *= s
//   decay_acc(srow, eg, acc, kd, n)   srow *= eg; acc += kd srow
//   update_acc(srow, kd, d, acc, qd, n) srow += kd d; acc += qd srow
// The functions are `static` templates: each ISA file instantiates them with its own V and compile flags, and
// internal linkage keeps the linker from merging an AVX-512 copy into code that runs on an older CPU.
#pragma once

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels.h"

namespace pipit {

// Token by token (HF torch_recurrent_gated_delta_rule): two passes over S per token.
template <class V>
static void delta_step_impl(const DeltaRuleArgs& a) {
  const int64_t dk = a.dk, dv = a.dv;
  float* S = a.state;
  float* kv = a.scratch;  // S^T k, then the delta
  for (int64_t t = 0; t < a.n; ++t) {
    const float* q = a.q + t * a.qk_stride;
    const float* k = a.k + t * a.qk_stride;
    const float* v = a.v + t * a.v_stride;
    const float eg = std::exp(a.g[t * a.gb_stride]), beta = a.beta[t * a.gb_stride];
    std::fill(kv, kv + dv, 0.0f);
    for (int64_t d = 0; d < dk; ++d) V::decay_acc(S + d * dv, eg, kv, k[d], dv);  // S = e^g S; kv = S^T k
    for (int64_t e = 0; e < dv; ++e) kv[e] = (v[e] - kv[e]) * beta;             // delta = beta (v - S^T k)
    float* o = a.out + t * a.out_stride;
    std::fill(o, o + dv, 0.0f);
    for (int64_t d = 0; d < dk; ++d) V::update_acc(S + d * dv, k[d], kv, o, q[d], dv);  // S += k delta^T; o = S^T q
  }
}

// Chunked (HF torch_chunk_gated_delta_rule, chunk 64). For a chunk of m tokens with cum_i = g_0 + .. + g_i and
// decay e_ij = exp(cum_i - cum_j):
//   L_ij = beta_i (k_i . k_j) e_ij (j < i)          the chunk's writes seen by later tokens of the chunk
//   X = (I + L)^-1 (beta v),  Kc = (I + L)^-1 (beta e^cum k)   (forward substitution; HF: solve_triangular)
//   v_new_i = X_i - Kc_i S                            what token i writes, given the state before the chunk
//   o_i = e^cum_i (q_i S) + sum_{j <= i} (q_i . k_j) e_ij v_new_j
//   S = e^cum_last S + sum_i e^(cum_last - cum_i) k_i v_new_i^T
// HF pads the last chunk with zero tokens (k = v = 0, g = 0): they add nothing, so a short chunk is run as it is.
template <class V>
static void delta_chunk_impl(const DeltaRuleArgs& a) {
  constexpr int64_t C = kDeltaChunk;
  const int64_t dk = a.dk, dv = a.dv;
  float* S = a.state;
  float* cum = a.scratch;   // C
  float* L = cum + C;       // C x C, strictly lower
  float* P = L + C * C;     // C x C, lower with the diagonal: (q_i . k_j) e_ij
  float* X = P + C * C;     // C x dv: solved values, then v_new
  float* Kc = X + C * dv;   // C x dk
  for (int64_t t0 = 0; t0 < a.n; t0 += C) {
    const int64_t m = std::min(C, a.n - t0);
    auto q = [&](int64_t i) { return a.q + (t0 + i) * a.qk_stride; };
    auto k = [&](int64_t i) { return a.k + (t0 + i) * a.qk_stride; };
    auto v = [&](int64_t i) { return a.v + (t0 + i) * a.v_stride; };
    auto beta = [&](int64_t i) { return a.beta[(t0 + i) * a.gb_stride]; };
    float c = 0.0f;
    for (int64_t i = 0; i < m; ++i) cum[i] = c += a.g[(t0 + i) * a.gb_stride];
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < i; ++j) {
        const float e = std::exp(cum[i] - cum[j]);
        L[i * C + j] = V::dot(k(i), k(j), dk) * beta(i) * e;
        P[i * C + j] = V::dot(q(i), k(j), dk) * e;
      }
      P[i * C + i] = V::dot(q(i), k(i), dk);
    }
    for (int64_t i = 0; i < m; ++i) {  // forward substitution, row i from rows < i
      float* x = X + i * dv;
      float* kc = Kc + i * dk;
      const float* vi = v(i);
      const float* ki = k(i);
      const float b = beta(i), bk = beta(i) * std::exp(cum[i]);
      for (int64_t e = 0; e < dv; ++e) x[e] = vi[e] * b;
      for (int64_t d = 0; d < dk; ++d) kc[d] = ki[d] * bk;
      for (int64_t j = 0; j < i; ++j) {
        V::axpy(x, -L[i * C + j], X + j * dv, dv);
        V::axpy(kc, -L[i * C + j], Kc + j * dk, dk);
      }
    }
    for (int64_t i = 0; i < m; ++i) {  // v_new = X - Kc S (S as before the chunk)
      float* x = X + i * dv;
      const float* kc = Kc + i * dk;
      for (int64_t d = 0; d < dk; ++d) V::axpy(x, -kc[d], S + d * dv, dv);
    }
    for (int64_t i = 0; i < m; ++i) {
      float* o = a.out + (t0 + i) * a.out_stride;
      const float* qi = q(i);
      std::fill(o, o + dv, 0.0f);
      for (int64_t d = 0; d < dk; ++d) V::axpy(o, qi[d], S + d * dv, dv);
      V::scale(o, std::exp(cum[i]), dv);
      for (int64_t j = 0; j <= i; ++j) V::axpy(o, P[i * C + j], X + j * dv, dv);
    }
    const float last = cum[m - 1];
    V::scale(S, std::exp(last), dk * dv);
    for (int64_t i = 0; i < m; ++i) {
      const float w = std::exp(last - cum[i]);
      const float* ki = k(i);
      for (int64_t d = 0; d < dk; ++d) V::axpy(S + d * dv, ki[d] * w, X + i * dv, dv);
    }
  }
}

}  // namespace pipit
