// Qwen3-MoE: the Qwen3 decoder (GQA, q/k RMSNorm before RoPE, no qkv bias) whose MLP is a sparse mixture of
// experts on every decoder_sparse_step-th layer not listed in mlp_only_layers (the others keep a dense MLP). The
// Llama graph with those options (llama.h); the MoE block is models/moe.h.
// reference: HF modeling_qwen3_moe.py (Qwen3MoeDecoderLayer, Qwen3MoeSparseMoeBlock, Qwen3MoeForCausalLM) and
// configuration_qwen3_moe.py (defaults: norm_topk_prob false, decoder_sparse_step 1, mlp_only_layers []).
#include <algorithm>

#include "models/llama.h"
#include "models/recipe_rules.h"

namespace pipit {

namespace {

Result<std::unique_ptr<Model>> make_qwen3_moe(const HfConfig& cfg, const WeightSource& w) {
  const char* arch = "qwen3_moe";
  PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
  LlamaOptions opt{.qkv_bias = cfg.get_bool_or("attention_bias", false), .qk_norm = true};
  PIPIT_ASSIGN_OR_RETURN(opt.moe.n_expert, cfg.get_int("num_experts"));
  PIPIT_ASSIGN_OR_RETURN(opt.moe.n_expert_used, cfg.get_int("num_experts_per_tok"));
  PIPIT_ASSIGN_OR_RETURN(opt.n_ff_exp, cfg.get_int("moe_intermediate_size"));
  opt.moe.norm_topk_prob = cfg.get_bool_or("norm_topk_prob", false);
  if (opt.moe.n_expert <= 0 || opt.moe.n_expert_used <= 0 || opt.moe.n_expert_used > opt.moe.n_expert)
    return Error::invalid_argument("[{}] num_experts_per_tok {} must be in [1, num_experts {}]", arch,
                                   opt.moe.n_expert_used, opt.moe.n_expert);
  if (opt.n_ff_exp <= 0) return Error::invalid_argument("[{}] moe_intermediate_size {} must be positive", arch,
                                                        opt.n_ff_exp);
  const std::string act = cfg.get_string_or("hidden_act", "silu");
  if (act != "silu") return Error::unsupported("[{}] hidden_act '{}' (only silu is supported)", arch, act);
  if (cfg.get_bool_or("use_sliding_window", false))
    return Error::unsupported("[{}] use_sliding_window = true is not supported", arch);

  // which layers are sparse: HF (layer_idx not in mlp_only_layers) and (layer_idx + 1) % decoder_sparse_step == 0
  const int64_t step = cfg.get_int_or("decoder_sparse_step", 1);
  if (step <= 0) return Error::invalid_argument("[{}] decoder_sparse_step {} must be positive", arch, step);
  const std::vector<int64_t> mlp_only = cfg.get_int_list("mlp_only_layers");
  for (int64_t il = 0; il < std::max<int64_t>(n_layer, 0); ++il)
    opt.moe_layers.push_back(std::find(mlp_only.begin(), mlp_only.end(), il) == mlp_only.end() && (il + 1) % step == 0);
  return make_llama_like(cfg, w, opt);
}

}  // namespace

PIPIT_REGISTER_MODEL("qwen3_moe", make_qwen3_moe);
// The quantization recipe's MoE rules (models/recipe_rules.h moe_recipe_rules: why, and the measurement on this
// family's test checkpoint).
static FamilyRecipeRegistrar kQwen3MoeRecipe({"qwen3_moe"}, {}, moe_recipe_rules(".mlp.gate.weight", ".mlp.experts."));

}  // namespace pipit
