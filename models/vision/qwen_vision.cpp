// Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision towers (see qwen_vision.h).
#include "models/vision/qwen_vision.h"

#include <cmath>

namespace pipit {

Result<QwenVisionTower> QwenVisionTower::load(const HfConfig& v, const WeightSource& w, Kind kind, int64_t out_dim) {
  const bool v25 = kind == Kind::kQwen2_5, v3 = kind == Kind::kQwen3;
  const char* arch = v25 ? "qwen2_5_vl vision" : v3 ? "qwen3_vl vision" : "qwen2_vl vision";
  QwenVisionTower t;
  t.kind_ = kind;
  t.v25_ = v25;
  // HF config class defaults (Qwen2VLVisionConfig, Qwen2_5_VLVisionConfig, Qwen3VLVisionConfig)
  const int64_t depth = v.get_int_or("depth", v3 ? 27 : 32);
  t.n_embd_ = v25 ? v.get_int_or("hidden_size", 1280) : v3 ? v.get_int_or("hidden_size", 1152)
                                                           : v.get_int_or("embed_dim", 1280);
  t.n_head_ = v.get_int_or("num_heads", 16);
  t.n_ff_ = v25 ? v.get_int_or("intermediate_size", 3420) : v3 ? v.get_int_or("intermediate_size", 4304)
                                                               : t.n_embd_ * v.get_int_or("mlp_ratio", 4);
  t.out_dim_ = v25 || v3 ? v.get_int_or("out_hidden_size", out_dim) : v.get_int_or("hidden_size", out_dim);
  t.patch_ = int(v.get_int_or("patch_size", v.get_int_or("spatial_patch_size", v3 ? 16 : 14)));
  t.merge_ = int(v.get_int_or("spatial_merge_size", 2));
  t.tps_ = int(v.get_int_or("temporal_patch_size", 2));
  t.in_ch_ = int(v.get_int_or("in_channels", v.get_int_or("in_chans", 3)));
  t.window_ = int(v.get_int_or("window_size", 112));
  if (depth < 1 || t.n_embd_ < 1 || t.n_head_ < 1 || t.n_ff_ < 1 || t.patch_ < 1 || t.merge_ < 1 || t.tps_ < 1 ||
      t.n_embd_ % t.n_head_ || (t.n_embd_ / t.n_head_) % 4)
    return Error::invalid_argument("[{}] bad sizes: depth {}, width {}, heads {}, mlp {}, patch {}, merge {}, "
                                   "temporal patch {} (width / heads must be a multiple of 4)",
                                   arch, depth, t.n_embd_, t.n_head_, t.n_ff_, t.patch_, t.merge_, t.tps_);
  if (t.in_ch_ != 3) return Error::unsupported("[{}] {} input channels (3 supported)", arch, t.in_ch_);
  if (t.out_dim_ != out_dim)
    return Error::invalid_argument("[{}] merger output {} differs from the language model's hidden size {}", arch,
                                   t.out_dim_, out_dim);
  if (v25 && t.window_ / t.merge_ / t.patch_ < 1)
    return Error::invalid_argument("[{}] window_size {} is smaller than merge * patch = {}", arch, t.window_,
                                   t.merge_ * t.patch_);
  t.head_dim_ = t.n_embd_ / t.n_head_;
  const std::string act = v.get_string_or("hidden_act", v25 ? "silu" : v3 ? "gelu_pytorch_tanh" : "quick_gelu");
  if (act == "quick_gelu") t.act_ = Act::kQuickGelu;
  else if (act == "gelu") t.act_ = Act::kGelu;
  else if (act == "silu") t.act_ = Act::kSilu;
  else if (act == "gelu_pytorch_tanh") t.act_ = Act::kGeluTanh;
  else return Error::unsupported("[{}] hidden_act '{}' (quick_gelu, gelu, silu, gelu_pytorch_tanh)", arch, act);
  if (v25 && t.act_ != Act::kSilu && t.act_ != Act::kGeluTanh)
    return Error::unsupported("[{}] hidden_act '{}' in a gated MLP (silu, gelu_pytorch_tanh)", arch, act);
  t.full_attn_.assign(size_t(depth), !v25);
  if (v25 && v.has("fullatt_block_indexes")) {
    const auto& f = v.json()["fullatt_block_indexes"];
    if (!f.is_array()) return Error::invalid_argument("[{}] fullatt_block_indexes must be a list", arch);
    for (const auto& i : f) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= depth)
        return Error::invalid_argument("[{}] fullatt_block_indexes {} outside [0, {})", arch, f.dump(), depth);
      t.full_attn_[size_t(i.get<int64_t>())] = true;
    }
  }
  // VisionRotaryEmbedding(head_dim / 2): inv_freq[i] = 1 / 10000^(2i / (head_dim / 2)), in float32 as HF;
  // the first head_dim / 4 rotary frequencies turn with the patch row, the next head_dim / 4 with the column
  const int64_t dim = t.head_dim_ / 2;
  for (int stream = 0; stream < 2; ++stream)
    for (int64_t i = 0; i < dim; i += 2) {
      t.rope_freq_.push_back(1.0f / std::pow(10000.0f, float(i) / float(dim)));
      t.rope_stream_.push_back(uint8_t(stream));
    }

  const int64_t E = t.n_embd_, K = int64_t(t.in_ch_) * t.tps_ * t.patch_ * t.patch_, M = E * t.merge_ * t.merge_;
  PIPIT_ASSIGN_OR_RETURN(Tensor pw, w.get("visual.patch_embed.proj.weight", {E, t.in_ch_, t.tps_, t.patch_, t.patch_}));
  t.patch_w_ = pw.reshape({E, K});
  if (v3) {
    PIPIT_ASSIGN_OR_RETURN(t.patch_b_, w.get("visual.patch_embed.proj.bias", {E}));
    // num_grid_per_side = int(num_position_embeddings ** 0.5): the table is a side x side grid
    const int64_t n_pos = v.get_int_or("num_position_embeddings", 2304);
    if (n_pos < 1) return Error::invalid_argument("[{}] num_position_embeddings {} must be positive", arch, n_pos);
    t.pos_side_ = int64_t(std::sqrt(double(n_pos)));
    while (t.pos_side_ * t.pos_side_ > n_pos) --t.pos_side_;
    while ((t.pos_side_ + 1) * (t.pos_side_ + 1) <= n_pos) ++t.pos_side_;
    PIPIT_ASSIGN_OR_RETURN(t.pos_table_, w.get("visual.pos_embed.weight", {n_pos, E}));
  }
  for (int64_t i = 0; i < depth; ++i) {
    const std::string p = "visual.blocks." + std::to_string(i) + ".";
    Block b;
    // Qwen2-VL: mlp.fc1 / mlp.fc2; Qwen3-VL: mlp.linear_fc1 / mlp.linear_fc2; Qwen2.5-VL: the gated MLP below
    const VitBlockNames names{.norm1 = "norm1", .norm2 = "norm2", .norm_bias = !v25, .qkv = "attn.qkv",
                              .o = "attn.proj", .fc1 = v25 ? "" : v3 ? "mlp.linear_fc1" : "mlp.fc1",
                              .fc2 = v25 ? "" : v3 ? "mlp.linear_fc2" : "mlp.fc2"};
    PIPIT_ASSIGN_OR_RETURN(b.vit, load_vit_block(w, p, names, E, t.n_ff_));
    if (v25) {
      PIPIT_ASSIGN_OR_RETURN(b.gate_w, w.get(p + "mlp.gate_proj.weight", {t.n_ff_, E}));
      PIPIT_ASSIGN_OR_RETURN(b.gate_b, w.get(p + "mlp.gate_proj.bias", {t.n_ff_}));
      PIPIT_ASSIGN_OR_RETURN(b.up_w, w.get(p + "mlp.up_proj.weight", {t.n_ff_, E}));
      PIPIT_ASSIGN_OR_RETURN(b.up_b, w.get(p + "mlp.up_proj.bias", {t.n_ff_}));
      PIPIT_ASSIGN_OR_RETURN(b.down_w, w.get(p + "mlp.down_proj.weight", {E, t.n_ff_}));
      PIPIT_ASSIGN_OR_RETURN(b.down_b, w.get(p + "mlp.down_proj.bias", {E}));
    }
    t.blocks_.push_back(std::move(b));
  }
  // Qwen2/2.5: merger.{ln_q, mlp.0, mlp.2}; Qwen3: merger.{norm, linear_fc1, linear_fc2}
  auto load_merger = [&](const std::string& p, int64_t norm_dim, bool norm_bias) -> Result<Merger> {
    Merger m;
    const std::string norm = v3 ? "norm." : "ln_q.", fc1 = v3 ? "linear_fc1." : "mlp.0.",
                      fc2 = v3 ? "linear_fc2." : "mlp.2.";
    PIPIT_ASSIGN_OR_RETURN(m.norm_w, w.get(p + norm + "weight", {norm_dim}));
    if (norm_bias) {
      PIPIT_ASSIGN_OR_RETURN(m.norm_b, w.get(p + norm + "bias", {norm_dim}));
    }
    PIPIT_ASSIGN_OR_RETURN(m.w0, w.get(p + fc1 + "weight", {M, M}));
    PIPIT_ASSIGN_OR_RETURN(m.b0, w.get(p + fc1 + "bias", {M}));
    PIPIT_ASSIGN_OR_RETURN(m.w2, w.get(p + fc2 + "weight", {t.out_dim_, M}));
    PIPIT_ASSIGN_OR_RETURN(m.b2, w.get(p + fc2 + "bias", {t.out_dim_}));
    return m;
  };
  auto merger = load_merger("visual.merger.", E, !v25);
  if (!merger.is_ok()) return merger.status().with_context(fmt("[{}] patch merger", arch));
  t.merger_ = std::move(merger).value();
  if (v3 && v.has("deepstack_visual_indexes")) {
    const auto& ds = v.json()["deepstack_visual_indexes"];
    if (!ds.is_array()) return Error::invalid_argument("[{}] deepstack_visual_indexes must be a list", arch);
    for (size_t k = 0; k < ds.size(); ++k) {
      if (!ds[k].is_number_integer() || ds[k].get<int64_t>() < 0 || ds[k].get<int64_t>() >= depth)
        return Error::invalid_argument("[{}] deepstack_visual_indexes {} outside [0, {})", arch, ds.dump(), depth);
      const std::string p = "visual.deepstack_merger_list." + std::to_string(k) + ".";
      auto m = load_merger(p, M, true);
      if (!m.is_ok())
        return m.status().with_context(fmt("[{}] DeepStack merger {} (of vision block {})", arch, k,
                                           ds[k].get<int64_t>()));
      t.deepstack_.push_back({int(ds[k].get<int64_t>()), std::move(m).value()});
    }
  }
  return t;
}

