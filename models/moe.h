// Sparse mixture-of-experts MLP (Qwen3-MoE, DeepSeek-V2-style MoE of DeepSeek-OCR's decoder): a linear router scores
// every expert, each token keeps its top-k experts, and each expert — a gated MLP — runs only on the tokens routed
// to it, so a forward touches (and pages in from the mmap'd file) only the experts its tokens use. DeepSeek adds an
// always-on shared expert and a constant factor on the routed weights.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "models/blocks.h"

namespace pipit {

struct MoeWeights {
  Tensor router;                    // [n_expert, n_embd]   (HF: mlp.gate.weight)
  std::vector<MlpWeights> experts;  // n_expert x {gate, up [n_ff_exp, n_embd], down [n_embd, n_ff_exp]}
  std::optional<MlpWeights> shared;  // DeepSeek shared_experts: one gated MLP run on every token, unweighted
};

struct MoeConfig {
  int64_t n_expert = 0, n_expert_used = 0;  // num_experts, num_experts_per_tok
  bool norm_topk_prob = false;              // renormalise the kept probabilities to sum to 1
  float routed_scaling_factor = 1.0f;       // DeepSeek: multiplies the kept weights (after any renormalisation)
  MlpAct act = MlpAct::kSilu;
};

// Loads "<prefix>gate.weight" and "<prefix>experts.{e}.{gate,up,down}_proj.weight"; a missing expert tensor is an
// error that names it. n_ff_shared > 0 also loads "<prefix>shared_experts.{gate,up,down}_proj.weight" of that width.
// An expert past n_expert ("<prefix>experts.{n_expert}.*" present) is an error too: the config's expert count is
// wrong, and routing over the first n_expert alone would silently be another model.
Result<MoeWeights> load_moe(const WeightSource& w, const std::string& prefix, int64_t n_embd, int64_t n_ff_exp,
                            int64_t n_expert, int64_t n_ff_shared = 0);

// x: [n_tokens, n_embd] (already normed) -> [n_tokens, n_embd].
// reference: HF Qwen3MoeSparseMoeBlock / DeepseekV2MoE (topk_method greedy, scoring_func softmax): softmax over
// all experts in f32 -> top-k -> optional renormalisation -> times routed_scaling_factor -> sum over the kept
// experts (in expert order) of weight * expert(x), plus shared_experts(x) when present.
// The ops moe_mlp and moe_dispatch call (Model::ops_used of a model with MoE layers): moe_route, then per expert
// gather_rows, the expert's matmuls and add_rows_scaled_ into a zero-filled output.
OpSet moe_ops_used();
Tensor moe_mlp(Ctx& ctx, const Tensor& x, const MoeWeights& w, const MoeConfig& c, int layer = -1);

// The dispatch every MoE shares: token t goes to experts r.sel[t, 0..K) with weights r.wt[t, 0..K) (moe_route).
// The (token, weight) pairs are grouped by expert (group_by_expert); expert(ctx, xe, e) runs once per expert that has
// tokens, on xe = their rows of x ([m, n_embd], in token order), and returns [m, n_out]; out[t] = sum over t's
// experts, in expert index order, of weight * row. Experts no token chose are never called (their weights stay
// unread).
using ExpertFn = std::function<Tensor(Ctx& ctx, const Tensor& xe, int64_t e)>;
Tensor moe_dispatch(Ctx& ctx, const Tensor& x, const MoeRoutes& r, int64_t n_expert, int64_t n_out,
                    const ExpertFn& expert);

}  // namespace pipit
