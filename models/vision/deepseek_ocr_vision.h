// DeepSeek-OCR's DeepEncoder + projector + layout tokens: one image (global view and optional tiles, from the
// DeepSeek-OCR preprocessing in image_processor.h) -> the rows that replace its <image> tokens.
//   * SAM ViT-B (ViTDet style): 16x16 patch conv, absolute position table [1, 64, 64, W] (torch bicubic-antialias
//     resized to other grids), pre-LN blocks (LayerNorm eps 1e-6, erf GELU MLP), attention in 14x14 windows
//     (zero-padded grid) except the global_attn_indexes blocks, each with the decomposed relative position bias
//     q.Rh + q.Rw from the unscaled q (tables linearly interpolated when their length is not 2 * size - 1); neck
//     conv1x1 -> LayerNorm2d -> conv3x3 -> LayerNorm2d, then two stride-2 3x3 convs (net_2, net_3): 16x fewer tokens.
//   * CLIP-L/14 trunk without its own patch embedding: the SAM output is its patch tokens, after a class token;
//     position table of 16x16 + 1 (bicubic-antialias resized for other grids), pre_layrnorm, pre-LN blocks with a
//     fused qkv_proj and quick_gelu MLP, no post-norm.
//   * cat(CLIP tokens without the class token, SAM tokens) -> linear projector (model.projector.layers).
//   * layout: each view's token grid gets image_newline after every row; tiles are re-gridded into one
//     (rows * h) x (cols * w) grid first; the order is tiles, global view, view_seperator.
// reference: deepseek-ai/DeepSeek-OCR @ e4ac34e1 DeepSeek-OCR-vllm/deepencoder/sam_vary_sdpa.py, clip_sdpa.py,
// build_linear.py; the remote code modeling_deepseekocr.py (DeepseekOCRModel.forward); tests/reference/
// deepseek_ocr_vision.py (the PyTorch reference the goldens come from).
#pragma once

#include <vector>

#include "models/model.h"
#include "models/vision/image_processor.h"
#include "models/vision/vit_block.h"

namespace pipit {

class DeepEncoder {
 public:
  // cfg: the whole config.json (vision_config.width.{sam_vit_b, clip-l-14-224}: heads, layers,
  // global_attn_indexes; the remote code's hard-coded SAM ViT-B / CLIP-L values where absent). Tensors under
  // model.sam_model., model.vision_model., model.projector., model.image_newline, model.view_seperator.
  static Result<DeepEncoder> load(const HfConfig& cfg, const WeightSource& w, int64_t n_embd);

  // Rows the image becomes: per view side s / 64 tokens (two stride-2 convs after 16 px patches), + a newline per
  // row, + the separator.
  static int64_t n_tokens(const ProcessedImage& img);
  // Token grid side of a square view of `size` pixels.
  static int64_t grid_of(int64_t size);

  // [n_tokens, n_embd] f32 on the heap. Intermediates of the global view are named (vision.sam.embed,
  // vision.sam.block.N, vision.sam.neck, vision.sam.out, vision.clip.embed, vision.clip.block.N).
  Result<Tensor> encode(Ctx& ctx, const ProcessedImage& img) const;

 private:
  struct SamBlock {  // the shared pre-LN block (fused qkv) + its decomposed relative position tables
    VitBlock vit;
    Tensor rel_h, rel_w;
    bool global = false;
  };
  // One square view, pixels [3, S, S] f32 -> projected tokens [g * g, n_embd] (heap).
  Tensor view_features(Ctx& ctx, const Tensor& pixels) const;
  Tensor sam(Ctx& ctx, const Tensor& pixels, int64_t* grid) const;
  Tensor clip(Ctx& ctx, const Tensor& patches, int64_t grid) const;
  void sam_block(Ctx& ctx, Tensor& x, int64_t g, const SamBlock& b) const;

  int64_t sam_w_ = 768, sam_heads_ = 12, neck_ = 256, d2_ = 512, d3_ = 1024;
  int64_t clip_w_ = 1024, clip_heads_ = 16, n_embd_ = 0;
  Tensor patch_w_, patch_b_, pos_;                  // [W, 3*16*16], [W], [1, 64, 64, W]
  std::vector<SamBlock> sam_blocks_;
  Tensor neck0_, neck1_w_, neck1_b_, neck2_, neck3_w_, neck3_b_, net2_, net3_;  // convs as [O, C * k * k]
  Tensor cls_, clip_pos_, pre_w_, pre_b_;
  std::vector<VitBlock> clip_blocks_;
  Tensor proj_w_, proj_b_, newline_, separator_;
};

}  // namespace pipit