QwenVisionTower::Windows QwenVisionTower::window_index(std::array<int32_t, 3> grid) const {
  // windows of vms x vms merged tokens tile the (h / m, w / m) grid from the top left; HF pads the grid to whole
  // windows (a full extra window even when it divides) and drops the padding
  const int vms = window_ / merge_ / patch_, unit = merge_ * merge_;
  const int lh = grid[1] / merge_, lw = grid[2] / merge_;
  const int nwh = (lh + vms - lh % vms) / vms, nww = (lw + vms - lw % vms) / vms;
  Windows w;
  w.cu.push_back(0);
  for (int t = 0; t < grid[0]; ++t)
    for (int wy = 0; wy < nwh; ++wy)
      for (int wx = 0; wx < nww; ++wx) {
        int count = 0;
        for (int iy = 0; iy < vms; ++iy)
          for (int ix = 0; ix < vms; ++ix) {
            const int y = wy * vms + iy, x = wx * vms + ix;
            if (y >= lh || x >= lw) continue;
            w.index.push_back((t * lh + y) * lw + x);
            ++count;
          }
        if (count > 0) w.cu.push_back(w.cu.back() + count * unit);  // empty windows: unique_consecutive drops them
      }
  return w;
}

Tensor QwenVisionTower::norm(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& b) const {
  return v25_ ? rms_norm(ctx, x, w, eps_) : layer_norm(ctx, x, w, b, eps_);
}

