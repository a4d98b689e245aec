// The Llama decoder family: pre-norm blocks of (RMSNorm, GQA self-attention with RoPE, residual, RMSNorm, SwiGLU MLP,
// residual), final RMSNorm and the output head. Qwen2 (qkv bias) and Qwen3 (q/k RMSNorm, explicit head_dim) are
// this same graph with those options, so their files only parse their config and set the options.
#pragma once

#include <vector>

#include "models/blocks.h"

namespace pipit {

struct LlamaOptions {
  bool qkv_bias = false;      // Qwen2
  bool qk_norm = false;       // Qwen3
  std::vector<bool> use_rope;  // SmolLM3: per layer, false = no RoPE (NoPE); empty: RoPE everywhere
};

Result<std::unique_ptr<Model>> make_llama_like(const HfConfig& cfg, const WeightSource& w, const LlamaOptions& opt);

}  // namespace pipit
