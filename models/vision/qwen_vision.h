// The Qwen2-VL, Qwen2.5-VL and Qwen3-VL vision towers: Conv3d patch embedding (a matmul over flattened patches),
// blocks of (norm, attention with 2-D RoPE over the patch grid, residual, norm, MLP, residual), and the PatchMerger
// that concatenates each 2x2 group of patches and projects it to the language model's width.
//  - Qwen2-VL: LayerNorm, fc1/act/fc2 MLP, full attention within each image.
//  - Qwen2.5-VL: RMSNorm, SwiGLU MLP with biases; patches are permuted into windows of window_size pixels and
//    most blocks attend within a window, the fullatt_block_indexes blocks within the whole image; the merger's
//    output is permuted back.
//  - Qwen3-VL: Qwen2-VL's block shape (LayerNorm, linear_fc1/act/linear_fc2) plus a Conv3d bias and a learned
//    position embedding table bilinearly resampled to each image's patch grid; DeepStack: the outputs of the
//    deepstack_visual_indexes blocks go through mergers of their own (LayerNorm after the 2x2 concatenation) and
//    come out beside the final merger's features, for the decoder to add after its first layers.
// reference: HF modeling_qwen2_vl.py (Qwen2VisionTransformerPretrainedModel), modeling_qwen2_5_vl.py
// (Qwen2_5_VisionTransformerPretrainedModel.get_window_index), modeling_qwen3_vl.py (Qwen3VLVisionModel:
// fast_pos_embed_interpolate, deepstack_merger_list, Qwen3VLVisionPatchMerger).
#pragma once

#include <array>
#include <vector>

#include "models/model.h"
#include "models/vision/vit_block.h"

namespace pipit {

class QwenVisionTower {
 public:
  enum class Kind { kQwen2, kQwen2_5, kQwen3 };
  // vcfg: the "vision_config" object. out_dim: the language model's hidden size.
  static Result<QwenVisionTower> load(const HfConfig& vcfg, const WeightSource& w, Kind kind, int64_t out_dim);

  // pixel_values [t * h * w, 3 * temporal_patch * patch * patch] of one image in the processor's row order; returns
  // [t * h * w / merge^2, out_dim * (1 + n_deepstack())] on the heap: per merged token the final merger's features,
  // then those of each DeepStack merger. Resets ctx.arena after each block.
  Result<Tensor> encode(Ctx& ctx, const Tensor& pixel_values, std::array<int32_t, 3> grid_thw) const;

  int patch_size() const { return patch_; }
  int merge_size() const { return merge_; }
  int temporal_patch_size() const { return tps_; }
  int n_deepstack() const { return int(deepstack_.size()); }

  // Qwen3-VL: the learned position embeddings resampled to the grid, [t * h * w, n_embd] in the processor's row
  // order (heap). Public for the golden tests.
  Tensor position_embeddings(Ctx& ctx, std::array<int32_t, 3> grid_thw) const;

  // Qwen2.5-VL: the window permutation of the merged tokens of one image and the window boundaries over patches
  // (empty windows dropped, as HF's unique_consecutive does). Public for the golden tests.
  struct Windows {
    std::vector<int32_t> index;  // merged-token order after the permutation
    std::vector<int32_t> cu;     // [0, ..., n_patches]
  };
  Windows window_index(std::array<int32_t, 3> grid_thw) const;

 private:
  struct Merger {  // LayerNorm (over n_embd, or over merge^2 n_embd after the concatenation), Linear, GELU, Linear
    Tensor norm_w, norm_b, w0, b0, w2, b2;  // w0 [4 n_embd, 4 n_embd], w2 [out_dim, 4 n_embd]
  };
  struct Block {
    VitBlock vit;  // norms (no biases for Qwen2.5-VL's RMSNorm), fused qkv, proj, fc1/fc2 (not Qwen2.5-VL)
    Tensor gate_w, gate_b, up_w, up_b, down_w, down_b;  // Qwen2.5-VL SwiGLU
  };
  Tensor norm(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& b) const;
  Tensor mlp(Ctx& ctx, const Tensor& h, const Block& b) const;
  // The merger on the block output x [n, n_embd]: [n / merge^2, out_dim] on the arena.
  Tensor merge(Ctx& ctx, const Tensor& x, const Merger& m, bool postshuffle_norm) const;

  Kind kind_ = Kind::kQwen2;
  bool v25_ = false;
  int64_t n_embd_ = 0, n_head_ = 0, head_dim_ = 0, n_ff_ = 0, out_dim_ = 0;
  int patch_ = 14, merge_ = 2, tps_ = 2, in_ch_ = 3, window_ = 0;
  float eps_ = 1e-6f;
  Act act_ = Act::kQuickGelu;
  std::vector<bool> full_attn_;  // per block (Qwen2.5-VL)
  std::vector<float> rope_freq_;    // head_dim / 2 rotary frequencies: (h freqs, w freqs)
  std::vector<uint8_t> rope_stream_;  // 0: row position, 1: column position
  Tensor patch_w_, patch_b_;  // [n_embd, 3 * tps * patch * patch] (the Conv3d kernel flattened); bias: Qwen3-VL
  Tensor pos_table_;          // Qwen3-VL: [side * side, n_embd] learned position embeddings of a side x side grid
  int64_t pos_side_ = 0;
  std::vector<Block> blocks_;
  Merger merger_;
  std::vector<std::pair<int, Merger>> deepstack_;  // Qwen3-VL: (block index, its merger), in list order
};

}  // namespace pipit