Tensor QwenVisionTower::mlp(Ctx& ctx, const Tensor& h, const Block& b) const {
  if (v25_) {
    Tensor g = linear(ctx, h, b.gate_w, b.gate_b), u = linear(ctx, h, b.up_w, b.up_b);
    return linear(ctx, act_ == Act::kSilu ? swiglu(ctx, g, u) : geglu(ctx, g, u), b.down_w, b.down_b);
  }
  PIPIT_ASSERT(act_ != Act::kSilu, "silu in a plain MLP");
  return vit_mlp(ctx, h, b.vit, act_);
}

Tensor QwenVisionTower::merge(Ctx& ctx, const Tensor& x, const Merger& m, bool postshuffle_norm) const {
  const int64_t unit = int64_t(merge_) * merge_, rows = x.dim(0) / unit;
  // 2x2 neighbours are consecutive rows: side by side they are one row of unit * n_embd
  Tensor hm = postshuffle_norm ? layer_norm(ctx, x.reshape({rows, n_embd_ * unit}), m.norm_w, m.norm_b, eps_)
                               : norm(ctx, x, m.norm_w, m.norm_b).reshape({rows, n_embd_ * unit});
  Tensor a = linear(ctx, hm, m.w0, m.b0);
  gelu_(ctx, a);  // nn.GELU() (erf) in every Qwen merger, whatever the blocks use
  return linear(ctx, a, m.w2, m.b2);
}

