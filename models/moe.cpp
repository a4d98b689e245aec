// Sparse MoE MLP: routing, then tokens grouped by expert so each expert runs one matmul over its tokens.
#include "models/moe.h"

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

OpSet moe_ops_used() {
  return op_set({Op::kLinear, Op::kLinearGated, Op::kAdd, Op::kMoeRoute, Op::kFill, Op::kGatherRows,
                 Op::kAddRowsScaled});
}

Tensor moe_mlp(Ctx& ctx, const Tensor& x, const MoeWeights& w, const MoeConfig& c, int layer) {
  const int64_t n_embd = x.dim(1), E = c.n_expert, K = c.n_expert_used;
  PIPIT_ASSERT(int64_t(w.experts.size()) == E && K > 0 && K <= E);

  // 1./2. softmax over all experts in f32, top-k per token (ties keep the lower expert index), optionally
  // renormalised, times routed_scaling_factor
  Tensor logits = ctx.name(linear(ctx, x, w.router), "moe_router_logits", layer);
  const MoeRoutes r = moe_route(ctx, logits, {.k = K, .order = MoeOrder::kSoftmaxTopK,
                                              .renormalize = c.norm_topk_prob, .scale = c.routed_scaling_factor});

  // 3./4. each used expert on its tokens, summed in expert order as HF's index_add_
  Tensor out = moe_dispatch(ctx, x, r, E, n_embd, [&](Ctx& c2, const Tensor& xe, int64_t e) {
    return gated_mlp(c2, xe, w.experts[size_t(e)], c.act);
  });
  if (w.shared) add_(ctx, out, ctx.name(gated_mlp(ctx, x, *w.shared, c.act), "moe_shared_out", layer));
  return out;
}

Tensor moe_dispatch(Ctx& ctx, const Tensor& x, const MoeRoutes& r, int64_t E, int64_t n_out, const ExpertFn& expert) {
  const int64_t n = x.dim(0);
  PIPIT_ASSERT(r.sel.dim(0) == n && r.wt.dim(0) == n && r.wt.dim(1) == r.sel.dim(1));
  const ExpertGroups g = group_by_expert(ctx, r, E);
  // each used expert on its tokens; out[t] += weight * expert(x[t]), experts in index order
  Tensor out = ctx.alloc(DType::F32, {n, n_out});
  fill_(ctx, out, 0.0f);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = g.begin[size_t(e)], m = g.begin[size_t(e + 1)] - b;
    if (m == 0) continue;  // never touched: its weights stay unread
    const std::span<const int64_t> rows(g.token.data() + b, size_t(m));
    Tensor ye = expert(ctx, gather_rows(ctx, x, rows), e);
    PIPIT_ASSERT(ye.dim(0) == m && ye.dim(1) == n_out);
    add_rows_scaled_(ctx, out, rows, std::span<const float>(g.weight.data() + b, size_t(m)), ye);
  }
  return out;
}

}  // namespace pipit
