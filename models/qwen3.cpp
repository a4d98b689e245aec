// Qwen3: the Llama graph with RMSNorm over head_dim on q and k before RoPE, an explicit head_dim, no qkv bias.
// reference: HF modeling_qwen3.py (Qwen3Attention: q_norm / k_norm = Qwen3RMSNorm(head_dim)).
#include "models/llama.h"

namespace pipit {

namespace {
Result<std::unique_ptr<Model>> make_qwen3(const HfConfig& cfg, const WeightSource& w) {
  return make_llama_like(cfg, w, LlamaOptions{.qk_norm = true});
}
}  // namespace

PIPIT_REGISTER_MODEL("qwen3", make_qwen3);

}  // namespace pipit
