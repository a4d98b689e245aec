// RoPE inverse frequencies from a HF config: default, linear, llama3 and yarn-free "dynamic" at load length.
// reference: HF modeling_rope_utils.py (_compute_default_rope_parameters, _compute_linear_scaling_rope_parameters,
// _compute_llama3_parameters).
#pragma once

#include <cstdint>
#include <vector>

#include "models/hf_config.h"

namespace pipit {

struct RopeSpec {
  std::vector<float> inv_freq;  // rot_dim / 2 entries
  float attention_factor = 1.0f;  // multiplies cos and sin
  // M-RoPE (rope_scaling.mrope_section, Qwen2-VL): the position stream (0 = t, 1 = h, 2 = w) of each frequency;
  // empty for plain RoPE. Used when a batch carries mrope_pos.
  std::vector<uint8_t> mrope_stream;
};

// rot_dim: number of rotated dims of a head (head_dim * partial_rotary_factor). theta_key lets Gemma3 read
// rope_local_base_freq; with_scaling = false ignores rope_scaling (Gemma3's sliding layers).
Result<RopeSpec> rope_from_config(const HfConfig& cfg, int64_t rot_dim, const char* theta_key = "rope_theta",
                                  bool with_scaling = true);

}  // namespace pipit
