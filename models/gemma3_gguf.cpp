// Gemma 3's GGUF import (llama.cpp arch gemma3; conversion Gemma3Model, src/models/gemma3.cpp): registered beside
// models/gemma3.cpp in models/gguf_traits.h's registry, read by convert/gguf_import.cpp. Beyond the shared
// llama-family layout: four norms per layer (llama.cpp's ffn_norm is its pre_feedforward_layernorm), every norm
// weight stored as 1 + w (llama.cpp multiplies by the stored value; 1 is subtracted again), and settings llama.cpp
// fixes in its graph code rather than the metadata taken as llama.cpp's values: the sliding pattern (6 unless
// attention.sliding_window_pattern says), local RoPE base 10000 (rope.freq_base_swa) and attention scale (head_dim,
// n_embd / n_head for the 62-layer 27B, unless attention.scale says).
#include "models/gguf_traits.h"

namespace pipit {

namespace {

Status gemma3_config(const GgufArchInput& in, nlohmann::json& cfg, std::vector<std::string>& notes) {
  const GgufMeta& m = in.m;
  const std::string ctx = "[gguf] " + in.f.path();
  const int64_t n_layer = in.n_layer, n_embd = in.n_embd, n_head = in.n_head, head_dim = in.head_dim;
  cfg["hidden_activation"] = "gelu_pytorch_tanh";
  cfg["head_dim"] = head_dim;
  // sliding layers: the pattern key (int n: layer il slides when il % n < n - 1; or one bool per layer), else
  // llama.cpp's default of 6 (every Gemma 3 size); no window key: every layer global
  PIPIT_ASSIGN_OR_RETURN(int64_t window, m.get_int_or("attention.sliding_window", 0));
  std::vector<bool> sliding(size_t(n_layer), false);
  if (window > 0) {
    PIPIT_ASSIGN_OR_RETURN(sliding, m.sliding_layers(n_layer, 6));
    cfg["sliding_window"] = window;
  }
  nlohmann::json types = nlohmann::json::array();
  for (bool sl : sliding) types.push_back(sl ? "sliding_attention" : "full_attention");
  cfg["layer_types"] = types;
  PIPIT_ASSIGN_OR_RETURN(double swa_theta, m.get_float_or("rope.freq_base_swa", 10000.0));
  cfg["rope_local_base_freq"] = swa_theta;
  // attention scale: the metadata's when present; else llama.cpp's rule (query_pre_attn_scalar = head_dim,
  // n_embd / n_head for the 62-layer 27B), which is what every released Gemma 3 config says
  PIPIT_ASSIGN_OR_RETURN(double scale, m.get_float_or("attention.scale", 0.0));
  if (scale < 0) return Error::format("{}: gemma3.attention.scale {} must be positive", ctx, scale);
  cfg["query_pre_attn_scalar"] = scale > 0 ? 1.0 / (scale * scale)
                                 : n_layer == 62 ? double(n_embd / n_head) : double(head_dim);
  PIPIT_ASSIGN_OR_RETURN(double softcap, m.get_float_or("final_logit_softcapping", 0.0));
  if (softcap > 0) cfg["final_logit_softcapping"] = softcap;
  notes.push_back("gemma3: norm weights stored as 1 + w, taken back to w");
  return Status::ok();
}

const GgufArchRegistrar kGemma3Gguf({.gguf = "gemma3", .model_type = "gemma3_text", .hf_class = "Gemma3ForCausalLM",
                                     .shifted_norms = true,
                                     .layer_names = {{"post_attention_norm.weight", "post_attention_layernorm.weight"},
                                                     {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
                                                     {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"}},
                                     .config = gemma3_config});

}  // namespace

}  // namespace pipit
