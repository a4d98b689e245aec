// Gemma 4's image side (Gemma4ForConditionalGeneration): the Gemma4ImageProcessor settings, the vision tower
// (Gemma4VisionModel: patch embedder with a learned 2-D position table, encoder layers with 2-D RoPE, q/k/v norms,
// attention scale 1 and clippable linears, the 3x3 position pooler) and the projector into the decoder
// (Gemma4MultimodalEmbedder embed_vision). Each image becomes <|image> + one <|image|> per pooled patch + <image|>:
// the processor writes the wrapper, the chat template only the <|image|> placeholder.
// reference: HF modeling_gemma4.py, image_processing_pil_gemma4.py, processing_gemma4.py;
// ../shared/testdata/reference/gemma4_vision.py.
#pragma once

#include <memory>
#include <vector>

#include "models/vision/vision_model.h"

namespace pipit {

class Gemma4Vision : public VisionLanguageModel {
 public:
  // top: the whole gemma4 config (vision_config, image/boi/eoi token ids); tensors model.vision_tower.* and
  // model.embed_vision.*; n_embd: the decoder's hidden size. Null (no error) when the checkpoint has no vision
  // tower (a text-only export).
  static Result<std::unique_ptr<Gemma4Vision>> load(const HfConfig& top, const WeightSource& w, int64_t n_embd,
                                                    int64_t n_vocab);

  ImageProcessorConfig default_processor() const override;
  Status check_processor(const ImageProcessorConfig& p) const override;
  int64_t n_image_tokens(const ProcessedImage& img) const override;
  // Named intermediates: vision.pos_embed, vision.patch_embed, vision.layer (per layer), vision.pooled,
  // vision_embeds (what the golden holds, real patch rows only).
  Result<Tensor> encode_image(Ctx& ctx, const ProcessedImage& img) const override;

 private:
  struct ClipLinear {  // Gemma4ClippableLinear: clamp(in) -> linear (no bias) -> clamp(out)
    Tensor w;          // [out, in]
    bool clip = false;
    float in_lo = 0, in_hi = 0, out_lo = 0, out_hi = 0;
  };
  struct Layer {
    Tensor attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // [n_embd]
    Tensor q_norm, k_norm;                                      // [head_dim]
    ClipLinear q, k, v, o, gate, up, down;
  };
  Result<ClipLinear> load_linear(const WeightSource& w, const std::string& name, int64_t out, int64_t in) const;
  Tensor linear_(Ctx& ctx, const Tensor& x, const ClipLinear& l) const;

  int64_t n_embd_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0, n_ff_ = 0, out_dim_ = 0, n_pos_ = 0;
  int patch_ = 16, pool_ = 3, default_soft_tokens_ = 280;
  float eps_ = 1e-6f;
  bool clip_ = false;
  bool bidi_images_ = false;  // text_config.use_bidirectional_attention == "vision": images refused
  std::vector<float> inv_freq_;  // head_dim / 4 frequencies of each spatial half (theta ^ (-2i / (head_dim / 2)))
  Tensor patch_w_;               // input_proj [n_embd, 3 * patch * patch], columns (py, px, c)
  Tensor pos_table_;             // position_embedding_table [2, n_pos, n_embd]: x rows, then y rows
  Tensor ones_;                  // [head_dim] of 1: the weightless v_norm
  Tensor ones_embd_;             // [n_embd] of 1: embed_vision's weightless RMSNorm
  Tensor proj_;                  // embed_vision.embedding_projection [out_dim, n_embd]
  std::vector<Layer> layers_;
};

}  // namespace pipit
