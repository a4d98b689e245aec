// Qwen2 / Qwen2.5: the Llama graph with biases on q/k/v projections (none on o_proj).
// reference: HF modeling_qwen2.py (Qwen2Attention: q_proj/k_proj/v_proj bias=True, o_proj bias=False).
#include "models/llama.h"

namespace pipit {

namespace {
Result<std::unique_ptr<Model>> make_qwen2(const HfConfig& cfg, const WeightSource& w) {
  return make_llama_like(cfg, w, LlamaOptions{.qkv_bias = true});
}
}  // namespace

PIPIT_REGISTER_MODEL("qwen2", make_qwen2);

}  // namespace pipit
