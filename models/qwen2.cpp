// Qwen2 / Qwen2.5: the Llama graph with biases on q/k/v projections (none on o_proj).
// reference: HF modeling_qwen2.py (Qwen2Attention: q_proj/k_proj/v_proj bias=True, o_proj bias=False).
#include "models/gguf_traits.h"
#include "models/llama.h"

namespace pipit {

namespace {
Result<std::unique_ptr<Model>> make_qwen2(const HfConfig& cfg, const WeightSource& w) {
  return make_llama_like(cfg, w, LlamaOptions{.qkv_bias = true});
}

// GGUF (convert/gguf_import.cpp): llama.cpp's arch qwen2, unpermuted (NEOX-style RoPE); no sliding window.
Status qwen2_gguf_config(const GgufArchInput&, nlohmann::json& cfg, std::vector<std::string>&) {
  cfg["use_sliding_window"] = false;
  return Status::ok();
}
const GgufArchRegistrar kQwen2Gguf({.gguf = "qwen2", .model_type = "qwen2", .hf_class = "Qwen2ForCausalLM",
                                    .config = qwen2_gguf_config});
}  // namespace

PIPIT_REGISTER_MODEL("qwen2", make_qwen2);

}  // namespace pipit
