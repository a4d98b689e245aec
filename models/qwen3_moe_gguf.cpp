// Qwen3-MoE's GGUF record (models/gguf_traits.h), read by convert/gguf_import.cpp. Kept out of
// models/qwen3_moe.cpp so that GGUF import links without the model's code (scripts/fuzz.sh links the parsers alone).
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// llama.cpp's arch qwen3moe, experts stacked per layer, no dense width needed.
Status qwen3_moe_gguf_config(const GgufArchInput& in, nlohmann::json& cfg, std::vector<std::string>&) {
  const GgufMeta& m = in.m;
  PIPIT_ASSIGN_OR_RETURN(int64_t n_expert, m.get_int("expert_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_used, m.get_int("expert_used_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_ff_exp, m.get_int("expert_feed_forward_length"));
  cfg["num_experts"] = n_expert;
  cfg["num_experts_per_tok"] = n_used;
  cfg["moe_intermediate_size"] = n_ff_exp;
  // llama.cpp's qwen3moe graph always renormalises the kept weights (every released Qwen3-MoE has
  // norm_topk_prob true); expert_weights_norm overrides when present
  const GgufValue* nv = m.find("expert_weights_norm");
  cfg["norm_topk_prob"] = nv && nv->is_int() ? nv->as_int() != 0 : true;
  cfg["decoder_sparse_step"] = 1;
  cfg["mlp_only_layers"] = nlohmann::json::array();
  return Status::ok();
}
const GgufArchRegistrar kQwen3MoeGguf({.gguf = "qwen3moe", .model_type = "qwen3_moe",
                                       .hf_class = "Qwen3MoeForCausalLM", .optional_ffn = true,
                                       .stacked_experts = true, .config = qwen3_moe_gguf_config});

}  // namespace

}  // namespace pipit