Tensor QwenVisionTower::position_embeddings(Ctx& ctx, std::array<int32_t, 3> grid) const {
  // fast_pos_embed_interpolate: torch.linspace(0, side - 1, h) in float32 (start + i * step for the first half,
  // end - (steps - 1 - i) * step for the second, as torch computes it), floor by .int(), ceil = floor + 1 clipped,
  // the four bilinear weights in float32, and the weighted table rows summed in the order HF sums them
  const int64_t n = pos_side_, E = n_embd_, gh = grid[1], gw = grid[2], m = merge_;
  Tensor grid_pe = resize_bilinear_aligned(ctx, to_f32(ctx, pos_table_).reshape({n, n, E}), gh, gw);  // raster order
  // every frame the same, rows permuted to (t, h / m, w / m, m, m)
  Tensor blocks = grid_pe.reshape({gh / m, m, gw / m, m, E}).transpose(1, 2);  // [h / m, w / m, m, m, E]
  Tensor pe = Tensor::empty(DType::F32, {int64_t(grid[0]) * gh * gw, E});
  for (int64_t t = 0; t < grid[0]; ++t) {
    Tensor frame = pe.slice(0, t * gh * gw, (t + 1) * gh * gw).reshape({gh / m, gw / m, m, m, E});
    copy_(ctx, frame, blocks);
  }
  return pe;
}

