// The CPU device's mixture-of-experts ops (contracts in backends/ops.h): the router's top-k, the weighted scatter-add
// of an expert's rows, GPT-OSS's clamped SwiGLU. Scalar loops split across the pool, in the float order of the host
// loops they replaced in models/ (bit-identical goldens); each is one pass over [n_tokens, n_expert] or one expert's
// rows beside that expert's matmuls.
#include "backends/cpu/cpu_device.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pipit {

MoeRoutes CpuDevice::moe_route(Ctx& ctx, const Tensor& logits, const MoeRouteParams& p) {
  PIPIT_ASSERT(logits.dtype() == DType::F32 && logits.ndim() == 2 && logits.rows_contiguous(), "moe_route of {}",
               logits.describe());
  const int64_t n = logits.dim(0), E = logits.dim(1), K = p.k;
  PIPIT_ASSERT(K > 0 && K <= E, "moe_route: top {} of {} experts", K, E);
  PIPIT_ASSERT(p.expert_scale.empty() || int64_t(p.expert_scale.size()) == E, "moe_route: {} expert scales for {}",
               p.expert_scale.size(), E);
  MoeRoutes r{ctx.alloc(DType::I32, {n, K}), ctx.alloc(DType::F32, {n, K})};
  const bool softmax_first = p.order == MoeOrder::kSoftmaxTopK;
  ctx.pool->parallel_for(n, [&](int64_t t0, int64_t t1) {
    std::vector<float> prob(size_t(softmax_first ? E : 0));
    for (int64_t t = t0; t < t1; ++t) {
      const float* l = reinterpret_cast<const float*>(logits.row_ptr(t));
      if (softmax_first) {  // probabilities over all experts, in f32
        std::copy_n(l, E, prob.data());
        ctx.k->softmax(prob.data(), E);
      }
      const float* v = softmax_first ? prob.data() : l;
      int32_t* s = r.sel.ptr<int32_t>() + t * K;
      float* ws = r.wt.ptr<float>() + t * K;
      // top-k, largest first (torch.topk's order); ties keep the lower expert index
      for (int64_t k = 0; k < K; ++k) {
        int32_t best = -1;
        for (int32_t e = 0; e < int32_t(E); ++e)
          if (std::find(s, s + k, e) == s + k && (best < 0 || v[e] > v[best])) best = e;
        s[k] = best;
        ws[k] = v[best];
      }
      float sum = 0.0f;
      if (softmax_first) {
        if (p.renormalize) {
          for (int64_t k = 0; k < K; ++k) sum += ws[k];
          for (int64_t k = 0; k < K; ++k) ws[k] /= sum;
        }
      } else {  // softmax over the k kept logits: exp(v - max) / sum
        for (int64_t k = 0; k < K; ++k) sum += (ws[k] = std::exp(ws[k] - v[s[0]]));
        for (int64_t k = 0; k < K; ++k) ws[k] /= sum;
      }
      if (p.scale != 1.0f)
        for (int64_t k = 0; k < K; ++k) ws[k] *= p.scale;
      if (!p.expert_scale.empty())
        for (int64_t k = 0; k < K; ++k) ws[k] *= p.expert_scale[size_t(s[k])];
    }
  }, 16);
  return r;
}

void CpuDevice::add_rows_scaled_(Ctx& ctx, Tensor& out, std::span<const int64_t> rows, std::span<const float> w,
                                 const Tensor& y) {
  const int64_t m = int64_t(rows.size()), d = out.dim(-1);
  PIPIT_ASSERT(out.dtype() == DType::F32 && y.dtype() == DType::F32 && out.rows_contiguous() && y.rows_contiguous() &&
               y.rows() == m && y.dim(-1) == d && int64_t(w.size()) == m,
               "add_rows_scaled_: {} rows, {} weights of {} into {}", m, w.size(), y.describe(), out.describe());
  ctx.pool->parallel_for(m, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      PIPIT_ASSERT(rows[size_t(i)] >= 0 && rows[size_t(i)] < out.rows(), "row {} of {}", rows[size_t(i)], out.rows());
      float* o = reinterpret_cast<float*>(out.row_ptr(rows[size_t(i)]));
      const float* yr = reinterpret_cast<const float*>(y.row_ptr(i));
      const float wi = w[size_t(i)];
      for (int64_t c = 0; c < d; ++c) o[c] += wi * yr[c];
    }
  }, 8);
}

Tensor CpuDevice::swiglu_clamped(Ctx& ctx, const Tensor& gu, float alpha, float limit) {
  PIPIT_ASSERT(gu.dtype() == DType::F32 && gu.ndim() == 2 && gu.rows_contiguous() && gu.dim(1) % 2 == 0,
               "swiglu_clamped of {}", gu.describe());
  const int64_t m = gu.dim(0), nf = gu.dim(1) / 2;
  Tensor out = ctx.alloc(DType::F32, {m, nf});
  ctx.pool->parallel_for(m, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* g = reinterpret_cast<const float*>(gu.row_ptr(r));
      float* o = reinterpret_cast<float*>(out.row_ptr(r));
      for (int64_t j = 0; j < nf; ++j) {
        const float gate = std::min(g[2 * j], limit);
        const float up = std::clamp(g[2 * j + 1], -limit, limit);
        const float glu = gate * (1.0f / (1.0f + std::exp(-(gate * alpha))));
        o[j] = (up + 1.0f) * glu;
      }
    }
  }, 8);
  return out;
}

}  // namespace pipit
