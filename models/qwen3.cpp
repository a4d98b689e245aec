// Qwen3: the Llama graph with RMSNorm over head_dim on q and k before RoPE, an explicit head_dim, no qkv bias.
// reference: HF modeling_qwen3.py (Qwen3Attention: q_norm / k_norm = Qwen3RMSNorm(head_dim)).
#include "models/gguf_traits.h"
#include "models/llama.h"

namespace pipit {

namespace {
Result<std::unique_ptr<Model>> make_qwen3(const HfConfig& cfg, const WeightSource& w) {
  return make_llama_like(cfg, w, LlamaOptions{.qk_norm = true});
}
// GGUF (convert/gguf_import.cpp): llama.cpp's arch qwen3, unpermuted (NEOX-style RoPE).
const GgufArchRegistrar kQwen3Gguf({.gguf = "qwen3", .model_type = "qwen3", .hf_class = "Qwen3ForCausalLM"});
}  // namespace

PIPIT_REGISTER_MODEL("qwen3", make_qwen3);

}  // namespace pipit