Result<Tensor> QwenVisionTower::encode(Ctx& ctx, const Tensor& pv, std::array<int32_t, 3> grid) const {
  const int64_t t = grid[0], h = grid[1], w = grid[2], n = t * h * w, m = merge_, unit = m * m;
  if (t < 1 || h < 1 || w < 1 || h % m || w % m)
    return Error::invalid_argument("[vision] grid {}x{}x{}: sides must be positive multiples of {}", t, h, w, m);
  if (pv.dtype() != DType::F32 || pv.ndim() != 2 || pv.dim(0) != n || pv.dim(1) != patch_w_.dim(1))
    return Error::invalid_argument("[vision] pixel_values {}, expected f32 [{}, {}]", pv.describe(), n,
                                   patch_w_.dim(1));
  // patch (row, column) of every row, in the processor's (t, h/m, w/m, m, m) order
  std::vector<int32_t> pos(size_t(2 * n));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t i = r % (h * w), blk = i / unit, in = i % unit;
    pos[size_t(r)] = int32_t(blk / (w / m) * m + in / m);
    pos[size_t(n + r)] = int32_t(blk % (w / m) * m + in % m);
  }
  std::vector<int32_t> cu_full;  // each frame attends within itself
  for (int64_t f = 0; f <= t; ++f) cu_full.push_back(int32_t(f * h * w));

  Tensor x = heap_copy(ctx, ctx.name(linear(ctx, pv, patch_w_, patch_b_), "vision.patch_embed"));
  if (kind_ == Kind::kQwen3) {
    Tensor pe = position_embeddings(ctx, grid);
    ctx.name(pe, "vision.pos_embed");
    add_(ctx, x, pe);
  }
  // Qwen3-VL: [merged tokens, out_dim] final features, then one such block per DeepStack merger
  const int64_t n_out = n / unit, width = out_dim_ * (1 + int64_t(deepstack_.size()));
  Tensor out = Tensor::empty(DType::F32, {n_out, width});
  auto put = [&](const Tensor& f, int64_t block) {
    Tensor dst = out.slice(1, block * out_dim_, (block + 1) * out_dim_);
    copy_(ctx, dst, f);
  };
  Windows win;
  if (v25_) {  // group the rows (4 patches per merged token) by window
    win = window_index(grid);
    std::vector<int64_t> rows(static_cast<size_t>(n));
    std::vector<int32_t> pp(pos.size());
    for (int64_t g = 0; g < n / unit; ++g)
      for (int64_t u = 0; u < unit; ++u) {
        const int64_t dst = g * unit + u, src = int64_t(win.index[size_t(g)]) * unit + u;
        rows[size_t(dst)] = src;
        pp[size_t(dst)] = pos[size_t(src)];
        pp[size_t(n + dst)] = pos[size_t(n + src)];
      }
    x = heap_copy(ctx, gather_rows(ctx, x, rows));
    pos.swap(pp);
    ctx.name(x, "vision.patch_embed_windowed");
  }
  ctx.arena->reset();

  const float scale = 1.0f / std::sqrt(float(head_dim_));
  for (int il = 0; il < int(blocks_.size()); ++il) {
    const Block& b = blocks_[size_t(il)];
    auto [q, k, v] = vit_qkv(ctx, norm(ctx, x, b.vit.norm1_w, b.vit.norm1_b), b.vit, n_head_, head_dim_);
    rope_multi_(ctx, q, pos, rope_stream_, rope_freq_);
    rope_multi_(ctx, k, pos, rope_stream_, rope_freq_);
    Tensor o = ctx.alloc(DType::F32, {n, n_head_, head_dim_});
    attention_segments(ctx, q, k, v, full_attn_[size_t(il)] ? cu_full : win.cu, scale, o);
    add_(ctx, x, linear(ctx, o.reshape({n, n_embd_}), b.vit.o_w, b.vit.o_b));
    add_(ctx, x, mlp(ctx, norm(ctx, x, b.vit.norm2_w, b.vit.norm2_b), b));
    ctx.name(x, "vision.block", il);
    for (size_t k = 0; k < deepstack_.size(); ++k)
      if (deepstack_[k].first == il) put(ctx.name(merge(ctx, x, deepstack_[k].second, true), "vision.deepstack",
                                                   int(k)), int64_t(k) + 1);
    ctx.arena->reset();
  }

  // PatchMerger: norm, 2x2 neighbours side by side (consecutive rows), Linear, GELU, Linear
  Tensor merged = merge(ctx, x, merger_, false);
  if (v25_) {  // back to the processor's order
    ctx.name(merged, "vision.merger_windowed");
    std::vector<int32_t> from(size_t(n_out), -1);  // output row win.index[g] is merged row g
    for (int64_t g = 0; g < n / unit; ++g) from[size_t(win.index[size_t(g)])] = int32_t(g);
    Tensor dst = out.slice(1, 0, out_dim_);
    copy_rows_(ctx, dst, from, merged);
  } else {
    put(merged, 0);
  }
  ctx.arena->reset();
  return out;
}

}  // namespace pipit
