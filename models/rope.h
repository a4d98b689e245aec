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
  // empty for plain RoPE. Used when a batch carries pos_streams. Sections in order (Qwen2-VL: t t .. h h .. w w ..),
  // or interleaved when rope_scaling.mrope_interleaved is true (Qwen3-VL: t h w t h w .. t t).
  std::vector<uint8_t> mrope_stream;
};

// rot_dim: number of rotated dims of a head (head_dim * partial_rotary_factor). theta_key lets Gemma3 read
// rope_local_base_freq; with_scaling = false ignores rope_scaling (Gemma3's sliding layers).
// Configs written by transformers >= 5 hold base and scaling together in "rope_parameters" ({"rope_type",
// "rope_theta", "factor", ...}), or one such object per layer type ({"full_attention": {...},
// "sliding_attention": {...}}); rope_parameters_of() gives the object that applies, and rope_from_config reads
// it first: theta from it (the sliding one when theta_key is "rope_local_base_freq"), scaling from it.
Result<RopeSpec> rope_from_config(const HfConfig& cfg, int64_t rot_dim, const char* theta_key = "rope_theta",
                                  bool with_scaling = true);

// The rope_parameters object for a layer type ("full_attention" or "sliding_attention"); null when the config has
// none (older configs: rope_theta and rope_scaling at the top level).
nlohmann::json rope_parameters_of(const HfConfig& cfg, const char* layer_type = "full_attention");

}  // namespace pipit
