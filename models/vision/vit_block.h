// One pre-norm ViT encoder block's weights, shared by the towers whose blocks are the same modules under different
// names: LLaVA's CLIP (separate q/k/v), Qwen2-VL / Qwen2.5-VL / Qwen3-VL (fused qkv, RoPE inside, Qwen2.5's RMSNorm
// and SwiGLU kept by the tower), DeepSeek-OCR's CLIP-L trunk (fused qkv_proj) and its SAM blocks (fused qkv; the
// rel-pos tables and windowed attention stay in the SAM code). Gemma 4's blocks (RMS sandwich norms, q/k norms,
// clippable bias-free linears) are a different block and keep their own loader.
// reference: HF modeling_clip.py CLIPEncoderLayer, modeling_qwen2_vl.py Qwen2VLVisionBlock.
#pragma once

#include <array>
#include <span>
#include <string>

#include "models/model.h"

namespace pipit {

// The names of one family's block tensors below the block prefix, without ".weight" / ".bias".
struct VitBlockNames {
  std::string norm1, norm2;  // pre-attention / pre-MLP norms
  bool norm_bias = true;     // LayerNorm (weight + bias); false: RMSNorm, weight only (Qwen2.5-VL)
  std::string qkv;           // fused [3 E, E] projection; empty: separate q, k, v [E, E] each
  std::string q, k, v;
  std::string o;             // attention output projection [E, E]
  std::string fc1, fc2;      // plain MLP [F, E], [E, F]; empty: the tower loads its own MLP
};

struct VitBlock {
  Tensor norm1_w, norm1_b, norm2_w, norm2_b;      // [E]; biases undefined for RMSNorm
  Tensor qkv_w, qkv_b;                            // fused: [3 E, E], [3 E] (undefined when separate)
  Tensor q_w, q_b, k_w, k_b, v_w, v_b;            // separate: [E, E], [E] (undefined when fused)
  Tensor o_w, o_b;                                // [E, E], [E]
  Tensor fc1_w, fc1_b, fc2_w, fc2_b;              // [F, E], [F], [E, F], [E] (undefined without a plain MLP)
};

// Loads the block under `prefix` (e.g. "visual.blocks.3."); every projection has a bias.
Result<VitBlock> load_vit_block(const WeightSource& w, const std::string& prefix, const VitBlockNames& names,
                                int64_t n_embd, int64_t n_ff);

// q, k, v of the normed input h [n, E] as [n, n_head, head_dim] f32 on the arena (fused or separate weights).
std::array<Tensor, 3> vit_qkv(Ctx& ctx, const Tensor& h, const VitBlock& b, int64_t n_head, int64_t head_dim);

// fc2(act(fc1(h))) on the arena.
Tensor vit_mlp(Ctx& ctx, const Tensor& h, const VitBlock& b, Act act);

// The CLIP encoder layer in place on the residual stream x [n, E]: x += o(attention(qkv(LN1(x)))) with full
// attention inside each segment of cu and scale 1 / sqrt(head_dim), then x += MLP(LN2(x)). Intermediates on the
// arena (the caller frees them).
void clip_block_forward(Ctx& ctx, Tensor& x, const VitBlock& b, int64_t n_head, float eps,
                        std::span<const int32_t> cu, Act act);

}  // namespace pipit
