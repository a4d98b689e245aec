// Qwen2-VL, Qwen2.5-VL and Qwen3-VL: a Qwen2 (Qwen3 for Qwen3-VL) decoder with M-RoPE (3 position streams:
// temporal, height, width) whose image-pad tokens take the vision tower's features. They differ in their vision
// tower, and Qwen3-VL interleaves the M-RoPE streams and adds DeepStack features after its first decoder layers.
#pragma once

#include "models/model.h"
#include "models/vision/qwen_vision.h"

namespace pipit {

Result<std::unique_ptr<Model>> make_qwen_vl_family(const HfConfig& cfg, const WeightSource& w,
                                                   QwenVisionTower::Kind kind);

}  // namespace pipit
