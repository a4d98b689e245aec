// The Llama decoder family: pre-norm blocks of (RMSNorm, GQA self-attention with RoPE, residual, RMSNorm, SwiGLU MLP,
// residual), final RMSNorm and the output head. Qwen2 (qkv bias), Qwen3 (q/k RMSNorm, explicit head_dim), SmolLM3
// (NoPE layers), MiniCPM (muP scales, LongRoPE) and DeepSeek-OCR's decoder (MoE layers with a shared expert) are
// this same graph with those options, so their files only parse their config and set the options.
#pragma once

#include <optional>
#include <vector>

#include "models/moe.h"

namespace pipit {

struct LlamaOptions {
  bool qkv_bias = false;      // Qwen2
  bool qk_norm = false;       // Qwen3
  std::vector<bool> use_rope;  // SmolLM3: per layer, false = no RoPE (NoPE); empty: RoPE everywhere
  // MiniCPM's muP scales: h0 = embed * embd_scale; each residual branch is multiplied by residual_scale before the
  // add; logits = head(norm(h)) * logit_scale. 1 = off (no arithmetic at all, so Llama stays bit-identical).
  float embd_scale = 1.0f, residual_scale = 1.0f, logit_scale = 1.0f;
  // A RoPE the family computed itself (MiniCPM's LongRoPE); empty: rope_from_config.
  std::optional<RopeSpec> rope;
  // Qwen3-VL's DeepStack: Batch::deepstack[k] added to the media tokens after layer k (models/blocks.h
  // add_deepstack_). Off: the decoder never reads it.
  bool deepstack = false;
  // Positions the RoPE is defined for (MiniCPM's table length); 0: no limit.
  int64_t max_pos = 0;
  // Sparse MoE MLP on the layers flagged here (DeepSeek-OCR's decoder); empty: dense MLPs everywhere. A dense layer
  // reads intermediate_size only when there is one.
  std::vector<bool> moe_layers;
  MoeConfig moe;
  int64_t n_ff_exp = 0, n_ff_shared = 0;  // routed expert width; shared expert width (0: none)
};

Result<std::unique_ptr<Model>> make_llama_like(const HfConfig& cfg, const WeightSource& w, const LlamaOptions& opt);

}  // namespace pipit
