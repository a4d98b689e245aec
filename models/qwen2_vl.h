// Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5: a decoder with M-RoPE (3 position streams: temporal, height, width)
// whose image-pad tokens take the vision tower's features. They differ in their vision tower, Qwen3-VL interleaves
// the M-RoPE streams and adds DeepStack features after its first decoder layers, and Qwen3.5 has a decoder of its
// own (models/qwen3_5.cpp: Gated DeltaNet + gated attention) behind Qwen3-VL's tower without DeepStack.
#pragma once

#include <array>

#include "models/model.h"
#include "models/vision/qwen_vision.h"

namespace pipit {

Result<std::unique_ptr<Model>> make_qwen_vl_family(const HfConfig& cfg, const WeightSource& w,
                                                   QwenVisionTower::Kind kind);

// A family member whose decoder is not the Llama-family one: `decoder` gets the whole config (text_config inside)
// and the weights under both the Hub names and those of transformers >= 4.52 (model.language_model.*).
struct QwenVlDecoder {
  const char* arch;     // ModelInfo::arch and error prefix
  ModelFactory make;
  // <|image_pad|>, <|vision_start|>, <|vision_end|>, <|video_pad|> where the config names none (the HF config class
  // defaults); a video_token_id makes the model take videos (runtime/multimodal_video.h)
  std::array<int32_t, 4> default_ids;
};
Result<std::unique_ptr<Model>> make_qwen_vl_family(const HfConfig& cfg, const WeightSource& w,
                                                   QwenVisionTower::Kind kind, const QwenVlDecoder& decoder);

}  // namespace pipit
