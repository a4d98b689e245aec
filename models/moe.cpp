// Sparse MoE MLP: routing, then tokens grouped by expert so each expert runs one matmul over its tokens.
#include "backends/cpu/kernels.h"  // TODO(issue 31 item 2): host loops still call kernels
#include "models/moe.h"

#include <cstring>

namespace pipit {

Result<MoeWeights> load_moe(const WeightSource& w, const std::string& p, int64_t n_embd, int64_t n_ff_exp,
                            int64_t n_expert, int64_t n_ff_shared) {
  MoeWeights m;
  if (w.has(p + "gate.weight")) {  // a router of another expert count: say so rather than just "wrong shape"
    PIPIT_ASSIGN_OR_RETURN(Tensor r, w.find(p + "gate.weight"));
    if (r.ndim() == 2 && r.dim(1) == n_embd && r.dim(0) != n_expert)
      return Error::invalid_argument("[load] {}gate.weight routes over {} experts, the config says {}", p, r.dim(0),
                                     n_expert);
  }
  PIPIT_ASSIGN_OR_RETURN(m.router, w.get(p + "gate.weight", {n_expert, n_embd}));
  for (int64_t e = 0; e < n_expert; ++e) {
    PIPIT_ASSIGN_OR_RETURN(MlpWeights ex, load_mlp(w, p + "experts." + std::to_string(e) + ".", n_embd, n_ff_exp));
    m.experts.push_back(std::move(ex));
  }
  const std::string extra = p + "experts." + std::to_string(n_expert) + ".gate_proj.weight";
  if (w.has(extra))
    return Error::invalid_argument("[load] the checkpoint has '{}', more experts than the config's {}", extra,
                                   n_expert);
  if (n_ff_shared > 0) {
    PIPIT_ASSIGN_OR_RETURN(MlpWeights sh, load_mlp(w, p + "shared_experts.", n_embd, n_ff_shared));
    m.shared = std::move(sh);
  }
  return m;
}

OpSet moe_ops_used() { return op_set({Op::kLinear, Op::kLinearGated, Op::kAdd, Op::kHostLoops}); }

Tensor moe_mlp(Ctx& ctx, const Tensor& x, const MoeWeights& w, const MoeConfig& c, int layer) {
  const int64_t n = x.dim(0), n_embd = x.dim(1), E = c.n_expert, K = c.n_expert_used;
  PIPIT_ASSERT(int64_t(w.experts.size()) == E && K > 0 && K <= E);

  // 1. routing probabilities: softmax over all experts, in f32
  Tensor probs = ctx.name(linear(ctx, x, w.router), "moe_router_logits", layer);
  for (int64_t t = 0; t < n; ++t) ctx.k->softmax(probs.ptr<float>() + t * E, E);

  // 2. top-k per token (ties keep the lower expert index), optionally renormalised
  Tensor sel = ctx.alloc(DType::I32, {n, K});
  Tensor wt = ctx.alloc(DType::F32, {n, K});
  for (int64_t t = 0; t < n; ++t) {
    const float* p = probs.ptr<float>() + t * E;
    int32_t* s = sel.ptr<int32_t>() + t * K;
    float* ws = wt.ptr<float>() + t * K;
    float sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      int32_t best = -1;
      for (int32_t e = 0; e < int32_t(E); ++e) {
        bool taken = false;
        for (int64_t j = 0; j < k; ++j) taken |= s[j] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      s[k] = best;
      ws[k] = p[best];
      sum += p[best];
    }
    if (c.norm_topk_prob)
      for (int64_t k = 0; k < K; ++k) ws[k] /= sum;
    if (c.routed_scaling_factor != 1.0f)
      for (int64_t k = 0; k < K; ++k) ws[k] *= c.routed_scaling_factor;
  }

  // 3./4. each used expert on its tokens, summed in expert order as HF's index_add_
  Tensor out = moe_dispatch(ctx, x, sel, wt, E, n_embd, [&](Ctx& c2, const Tensor& xe, int64_t e) {
    return gated_mlp(c2, xe, w.experts[size_t(e)], c.act);
  });
  if (w.shared) add_(ctx, out, ctx.name(gated_mlp(ctx, x, *w.shared, c.act), "moe_shared_out", layer));
  return out;
}

Tensor moe_dispatch(Ctx& ctx, const Tensor& x, const Tensor& sel, const Tensor& wt, int64_t E, int64_t n_out,
                    const ExpertFn& expert) {
  const int64_t n = x.dim(0), n_embd = x.dim(1), K = sel.dim(1);
  PIPIT_ASSERT(sel.dim(0) == n && wt.dim(0) == n && wt.dim(1) == K);
  // group the (token, weight) pairs by expert: counting sort, tokens in order within an expert
  Tensor count = ctx.alloc(DType::I32, {E + 1});
  int32_t* off = count.ptr<int32_t>();
  std::memset(off, 0, size_t(E + 1) * 4);
  for (int64_t i = 0; i < n * K; ++i) ++off[sel.ptr<int32_t>()[i] + 1];
  for (int64_t e = 0; e < E; ++e) off[e + 1] += off[e];
  Tensor tok = ctx.alloc(DType::I32, {n * K});
  Tensor tok_w = ctx.alloc(DType::F32, {n * K});
  {
    Tensor fill = ctx.alloc(DType::I32, {E});
    int32_t* next = fill.ptr<int32_t>();
    std::memcpy(next, off, size_t(E) * 4);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t k = 0; k < K; ++k) {
        const int32_t e = sel.ptr<int32_t>()[t * K + k];
        tok.ptr<int32_t>()[next[e]] = int32_t(t);
        tok_w.ptr<float>()[next[e]] = wt.ptr<float>()[t * K + k];
        ++next[e];
      }
  }

  // each used expert on its tokens; out[t] += weight * expert(x[t]), experts in index order
  Tensor out = ctx.alloc(DType::F32, {n, n_out});
  std::memset(out.data(), 0, size_t(out.nbytes()));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = off[e], m = off[e + 1] - off[e];
    if (m == 0) continue;  // never touched: its weights stay unread
    Tensor xe = ctx.alloc(DType::F32, {m, n_embd});
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(xe.row_ptr(i), x.row_ptr(tok.ptr<int32_t>()[b + i]), size_t(n_embd) * 4);
    Tensor ye = expert(ctx, xe, e);
    PIPIT_ASSERT(ye.dim(0) == m && ye.dim(1) == n_out);
    for (int64_t i = 0; i < m; ++i) {
      float* o = reinterpret_cast<float*>(out.row_ptr(tok.ptr<int32_t>()[b + i]));
      const float* y = reinterpret_cast<const float*>(ye.row_ptr(i));
      const float wi = tok_w.ptr<float>()[b + i];
      for (int64_t d = 0; d < n_out; ++d) o[d] += wi * y[d];
    }
  }
  return out;
}

}  // namespace pipit
