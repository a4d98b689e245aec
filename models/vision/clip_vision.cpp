// CLIP ViT tower + LLaVA projector (see clip_vision.h).
#include "models/vision/clip_vision.h"

#include <cmath>

namespace pipit {

Result<Act> ClipVisionTower::parse_act(const std::string& a) {
  if (a == "quick_gelu") return Act::kQuickGelu;
  if (a == "gelu") return Act::kGelu;
  return Error::unsupported("[llava] activation '{}' (quick_gelu and gelu are supported)", a);
}

int64_t ClipVisionTower::n_tokens() const {
  const int64_t g = image_size_ / patch_;
  return g * g + (keep_cls_ ? 1 : 0);
}

Result<ClipVisionTower> ClipVisionTower::load(const HfConfig& cfg, const WeightSource& w, int64_t out_dim) {
  const HfConfig v = cfg.sub("vision_config");
  ClipVisionTower t;
  // CLIPVisionConfig defaults where the config leaves a field out
  t.n_embd_ = v.get_int_or("hidden_size", 768);
  t.n_head_ = v.get_int_or("num_attention_heads", 12);
  t.n_ff_ = v.get_int_or("intermediate_size", 3072);
  const int64_t n_layer = v.get_int_or("num_hidden_layers", 12);
  t.image_size_ = int(v.get_int_or("image_size", 224));
  t.patch_ = int(v.get_int_or("patch_size", 32));
  t.eps_ = float(v.get_float_or("layer_norm_eps", 1e-5));
  t.out_dim_ = out_dim;
  if (t.n_embd_ < 1 || t.n_head_ < 1 || t.n_embd_ % t.n_head_ || t.n_ff_ < 1 || n_layer < 1 || t.patch_ < 1 ||
      t.image_size_ < t.patch_ || t.image_size_ % t.patch_)
    return Error::invalid_argument("[llava] bad vision sizes: hidden {}, heads {}, mlp {}, layers {}, image {}, "
                                   "patch {}", t.n_embd_, t.n_head_, t.n_ff_, n_layer, t.image_size_, t.patch_);
  if (v.get_int_or("num_channels", 3) != 3) return Error::unsupported("[llava] only 3-channel images are supported");
  PIPIT_ASSIGN_OR_RETURN(t.act_tower_, parse_act(v.get_string_or("hidden_act", "quick_gelu")));
  PIPIT_ASSIGN_OR_RETURN(t.act_proj_, parse_act(cfg.get_string_or("projector_hidden_act", "gelu")));
  const std::string strategy = cfg.get_string_or("vision_feature_select_strategy", "default");
  if (strategy != "default" && strategy != "full")
    return Error::unsupported("[llava] vision_feature_select_strategy '{}' (default, full)", strategy);
  t.keep_cls_ = strategy == "full";
  // vision_feature_layer: an index into hidden_states (n_layer + 1 entries), or a list of them (concatenated)
  std::vector<int64_t> sel;
  const nlohmann::json fl = cfg.has("vision_feature_layer") ? cfg.json()["vision_feature_layer"] : nlohmann::json(-2);
  if (fl.is_number_integer()) sel.push_back(fl.get<int64_t>());
  else if (fl.is_array()) for (const auto& x : fl) sel.push_back(x.is_number_integer() ? x.get<int64_t>() : 1 << 30);
  if (sel.empty()) return Error::invalid_argument("[llava] vision_feature_layer {} must be an int or a list", fl.dump());
  int max_layer = 0;
  for (int64_t s : sel) {
    const int64_t i = s < 0 ? s + n_layer + 1 : s;
    if (i < 0 || i > n_layer)
      return Error::invalid_argument("[llava] vision_feature_layer {} outside the {} hidden states", s, n_layer + 1);
    t.feature_layers_.push_back(int(i));
    max_layer = std::max(max_layer, int(i));
  }

  const std::string p = "vision_tower.vision_model.";
  const int64_t E = t.n_embd_, g = t.image_size_ / t.patch_;
  PIPIT_ASSIGN_OR_RETURN(Tensor pw, w.get(p + "embeddings.patch_embedding.weight", {E, 3, t.patch_, t.patch_}));
  t.patch_w_ = pw.reshape({E, 3 * int64_t(t.patch_) * t.patch_});
  PIPIT_ASSIGN_OR_RETURN(t.cls_, w.get(p + "embeddings.class_embedding", {E}));
  PIPIT_ASSIGN_OR_RETURN(t.pos_embd_, w.get(p + "embeddings.position_embedding.weight", {g * g + 1, E}));
  PIPIT_ASSIGN_OR_RETURN(t.pre_ln_w_, w.get(p + "pre_layrnorm.weight", {E}));
  PIPIT_ASSIGN_OR_RETURN(t.pre_ln_b_, w.get(p + "pre_layrnorm.bias", {E}));
  for (int i = 0; i < max_layer; ++i) {  // hidden_states[i] is the output of layer i - 1: later layers are unused
    const std::string q = p + "encoder.layers." + std::to_string(i) + ".";
    static const VitBlockNames names{.norm1 = "layer_norm1", .norm2 = "layer_norm2", .q = "self_attn.q_proj",
                                     .k = "self_attn.k_proj", .v = "self_attn.v_proj", .o = "self_attn.out_proj",
                                     .fc1 = "mlp.fc1", .fc2 = "mlp.fc2"};
    PIPIT_ASSIGN_OR_RETURN(VitBlock L, load_vit_block(w, q, names, E, t.n_ff_));
    t.layers_.push_back(std::move(L));
  }
  const int64_t in = E * int64_t(t.feature_layers_.size());
  PIPIT_ASSIGN_OR_RETURN(t.proj1_w_, w.get("multi_modal_projector.linear_1.weight", {out_dim, in}));
  PIPIT_ASSIGN_OR_RETURN(t.proj1_b_, w.get_optional("multi_modal_projector.linear_1.bias", {out_dim}));
  PIPIT_ASSIGN_OR_RETURN(t.proj2_w_, w.get("multi_modal_projector.linear_2.weight", {out_dim, out_dim}));
  PIPIT_ASSIGN_OR_RETURN(t.proj2_b_, w.get_optional("multi_modal_projector.linear_2.bias", {out_dim}));
  return t;
}

Result<Tensor> ClipVisionTower::encode(Ctx& ctx, const Tensor& pv) const {
  const int64_t S = image_size_, p = patch_, g = S / p, n_patch = g * g, n = n_patch + 1, E = n_embd_;
  if (pv.dtype() != DType::F32 || pv.ndim() != 3 || pv.dim(0) != 3 || pv.dim(1) != S || pv.dim(2) != S)
    return Error::invalid_argument("[vision] pixel_values {}, expected f32 [3, {}, {}]", pv.describe(), S, S);
  // Conv2d(stride = kernel = patch, no bias) over the [3, S, S] planes seen channels-last: one row per patch
  Tensor pe = conv2d(ctx, pv.transpose(0, 1).transpose(1, 2), patch_w_, Tensor(), p, p, 0).reshape({n_patch, E});
  // [class; patches] + position embeddings, then pre_layrnorm
  Tensor emb = ctx.alloc(DType::F32, {n, E});
  Tensor emb_cls = emb.slice(0, 0, 1), emb_patches = emb.slice(0, 1, n);
  copy_(ctx, emb_cls, to_f32(ctx, cls_).reshape({1, E}));
  copy_(ctx, emb_patches, pe);
  add_(ctx, emb, to_f32(ctx, pos_embd_));
  Tensor x0 = ctx.name(layer_norm(ctx, emb, pre_ln_w_, pre_ln_b_, eps_), "vision.hidden_states", 0);

  // x: the residual stream on the heap; features: the selected hidden states, side by side
  const int64_t n_out = keep_cls_ ? n : n_patch, first = keep_cls_ ? 0 : 1, nf = int64_t(feature_layers_.size());
  Tensor feats = Tensor::empty(DType::F32, {n_out, E * nf});
  auto keep = [&](const Tensor& hs, int index) {
    for (int64_t f = 0; f < nf; ++f)
      if (feature_layers_[size_t(f)] == index) {
        Tensor dst = feats.slice(1, f * E, (f + 1) * E);
        copy_(ctx, dst, hs.slice(0, first, first + n_out));
      }
  };
  Tensor x = heap_copy(ctx, x0);
  keep(x, 0);
  ctx.arena->reset();
  const std::vector<int32_t> cu = {0, int32_t(n)};
  for (int il = 0; il < int(layers_.size()); ++il) {
    clip_block_forward(ctx, x, layers_[size_t(il)], n_head_, eps_, cu, act_tower_);
    ctx.name(x, "vision.hidden_states", il + 1);
    keep(x, il + 1);
    ctx.arena->reset();
  }
  ctx.name(feats, "vision.selected");
  Tensor a = linear(ctx, feats, proj1_w_, proj1_b_);
  activation_(ctx, a, act_proj_);
  Tensor y = linear(ctx, a, proj2_w_, proj2_b_);
  Tensor out = heap_copy(ctx, y);
  ctx.arena->reset();
  return out;
}

}  // namespace pipit
