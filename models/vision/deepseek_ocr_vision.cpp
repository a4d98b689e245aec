// DeepSeek-OCR's DeepEncoder (see deepseek_ocr_vision.h).
#include "models/vision/deepseek_ocr_vision.h"

#include <algorithm>
#include <cmath>

namespace pipit {

namespace {

constexpr int64_t kPatch = 16;     // SAM's patch conv
constexpr int64_t kWindow = 14;    // SAM's window_size (_build_sam)
constexpr int64_t kSamTable = 64;  // SAM's pos_embed grid: img_size 1024 / 16
constexpr int64_t kClipTable = 16; // CLIP-L/14 at 224: 16 x 16 positions + the class token

// Conv2d 3x3, padding 1, no bias, on tokens [H * W, C] (row-major grid) -> [Ho * Wo, O].
Tensor conv3x3(Ctx& ctx, const Tensor& x, int64_t H, int64_t W, const Tensor& w, int64_t stride, int64_t* Ho,
               int64_t* Wo) {
  Tensor y = conv2d(ctx, x.reshape({H, W, x.dim(1)}), w, Tensor(), 3, stride, 1);
  *Ho = y.dim(0);
  *Wo = y.dim(1);
  return y.reshape({*Ho * *Wo, y.dim(2)});
}

struct SamWidths {
  int64_t heads = 12, layers = 12;
  std::vector<int64_t> global = {2, 5, 8, 11};
};

}  // namespace

int64_t DeepEncoder::grid_of(int64_t size) {
  int64_t g = size / kPatch;
  for (int i = 0; i < 2; ++i) g = (g - 1) / 2 + 1;  // the stride-2, padding-1 3x3 convs
  return g;
}

int64_t DeepEncoder::n_tokens(const ProcessedImage& img) {
  const int64_t g = grid_of(img.pixel_values.dim(1));
  int64_t n = g * (g + 1) + 1;
  if (img.crops.defined()) {
    const int64_t t = grid_of(img.crops.dim(2));
    n += int64_t(img.crop_rows) * t * (int64_t(img.crop_cols) * t + 1);
  }
  return n;
}

Result<DeepEncoder> DeepEncoder::load(const HfConfig& cfg, const WeightSource& w, int64_t n_embd) {
  const char* arch = "[deepseek-ocr]";
  DeepEncoder e;
  e.n_embd_ = n_embd;
  // vision_config.width: the real config.json lists SAM ViT-B and CLIP-L sizes there (the remote code hard-codes
  // them); read them so a smaller tower loads too
  const nlohmann::json widths = cfg.has("vision_config") && cfg.json()["vision_config"].is_object() &&
                                        cfg.json()["vision_config"].contains("width") &&
                                        cfg.json()["vision_config"]["width"].is_object()
                                    ? cfg.json()["vision_config"]["width"]
                                    : nlohmann::json::object();
  const HfConfig sc(widths.contains("sam_vit_b") ? widths["sam_vit_b"] : nlohmann::json::object());
  const HfConfig cc(widths.contains("clip-l-14-224") ? widths["clip-l-14-224"] : nlohmann::json::object());
  e.sam_w_ = sc.get_int_or("width", 768);
  e.sam_heads_ = sc.get_int_or("heads", 12);
  const int64_t sam_layers = sc.get_int_or("layers", 12);
  std::vector<int64_t> global = sc.has("global_attn_indexes") ? sc.get_int_list("global_attn_indexes")
                                                              : std::vector<int64_t>{2, 5, 8, 11};
  e.clip_w_ = cc.get_int_or("width", 1024);
  e.clip_heads_ = cc.get_int_or("heads", 16);
  const int64_t clip_layers = cc.get_int_or("layers", 24);
  if (e.sam_w_ < 1 || e.sam_heads_ < 1 || e.sam_w_ % e.sam_heads_ || sam_layers < 1 || e.clip_w_ < 1 ||
      e.clip_heads_ < 1 || e.clip_w_ % e.clip_heads_ || clip_layers < 1)
    return Error::invalid_argument("{} bad vision sizes: SAM width {} heads {} layers {}, CLIP width {} heads {} "
                                   "layers {}", arch, e.sam_w_, e.sam_heads_, sam_layers, e.clip_w_, e.clip_heads_,
                                   clip_layers);
  for (int64_t g : global)
    if (g < 0 || g >= sam_layers)
      return Error::invalid_argument("{} global_attn_indexes {} outside the {} SAM blocks", arch, g, sam_layers);

  const int64_t W = e.sam_w_, shd = W / e.sam_heads_;
  const std::string s = "model.sam_model.";
  PIPIT_ASSIGN_OR_RETURN(Tensor pw, w.get(s + "patch_embed.proj.weight", {W, 3, kPatch, kPatch}));
  e.patch_w_ = pw.reshape({W, 3 * kPatch * kPatch});
  PIPIT_ASSIGN_OR_RETURN(e.patch_b_, w.get(s + "patch_embed.proj.bias", {W}));
  PIPIT_ASSIGN_OR_RETURN(e.pos_, w.get(s + "pos_embed", {1, kSamTable, kSamTable, W}));
  PIPIT_ASSIGN_OR_RETURN(Tensor lin1, w.find(s + "blocks.0.mlp.lin1.weight"));
  const int64_t sam_ff = lin1.ndim() == 2 ? lin1.dim(0) : 4 * W;
  for (int64_t i = 0; i < sam_layers; ++i) {
    const std::string p = s + "blocks." + std::to_string(i) + ".";
    SamBlock b;
    b.global = std::find(global.begin(), global.end(), i) != global.end();
    static const VitBlockNames names{.norm1 = "norm1", .norm2 = "norm2", .qkv = "attn.qkv", .o = "attn.proj",
                                     .fc1 = "mlp.lin1", .fc2 = "mlp.lin2"};
    PIPIT_ASSIGN_OR_RETURN(b.vit, load_vit_block(w, p, names, W, sam_ff));
    // 2 * input_size - 1 rows: the window, or the 64 x 64 grid of 1024 px for global blocks
    const int64_t L = 2 * (b.global ? kSamTable : kWindow) - 1;
    PIPIT_ASSIGN_OR_RETURN(b.rel_h, w.get(p + "attn.rel_pos_h", {L, shd}));
    PIPIT_ASSIGN_OR_RETURN(b.rel_w, w.get(p + "attn.rel_pos_w", {L, shd}));
    e.sam_blocks_.push_back(std::move(b));
  }
  PIPIT_ASSIGN_OR_RETURN(Tensor n0, w.find(s + "neck.0.weight"));
  e.neck_ = n0.ndim() == 4 ? n0.dim(0) : 256;
  PIPIT_ASSIGN_OR_RETURN(Tensor net2, w.find(s + "net_2.weight"));
  e.d2_ = net2.ndim() == 4 ? net2.dim(0) : 512;
  e.d3_ = e.clip_w_;  // net_3's output is CLIP's patch embedding
  const int64_t N = e.neck_;
  PIPIT_ASSIGN_OR_RETURN(Tensor t, w.get(s + "neck.0.weight", {N, W, 1, 1}));
  e.neck0_ = t.reshape({N, W});
  PIPIT_ASSIGN_OR_RETURN(e.neck1_w_, w.get(s + "neck.1.weight", {N}));
  PIPIT_ASSIGN_OR_RETURN(e.neck1_b_, w.get(s + "neck.1.bias", {N}));
  PIPIT_ASSIGN_OR_RETURN(t, w.get(s + "neck.2.weight", {N, N, 3, 3}));
  e.neck2_ = t.reshape({N, N * 9});
  PIPIT_ASSIGN_OR_RETURN(e.neck3_w_, w.get(s + "neck.3.weight", {N}));
  PIPIT_ASSIGN_OR_RETURN(e.neck3_b_, w.get(s + "neck.3.bias", {N}));
  PIPIT_ASSIGN_OR_RETURN(t, w.get(s + "net_2.weight", {e.d2_, N, 3, 3}));
  e.net2_ = t.reshape({e.d2_, N * 9});
  PIPIT_ASSIGN_OR_RETURN(t, w.get(s + "net_3.weight", {e.d3_, e.d2_, 3, 3}));
  e.net3_ = t.reshape({e.d3_, e.d2_ * 9});

  const int64_t C = e.clip_w_;
  const std::string c = "model.vision_model.";
  PIPIT_ASSIGN_OR_RETURN(e.cls_, w.get(c + "embeddings.class_embedding", {C}));
  PIPIT_ASSIGN_OR_RETURN(e.clip_pos_, w.get(c + "embeddings.position_embedding.weight",
                                            {kClipTable * kClipTable + 1, C}));
  PIPIT_ASSIGN_OR_RETURN(e.pre_w_, w.get(c + "pre_layrnorm.weight", {C}));
  PIPIT_ASSIGN_OR_RETURN(e.pre_b_, w.get(c + "pre_layrnorm.bias", {C}));
  PIPIT_ASSIGN_OR_RETURN(Tensor fc1, w.find(c + "transformer.layers.0.mlp.fc1.weight"));
  const int64_t clip_ff = fc1.ndim() == 2 ? fc1.dim(0) : 4 * C;
  for (int64_t i = 0; i < clip_layers; ++i) {
    const std::string p = c + "transformer.layers." + std::to_string(i) + ".";
    static const VitBlockNames names{.norm1 = "layer_norm1", .norm2 = "layer_norm2", .qkv = "self_attn.qkv_proj",
                                     .o = "self_attn.out_proj", .fc1 = "mlp.fc1", .fc2 = "mlp.fc2"};
    PIPIT_ASSIGN_OR_RETURN(VitBlock b, load_vit_block(w, p, names, C, clip_ff));
    e.clip_blocks_.push_back(std::move(b));
  }
  PIPIT_ASSIGN_OR_RETURN(e.proj_w_, w.get("model.projector.layers.weight", {n_embd, C + e.d3_}));
  PIPIT_ASSIGN_OR_RETURN(e.proj_b_, w.get("model.projector.layers.bias", {n_embd}));
  PIPIT_ASSIGN_OR_RETURN(e.newline_, w.get("model.image_newline", {n_embd}));
  PIPIT_ASSIGN_OR_RETURN(e.separator_, w.get("model.view_seperator", {n_embd}));
  return e;
}

void DeepEncoder::sam_block(Ctx& ctx, Tensor& x, int64_t g, const SamBlock& b) const {
  ArenaScope scope(*ctx.arena);
  const VitBlock& v = b.vit;
  Tensor h = layer_norm(ctx, x, v.norm1_w, v.norm1_b, 1e-6f);
  Tensor attn;
  if (b.global) {
    attn = rel_pos_attention(ctx, linear(ctx, h, v.qkv_w, v.qkv_b), 1, g, g, sam_heads_, b.rel_h, b.rel_w);
  } else {
    // window_partition: the grid zero-padded to a multiple of the window; padded tokens are keys too (their
    // q/k/v are the qkv bias), as in the remote code. window_unpartition drops them again.
    const int64_t nw = (g + kWindow - 1) / kWindow;
    Tensor qkv = linear(ctx, window_partition(ctx, h, g, g, kWindow), v.qkv_w, v.qkv_b);
    attn = window_unpartition(
        ctx, rel_pos_attention(ctx, qkv, nw * nw, kWindow, kWindow, sam_heads_, b.rel_h, b.rel_w), g, g, kWindow);
  }
  add_(ctx, x, linear(ctx, attn, v.o_w, v.o_b));  // proj is per token: after unpartition is the same
  add_(ctx, x, vit_mlp(ctx, layer_norm(ctx, x, v.norm2_w, v.norm2_b, 1e-6f), v, Act::kGelu));
}

Tensor DeepEncoder::sam(Ctx& ctx, const Tensor& px, int64_t* grid) const {
  const int64_t g = px.dim(1) / kPatch, W = sam_w_;
  Tensor x;
  {
    ArenaScope scope(*ctx.arena);
    // PatchEmbed: Conv2d(kernel = stride = 16) over the [3, S, S] planes seen channels-last
    Tensor pe = conv2d(ctx, px.transpose(0, 1).transpose(1, 2), patch_w_, patch_b_, kPatch, kPatch, 0);
    Tensor pos = to_f32(ctx, pos_).reshape({kSamTable, kSamTable, W});
    if (g != kSamTable) pos = resize_bicubic_aa(ctx, pos, g, g);  // get_abs_pos: bicubic antialias in float32
    pe = pe.reshape({g * g, W});
    add_(ctx, pe, pos.reshape({g * g, W}));
    x = heap_copy(ctx, pe);
  }
  ctx.name(x, "vision.sam.embed");
  for (size_t i = 0; i < sam_blocks_.size(); ++i) {
    sam_block(ctx, x, g, sam_blocks_[i]);
    ctx.name(x, "vision.sam.block", int(i));
  }
  ArenaScope scope(*ctx.arena);
  Tensor n = layer_norm(ctx, linear(ctx, x, neck0_), neck1_w_, neck1_b_, 1e-6f);  // LayerNorm2d: over channels
  int64_t h1, w1, h2, w2, h3, w3;
  n = layer_norm(ctx, conv3x3(ctx, n, g, g, neck2_, 1, &h1, &w1), neck3_w_, neck3_b_, 1e-6f);
  ctx.name(n, "vision.sam.neck");
  Tensor c2 = conv3x3(ctx, n, h1, w1, net2_, 2, &h2, &w2);
  Tensor c3 = conv3x3(ctx, c2, h2, w2, net3_, 2, &h3, &w3);
  ctx.name(c3, "vision.sam.out");
  *grid = h3;
  return heap_copy(ctx, c3);
}

Tensor DeepEncoder::clip(Ctx& ctx, const Tensor& patches, int64_t grid) const {
  const int64_t N = grid * grid, n = N + 1, C = clip_w_;
  Tensor x;
  {
    ArenaScope scope(*ctx.arena);
    Tensor emb = ctx.alloc(DType::F32, {n, C});  // [class token; patches]
    Tensor emb_cls = emb.slice(0, 0, 1), emb_patches = emb.slice(0, 1, n);
    copy_(ctx, emb_cls, to_f32(ctx, cls_).reshape({1, C}));
    copy_(ctx, emb_patches, patches);
    Tensor pos = to_f32(ctx, clip_pos_);
    if (grid != kClipTable) {  // the class token's position is never resized
      Tensor p = ctx.alloc(DType::F32, {n, C});
      Tensor p_cls = p.slice(0, 0, 1), p_patches = p.slice(0, 1, n);
      copy_(ctx, p_cls, pos.slice(0, 0, 1));
      Tensor table = pos.slice(0, 1, kClipTable * kClipTable + 1).reshape({kClipTable, kClipTable, C});
      copy_(ctx, p_patches, resize_bicubic_aa(ctx, table, grid, grid).reshape({N, C}));
      pos = p;
    }
    add_(ctx, emb, pos);
    x = heap_copy(ctx, layer_norm(ctx, emb, pre_w_, pre_b_, 1e-5f));
  }
  ctx.name(x, "vision.clip.embed");
  const std::vector<int32_t> cu = {0, int32_t(n)};
  for (size_t il = 0; il < clip_blocks_.size(); ++il) {
    ArenaScope scope(*ctx.arena);
    clip_block_forward(ctx, x, clip_blocks_[il], clip_heads_, 1e-5f, cu, Act::kQuickGelu);
    ctx.name(x, "vision.clip.block", int(il));
  }
  return x;
}

Tensor DeepEncoder::view_features(Ctx& ctx, const Tensor& pixels) const {
  int64_t g = 0;
  Tensor s1 = sam(ctx, pixels, &g);
  Tensor s2 = clip(ctx, s1, g);
  ArenaScope scope(*ctx.arena);
  const int64_t N = g * g, C = clip_w_;
  Tensor f = ctx.alloc(DType::F32, {N, C + d3_});  // cat(CLIP tokens without the class token, SAM tokens)
  Tensor f_clip = f.slice(1, 0, C), f_sam = f.slice(1, C, C + d3_);
  copy_(ctx, f_clip, s2.slice(0, 1, N + 1));
  copy_(ctx, f_sam, s1);
  return heap_copy(ctx, linear(ctx, f, proj_w_, proj_b_));
}

Result<Tensor> DeepEncoder::encode(Ctx& ctx, const ProcessedImage& img) const {
  const Tensor& pv = img.pixel_values;
  if (pv.dtype() != DType::F32 || pv.ndim() != 3 || pv.dim(0) != 3 || pv.dim(1) != pv.dim(2) || pv.dim(1) % kPatch)
    return Error::invalid_argument("[vision] pixel_values {}, expected f32 [3, S, S] with S a multiple of 16",
                                   pv.describe());
  const int64_t E = n_embd_, S = pv.dim(1), g = grid_of(S);
  Tensor global = view_features(ctx, pv);
  // where each output row comes from: a source (kNewline, kSeparator, kGlobal, or tile t >= 0) and its row
  constexpr int kNewline = -1, kSeparator = -2, kGlobal = -3;
  std::vector<std::pair<int, int32_t>> from;
  std::vector<Tensor> tiles;
  if (img.crops.defined()) {
    const Tensor& cr = img.crops;
    const int64_t n_tiles = cr.dim(0), ts = cr.dim(2), tg = grid_of(ts), cols = img.crop_cols, rows = img.crop_rows;
    if (cr.ndim() != 4 || cr.dim(1) != 3 || cr.dim(3) != ts || n_tiles != cols * rows || ts % kPatch)
      return Error::invalid_argument("[vision] crops {} for a {}x{} grid", cr.describe(), cols, rows);
    Ctx quiet = ctx;  // the stages named are the global view's
    quiet.on_tensor = nullptr;
    for (int64_t t = 0; t < n_tiles; ++t) tiles.push_back(view_features(quiet, cr.select(0, t)));
    // [rows, cols, h, w, C] -> [rows * h, cols * w, C], a newline after every row of the big grid
    for (int64_t Y = 0; Y < rows * tg; ++Y) {
      for (int64_t X = 0; X < cols * tg; ++X)
        from.emplace_back(int((Y / tg) * cols + X / tg), int32_t((Y % tg) * tg + X % tg));
      from.emplace_back(kNewline, 0);
    }
  }
  for (int64_t y = 0; y < g; ++y) {
    for (int64_t x = 0; x < g; ++x) from.emplace_back(kGlobal, int32_t(y * g + x));
    from.emplace_back(kNewline, 0);
  }
  from.emplace_back(kSeparator, 0);
  PIPIT_ASSERT(int64_t(from.size()) == n_tokens(img));
  Tensor out = Tensor::empty(DType::F32, {int64_t(from.size()), E});
  ArenaScope scope(*ctx.arena);
  auto place = [&](int source, const Tensor& src) {  // the rows that come from `source`
    std::vector<int32_t> rows(from.size(), -1);
    for (size_t r = 0; r < from.size(); ++r)
      if (from[r].first == source) rows[r] = from[r].second;
    copy_rows_(ctx, out, rows, src);
  };
  for (size_t t = 0; t < tiles.size(); ++t) place(int(t), tiles[t]);
  place(kGlobal, global);
  place(kNewline, to_f32(ctx, newline_).reshape({1, E}));
  place(kSeparator, to_f32(ctx, separator_).reshape({1, E}));
  return out;
}

}  // namespace pipit
