// The CLIP ViT vision tower as LLaVA uses it: Conv2d patch embedding (a matmul over flattened patches), a class
// token, learned position embeddings, pre-LayerNorm, then pre-norm encoder layers with full attention; LLaVA takes
// the hidden states after layer `vision_feature_layer` (so later layers are never run), drops the class token for
// the "default" strategy, and projects them with Linear-GELU-Linear (multi_modal_projector).
// reference: HF modeling_clip.py (CLIPVisionEmbeddings, CLIPEncoderLayer), modeling_llava.py (get_image_features,
// LlavaMultiModalProjector).
#pragma once

#include <vector>

#include "models/model.h"
#include "models/vision/vit_block.h"

namespace pipit {

class ClipVisionTower {
 public:
  // cfg: the whole LLaVA config (vision_config, vision_feature_layer, vision_feature_select_strategy,
  // projector_hidden_act); tensors under "vision_tower.vision_model." and "multi_modal_projector.".
  static Result<ClipVisionTower> load(const HfConfig& cfg, const WeightSource& w, int64_t out_dim);

  // pixel_values [3, image_size, image_size] -> [n_tokens, out_dim] on the heap. Resets ctx.arena per layer.
  Result<Tensor> encode(Ctx& ctx, const Tensor& pixel_values) const;

  int image_size() const { return image_size_; }
  int patch_size() const { return patch_; }
  int64_t n_tokens() const;  // per image: patches (+1 with the "full" strategy)

 private:
  static Result<Act> parse_act(const std::string& name);  // quick_gelu or gelu

  int64_t n_embd_ = 0, n_head_ = 0, n_ff_ = 0, out_dim_ = 0;
  int image_size_ = 224, patch_ = 14;
  float eps_ = 1e-5f;
  Act act_tower_ = Act::kQuickGelu, act_proj_ = Act::kGelu;
  bool keep_cls_ = false;              // vision_feature_select_strategy "full"
  std::vector<int> feature_layers_;    // hidden_states indices (0 = after pre_layrnorm), concatenated in order
  Tensor patch_w_;                     // [n_embd, 3 * patch * patch]
  Tensor cls_, pos_embd_;              // [n_embd], [n_patches + 1, n_embd]
  Tensor pre_ln_w_, pre_ln_b_;
  std::vector<VitBlock> layers_;       // only the layers the selected features need
  Tensor proj1_w_, proj1_b_, proj2_w_, proj2_b_;  // [out_dim, n_embd * n_feature_layers], [out_dim, out_dim]
};

}  // namespace pipit
