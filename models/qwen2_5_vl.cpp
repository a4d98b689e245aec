// Qwen2.5-VL: Qwen2-VL's language side with the windowed RMSNorm/SwiGLU vision tower (models/vision/qwen_vision).
// reference: HF modeling_qwen2_5_vl.py.
#include "models/qwen2_vl.h"

namespace pipit {

namespace {
Result<std::unique_ptr<Model>> make_qwen2_5_vl(const HfConfig& cfg, const WeightSource& w) {
  return make_qwen_vl_family(cfg, w, QwenVisionTower::Kind::kQwen2_5);
}
}  // namespace

PIPIT_REGISTER_MODEL("qwen2_5_vl", make_qwen2_5_vl);

}  // namespace pipit
