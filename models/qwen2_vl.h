// Qwen2-VL and Qwen2.5-VL: a Qwen2 decoder with M-RoPE (3 position streams: temporal, height, width) whose
// image-pad tokens take the vision tower's features. The two differ only in their vision tower.
#pragma once

#include "models/model.h"

namespace pipit {

Result<std::unique_ptr<Model>> make_qwen2_vl_family(const HfConfig& cfg, const WeightSource& w, bool qwen2_5);

}  // namespace pipit
