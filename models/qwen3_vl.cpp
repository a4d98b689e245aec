// Qwen3-VL (dense): the Qwen3 decoder (q/k RMSNorm) with interleaved M-RoPE, the Qwen3-VL vision tower (learned
// position embeddings, DeepStack mergers; models/vision/qwen_vision) and DeepStack: the features of intermediate
// vision blocks are added to the image tokens' hidden states after the first decoder layers (the Batch carries
// them beside the image features; models/blocks.h add_deepstack_). Everything else is Qwen2-VL's
// (models/qwen2_vl.cpp). reference: HF modeling_qwen3_vl.py (Qwen3VLForConditionalGeneration).
#include "models/qwen2_vl.h"

namespace pipit {

namespace {
Result<std::unique_ptr<Model>> make_qwen3_vl(const HfConfig& cfg, const WeightSource& w) {
  return make_qwen_vl_family(cfg, w, QwenVisionTower::Kind::kQwen3);
}
}  // namespace

PIPIT_REGISTER_MODEL("qwen3_vl", make_qwen3_vl);

}  // namespace pipit
