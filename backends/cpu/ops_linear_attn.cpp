// Ops of linear attention (Gated DeltaNet): shape checks, per-head/per-channel work split across the thread pool,
// kernels from the dispatch table.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_device.h"

namespace pipit {

void CpuDevice::causal_conv1d_silu(Ctx& ctx, const Tensor& x, Tensor& state, const Tensor& w, Tensor& y) {
  PIPIT_ASSERT(x.ndim() == 2 && x.dtype() == DType::F32 && x.rows_contiguous());
  const int64_t n = x.dim(0), C = x.dim(1), K = w.dim(0);
  PIPIT_ASSERT(w.dtype() == DType::F32 && w.is_contiguous() && w.shape() == std::vector<int64_t>({K, C}),
               "conv weight {} for {} channels", w.describe(), C);
  PIPIT_ASSERT(state.dtype() == DType::F32 && state.is_contiguous() && state.shape() == w.shape(),
               "conv state {} for weight {}", state.describe(), w.describe());
  PIPIT_ASSERT(y.shape() == x.shape() && y.dtype() == DType::F32 && y.rows_contiguous() && y.data() != x.data());
  CausalConvArgs a{x.ptr<float>(), x.row_stride() / 4, y.ptr<float>(), y.row_stride() / 4, state.ptr<float>(),
                   w.ptr<float>(), n, C, K};
  // channels are independent: split them in blocks of 64 (whole SIMD vectors, one cache line of state per tap)
  const int64_t blk = 64, n_blk = (C + blk - 1) / blk;
  ctx.pool->parallel_for(n_blk, [&](int64_t b0, int64_t b1) {
    ctx.k->causal_conv(a, b0 * blk, std::min(C, b1 * blk));
  }, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * K * blk)));
}

void CpuDevice::l2_norm_groups_(Ctx& ctx, Tensor& x, int64_t group, float eps, float scale) {
  PIPIT_ASSERT(x.ndim() == 2 && x.dtype() == DType::F32 && x.rows_contiguous() && x.dim(1) % group == 0);
  const int64_t n = x.dim(1);
  ctx.pool->parallel_for(x.dim(0), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* p = reinterpret_cast<float*>(x.row_ptr(r));
      for (int64_t g0 = 0; g0 < n; g0 += group) {
        float ss = 0.0f;
        for (int64_t i = g0; i < g0 + group; ++i) ss += p[i] * p[i];
        const float s = 1.0f / std::sqrt(ss + eps) * scale;  // HF: x * rsqrt(sum + eps), then q * dk^-0.5
        for (int64_t i = g0; i < g0 + group; ++i) p[i] = p[i] * s;
      }
    }
  }, 16);
}

void CpuDevice::delta_gates_(Ctx& ctx, Tensor& a, Tensor& b, const Tensor& A_log, const Tensor& dt_bias) {
  PIPIT_ASSERT(a.ndim() == 2 && a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous());
  const int64_t nh = a.dim(1);
  PIPIT_ASSERT(A_log.numel() == nh && dt_bias.numel() == nh && A_log.dtype() == DType::F32 &&
               dt_bias.dtype() == DType::F32 && A_log.is_contiguous() && dt_bias.is_contiguous());
  const float* al = A_log.ptr<float>();
  const float* dt = dt_bias.ptr<float>();
  float* pa = a.ptr<float>();
  float* pb = b.ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int64_t h = i % nh;
    const float x = pa[i] + dt[h];
    const float sp = x > 20.0f ? x : std::log1p(std::exp(x));  // torch softplus (beta 1, threshold 20)
    pa[i] = -std::exp(al[h]) * sp;
    pb[i] = 1.0f / (1.0f + std::exp(-pb[i]));
  }
}

// Sequences of up to this many tokens go token by token, exactly as that many decode steps would: a speculative
// verification pass (the last token and up to 16 guesses, a few re-fed ones) then leaves the state and outputs of
// plain decoding bit for bit, so the speculative output is the plain one even at near-ties (the chunked form rounds
// differently: ~1e-8 on lin_core, enough to flip an argmax tie after a few layers). Longer runs (prefill) go chunked.
constexpr int64_t kDeltaStepMax = 32;

