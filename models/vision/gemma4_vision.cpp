// Gemma 4 vision tower + projector (see gemma4_vision.h). The tower runs only the image's real patch rows: HF's
// padding rows are masked keys whose own outputs the pooler zeroes, so they change nothing.
#include "models/vision/gemma4_vision.h"

#include <cmath>

#include "backends/ops.h"
#include "core/host_f32.h"

namespace pipit {

namespace {

constexpr const char* kTower = "model.vision_tower.";

// A 0-d clip bound (Gemma4ClippableLinear's input_min / input_max / output_min / output_max buffers).
Result<float> bound(const WeightSource& w, const std::string& name) {
  PIPIT_ASSIGN_OR_RETURN(Tensor t, w.find(name));
  if (t.numel() != 1) return Error::invalid_argument("[gemma4] {}: shape {}, expected a scalar", name, t.describe());
  auto r = host_scalar_f32(t);
  if (!r.is_ok()) return Error::invalid_argument("[gemma4] {}: {}", name, r.status().message());
  const float v = *r;
  if (std::isnan(v)) return Error::invalid_argument("[gemma4] {} is NaN", name);
  return v;
}

}  // namespace

Result<std::unique_ptr<Gemma4Vision>> Gemma4Vision::load(const HfConfig& top, const WeightSource& w, int64_t out_dim,
                                                         int64_t n_vocab) {
  if (!top.has("vision_config") || !w.has(std::string(kTower) + "patch_embedder.input_proj.weight"))
    return std::unique_ptr<Gemma4Vision>();
  const HfConfig v = top.sub("vision_config");
  auto t = std::make_unique<Gemma4Vision>();
  // Gemma4VisionConfig defaults where a field is missing
  t->n_embd_ = v.get_int_or("hidden_size", 768);
  t->n_head_ = v.get_int_or("num_attention_heads", 12);
  t->n_head_kv_ = v.get_int_or("num_key_value_heads", t->n_head_);
  t->head_dim_ = v.get_int_or("head_dim", 64);
  t->n_ff_ = v.get_int_or("intermediate_size", 3072);
  t->n_pos_ = v.get_int_or("position_embedding_size", 10240);
  const int64_t n_layer = v.get_int_or("num_hidden_layers", 16);
  t->patch_ = int(v.get_int_or("patch_size", 16));
  t->pool_ = int(v.get_int_or("pooling_kernel_size", 3));
  t->default_soft_tokens_ = int(v.get_int_or("default_output_length", top.get_int_or("vision_soft_tokens_per_image", 280)));
  t->eps_ = float(v.get_float_or("rms_norm_eps", 1e-6));
  t->clip_ = v.get_bool_or("use_clipped_linears", false);
  t->out_dim_ = out_dim;
  // 31B / 26B-A4B: image tokens attend to each other in the decoder (a mask the decoder does not build yet)
  const HfConfig tc = top.sub("text_config");
  t->bidi_images_ = tc.json().is_object() && tc.get_string_or("use_bidirectional_attention", "") == "vision";
  const int64_t E = t->n_embd_, hd = t->head_dim_;
  if (E < 1 || E > (1 << 16) || t->n_head_ < 1 || t->n_head_kv_ < 1 || t->n_head_ % t->n_head_kv_ || hd < 4 ||
      hd % 4 || hd > 1024 || t->n_ff_ < 1 || t->n_ff_ > (1 << 18) || n_layer < 1 || n_layer > 256 || t->patch_ < 1 ||
      t->patch_ > 64 || t->pool_ < 1 || t->pool_ > 16 || t->n_pos_ < 1 || t->n_pos_ > (1 << 20))
    return Error::invalid_argument("[gemma4] bad vision sizes: hidden {}, heads {}/{}, head_dim {} (a multiple of 4), "
                                   "intermediate {}, layers {}, patch {}, pooling {}, position table {}", E,
                                   t->n_head_, t->n_head_kv_, hd, t->n_ff_, n_layer, t->patch_, t->pool_, t->n_pos_);
  PIPIT_TRY(check_gemma4_soft_tokens(t->default_soft_tokens_));
  if (v.get_bool_or("standardize", false))
    return Error::unsupported("[gemma4] vision_config.standardize (std_bias / std_scale) is not supported");
  if (v.get_bool_or("attention_bias", false))
    return Error::unsupported("[gemma4] vision_config.attention_bias = true is not supported");
  const std::string act = v.get_string_or("hidden_activation", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    return Error::unsupported("[gemma4] vision hidden_activation '{}' (only gelu_pytorch_tanh)", act);
  // Gemma4VisionRotaryEmbedding: the default RoPE over head_dim / 2 (one spatial half), in float32 as HF
  const nlohmann::json rp = v.has("rope_parameters") ? v.json()["rope_parameters"] : nlohmann::json::object();
  const double theta = rp.is_object() && rp.contains("rope_theta") && rp["rope_theta"].is_number()
                           ? rp["rope_theta"].get<double>() : v.get_float_or("rope_theta", 100.0);
  if (!(theta > 0)) return Error::invalid_argument("[gemma4] vision rope_theta {} must be positive", theta);
  const int64_t spatial = hd / 2;
  for (int64_t i = 0; i < spatial; i += 2)
    t->inv_freq_.push_back(1.0f / std::pow(float(theta), float(i) / float(spatial)));

  const std::string p = kTower;
  PIPIT_ASSIGN_OR_RETURN(t->patch_w_, w.get(p + "patch_embedder.input_proj.weight", {E, 3 * int64_t(t->patch_) * t->patch_}));
  PIPIT_ASSIGN_OR_RETURN(t->pos_table_, w.get(p + "patch_embedder.position_embedding_table", {2, t->n_pos_, E}));
  const int64_t nq = t->n_head_ * hd, nkv = t->n_head_kv_ * hd, F = t->n_ff_;
  for (int64_t il = 0; il < n_layer; ++il) {
    const std::string q = p + "encoder.layers." + std::to_string(il) + ".";
    Layer L;
    PIPIT_ASSIGN_OR_RETURN(L.attn_norm, w.get(q + "input_layernorm.weight", {E}));
    PIPIT_ASSIGN_OR_RETURN(L.post_attn_norm, w.get(q + "post_attention_layernorm.weight", {E}));
    PIPIT_ASSIGN_OR_RETURN(L.ffn_norm, w.get(q + "pre_feedforward_layernorm.weight", {E}));
    PIPIT_ASSIGN_OR_RETURN(L.post_ffn_norm, w.get(q + "post_feedforward_layernorm.weight", {E}));
    PIPIT_ASSIGN_OR_RETURN(L.q_norm, w.get(q + "self_attn.q_norm.weight", {hd}));
    PIPIT_ASSIGN_OR_RETURN(L.k_norm, w.get(q + "self_attn.k_norm.weight", {hd}));
    PIPIT_ASSIGN_OR_RETURN(L.q, t->load_linear(w, q + "self_attn.q_proj", nq, E));
    PIPIT_ASSIGN_OR_RETURN(L.k, t->load_linear(w, q + "self_attn.k_proj", nkv, E));
    PIPIT_ASSIGN_OR_RETURN(L.v, t->load_linear(w, q + "self_attn.v_proj", nkv, E));
    PIPIT_ASSIGN_OR_RETURN(L.o, t->load_linear(w, q + "self_attn.o_proj", E, nq));
    PIPIT_ASSIGN_OR_RETURN(L.gate, t->load_linear(w, q + "mlp.gate_proj", F, E));
    PIPIT_ASSIGN_OR_RETURN(L.up, t->load_linear(w, q + "mlp.up_proj", F, E));
    PIPIT_ASSIGN_OR_RETURN(L.down, t->load_linear(w, q + "mlp.down_proj", E, F));
    t->layers_.push_back(std::move(L));
  }
  PIPIT_ASSIGN_OR_RETURN(t->proj_, w.get("model.embed_vision.embedding_projection.weight", {out_dim, E}));
  t->ones_ = host_full_f32({hd}, 1.0f);
  t->ones_embd_ = host_full_f32({E}, 1.0f);

  // Gemma4Config defaults: <|image|> 258880, <|image> 255999, <image|> 258882
  t->tokens_.image_token_id = int32_t(top.get_int_or("image_token_id", 258880));
  t->tokens_.image_begin_id = int32_t(top.get_int_or("boi_token_id", 255999));
  t->tokens_.image_end_id = int32_t(top.get_int_or("eoi_token_id", 258882));
  for (int32_t id : {t->tokens_.image_token_id, t->tokens_.image_begin_id, t->tokens_.image_end_id})
    if (id < 0 || id >= n_vocab)
      return Error::invalid_argument("[gemma4] image token id {} outside the vocabulary of {}", id, n_vocab);
  return t;
}

Result<Gemma4Vision::ClipLinear> Gemma4Vision::load_linear(const WeightSource& w, const std::string& name, int64_t out,
                                                           int64_t in) const {
  ClipLinear l;
  PIPIT_ASSIGN_OR_RETURN(l.w, w.get(name + ".linear.weight", {out, in}));
  l.clip = clip_;
  if (!clip_) return l;
  PIPIT_ASSIGN_OR_RETURN(l.in_lo, bound(w, name + ".input_min"));
  PIPIT_ASSIGN_OR_RETURN(l.in_hi, bound(w, name + ".input_max"));
  PIPIT_ASSIGN_OR_RETURN(l.out_lo, bound(w, name + ".output_min"));
  PIPIT_ASSIGN_OR_RETURN(l.out_hi, bound(w, name + ".output_max"));
  return l;
}

Tensor Gemma4Vision::linear_(Ctx& ctx, const Tensor& x, const ClipLinear& l) const {
  if (!l.clip) return linear(ctx, x, l.w);
  Tensor xc = to_f32(ctx, x);  // a copy: x feeds other linears with their own bounds
  clamp_(ctx, xc, l.in_lo, l.in_hi);
  Tensor y = linear(ctx, xc, l.w);
  clamp_(ctx, y, l.out_lo, l.out_hi);
  return y;
}

ImageProcessorConfig Gemma4Vision::default_processor() const {
  ImageProcessorConfig c;  // Gemma4ImageProcessor: bicubic, rescale 1/255, no normalize
  c.kind = "gemma4";
  c.do_normalize = false;
  c.do_center_crop = false;
  c.mean = {0.0f, 0.0f, 0.0f};
  c.std = {1.0f, 1.0f, 1.0f};
  c.patch_size = patch_;
  c.pooling_kernel_size = pool_;
  c.max_soft_tokens = default_soft_tokens_;
  return c;
}

Status Gemma4Vision::check_processor(const ImageProcessorConfig& p) const {
  if (bidi_images_)
    return Error::unsupported("[gemma4] images with use_bidirectional_attention = vision (31B / 26B-A4B: image tokens "
                              "attend to each other) are not supported yet");
  if (p.kind != "gemma4")
    return Error::invalid_argument("[gemma4] the image processor must be Gemma 4's");
  if (p.patch_size != patch_ || p.pooling_kernel_size != pool_)
    return Error::invalid_argument("[gemma4] image processor patch {} / pooling {} do not fit the vision tower's "
                                   "patch {} / pooling {}", p.patch_size, p.pooling_kernel_size, patch_, pool_);
  return check_gemma4_soft_tokens(p.max_soft_tokens);
}

int64_t Gemma4Vision::n_image_tokens(const ProcessedImage& img) const {
  return int64_t(img.grid_thw[1] / pool_) * (img.grid_thw[2] / pool_);
}

Result<Tensor> Gemma4Vision::encode_image(Ctx& ctx, const ProcessedImage& img) const {
  const int64_t gh = img.grid_thw[1], gw = img.grid_thw[2], n = gh * gw, E = n_embd_, hd = head_dim_;
  const int64_t cols = 3 * int64_t(patch_) * patch_;
  const Tensor& pv = img.pixel_values;
  if (pv.dtype() != DType::F32 || pv.ndim() != 2 || pv.dim(1) != cols || pv.dim(0) < n || n < 1 || gh % pool_ ||
      gw % pool_)
    return Error::invalid_argument("[gemma4] pixel_values {} for a {}x{} patch grid, expected f32 [>= {}, {}] and a "
                                   "grid of multiples of {}", pv.describe(), gh, gw, n, cols, pool_);
  if (gh > n_pos_ || gw > n_pos_)
    return Error::invalid_argument("[gemma4] image of {}x{} patches: the position table has {} per side (a less "
                                   "elongated image, or fewer soft tokens)", gw, gh, n_pos_);
  // patch coordinates (x, y) row-major over the grid: image_position_ids without the padding rows
  std::vector<int32_t> pos(size_t(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    pos[size_t(i)] = int32_t(i % gw);
    pos[size_t(n + i)] = int32_t(i / gw);
  }
  const std::span<const int32_t> px(pos.data(), size_t(n)), py(pos.data() + n, size_t(n));

  // Gemma4VisionPatchEmbedder: input_proj(2 * (pixels - 0.5)) + table[0][x] + table[1][y]
  Tensor x0 = to_f32(ctx, pv.slice(0, 0, n));
  shift_scale_(ctx, x0, -0.5f, 2.0f);
  Tensor h = linear(ctx, x0, patch_w_);
  Tensor pe = embedding(ctx, pos_table_.select(0, 0), px);
  add_(ctx, pe, embedding(ctx, pos_table_.select(0, 1), py));
  ctx.name(pe, "vision.pos_embed");
  add_(ctx, h, pe);
  Tensor x = ctx.name(h, "vision.patch_embed");  // the residual stream; each layer's own activations are freed

  const std::vector<int32_t> cu = {0, int32_t(n)};
  for (int il = 0; il < int(layers_.size()); ++il) {
    ArenaScope scope(*ctx.arena);
    const Layer& L = layers_[size_t(il)];
    Tensor a = rms_norm(ctx, x, L.attn_norm, eps_);
    Tensor q = linear_(ctx, a, L.q).reshape({n, n_head_, hd});
    Tensor k = linear_(ctx, a, L.k).reshape({n, n_head_kv_, hd});
    Tensor v = linear_(ctx, a, L.v).reshape({n, n_head_kv_, hd});
    rms_norm_heads_(ctx, q, L.q_norm, eps_);
    rms_norm_heads_(ctx, k, L.k_norm, eps_);
    rms_norm_heads_(ctx, v, ones_, eps_);
    rope_parts_(ctx, q, pos, 2, inv_freq_);  // first half of each head by x, second by y
    rope_parts_(ctx, k, pos, 2, inv_freq_);
    Tensor o = ctx.alloc(DType::F32, {n, n_head_, hd});
    attention_segments(ctx, q, k, v, cu, 1.0f, o);  // bidirectional over the image, scale 1
    Tensor ao = rms_norm(ctx, linear_(ctx, o.reshape({n, n_head_ * hd}), L.o), L.post_attn_norm, eps_);
    add_(ctx, x, ao);
    Tensor f = rms_norm(ctx, x, L.ffn_norm, eps_);
    Tensor g = geglu(ctx, linear_(ctx, f, L.gate), linear_(ctx, f, L.up));
    add_(ctx, x, rms_norm(ctx, linear_(ctx, g, L.down), L.post_ffn_norm, eps_));
    ctx.name(x, "vision.layer", il);
  }

  // Gemma4VisionPooler: mean of each pool x pool block, blocks row-major, times sqrt(hidden); then embed_vision:
  // weightless RMSNorm -> Linear to the decoder's width
  Tensor pooled = pool_grid(ctx, x, gh, gw, pool_);
  scale_(ctx, pooled, float(std::sqrt(double(E))));
  ctx.name(pooled, "vision.pooled");
  Tensor y = linear(ctx, rms_norm(ctx, pooled, ones_embd_, eps_), proj_);
  ctx.name(y, "vision_embeds");
  Tensor out = heap_copy(ctx, y);
  ctx.arena->reset();
  return out;
}

}  // namespace pipit