void CpuDevice::gated_delta_rule(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t dk, int64_t dv,
                      const Tensor& g, const Tensor& beta, std::span<const DeltaSeq> seqs, Tensor& out) {
  PIPIT_ASSERT(q.ndim() == 2 && k.shape() == q.shape() && v.ndim() == 2 && out.shape() == v.shape() &&
               q.dtype() == DType::F32 && k.dtype() == DType::F32 && v.dtype() == DType::F32);
  PIPIT_ASSERT(q.dim(1) % dk == 0 && v.dim(1) % dv == 0);
  const int64_t nk = q.dim(1) / dk, nv = v.dim(1) / dv;
  PIPIT_ASSERT(nv % nk == 0 && g.shape() == std::vector<int64_t>({v.dim(0), nv}) && beta.shape() == g.shape());
  PIPIT_ASSERT(q.rows_contiguous() && k.rows_contiguous() && v.rows_contiguous() && k.stride(0) == q.stride(0) &&
               out.is_contiguous() && g.is_contiguous() && beta.is_contiguous());
  for (const auto& s : seqs)
    PIPIT_ASSERT(s.state.dtype() == DType::F32 && s.state.is_contiguous() &&
                 s.state.shape() == std::vector<int64_t>({nv, dk, dv}), "delta state {}", s.state.describe());
  const int64_t per_kv = nv / nk, max_n = std::max<int64_t>(dv, delta_rule_scratch(dk, dv));
  const int nth = ctx.pool->size();
  Tensor scratch = ctx.alloc(DType::F32, {nth, max_n});
  // one job per (sequence, value head): heads never share state
  const int64_t n_jobs = int64_t(seqs.size()) * nv;
  ctx.pool->parallel_for_ith(n_jobs, [&](int ith, int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const DeltaSeq& s = seqs[size_t(j / nv)];
      const int64_t h = j % nv, kh = h / per_kv;
      if (s.n == 0) continue;
      DeltaRuleArgs a;
      a.q = reinterpret_cast<const float*>(q.row_ptr(s.begin)) + kh * dk;
      a.k = reinterpret_cast<const float*>(k.row_ptr(s.begin)) + kh * dk;
      a.qk_stride = q.stride(0) / 4;
      a.v = reinterpret_cast<const float*>(v.row_ptr(s.begin)) + h * dv;
      a.v_stride = v.stride(0) / 4;
      a.g = g.ptr<float>() + s.begin * nv + h;
      a.beta = beta.ptr<float>() + s.begin * nv + h;
      a.gb_stride = nv;
      a.out = out.ptr<float>() + (s.begin * nv + h) * dv;
      a.out_stride = nv * dv;
      a.state = s.state.ptr<float>() + h * dk * dv;
      a.scratch = scratch.ptr<float>() + int64_t(ith) * max_n;
      a.n = s.n;
      a.dk = dk;
      a.dv = dv;
      (s.n <= kDeltaStepMax ? ctx.k->delta_step : ctx.k->delta_chunk)(a);
    }
  });
}

Tensor CpuDevice::rms_norm_gated(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& z, float eps) {
  PIPIT_ASSERT(x.is_contiguous() && z.is_contiguous() && x.shape() == z.shape() && w.numel() == x.dim(-1) &&
               w.dtype() == DType::F32 && w.is_contiguous());
  const int64_t n = x.dim(-1), rows = x.rows();
  const float* wf = w.ptr<float>();
  Tensor y = ctx.alloc(DType::F32, x.shape());
  ctx.pool->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      ctx.k->rms_norm_gated(x.ptr<float>() + r * n, wf, z.ptr<float>() + r * n, y.ptr<float>() + r * n, n,
                            eps);
  }, 16);
  return y;
}

}  // namespace pipit
