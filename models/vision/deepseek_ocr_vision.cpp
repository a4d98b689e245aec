// DeepSeek-OCR's DeepEncoder (see deepseek_ocr_vision.h).
#include "backends/cpu/kernels.h"  // TODO(issue 31 item 2): host loops still call kernels
#include "models/vision/deepseek_ocr_vision.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/vision/resample.h"

namespace pipit {

namespace {

constexpr int64_t kPatch = 16;     // SAM's patch conv
constexpr int64_t kWindow = 14;    // SAM's window_size (_build_sam)
constexpr int64_t kSamTable = 64;  // SAM's pos_embed grid: img_size 1024 / 16
constexpr int64_t kClipTable = 16; // CLIP-L/14 at 224: 16 x 16 positions + the class token

// An f32 copy on the heap (weights of any dtype that are read element by element).
Tensor heap_f32(Ctx& ctx, const Tensor& t) {
  ArenaScope scope(*ctx.arena);
  Tensor a = to_f32(ctx, t);
  Tensor h = Tensor::empty(DType::F32, a.shape());
  std::memcpy(h.data(), a.data(), h.nbytes());
  return h;
}

Tensor to_heap(const Tensor& t) {
  Tensor h = Tensor::empty(DType::F32, t.shape());
  std::memcpy(h.data(), t.data(), h.nbytes());
  return h;
}

// A [grid * grid, C] table (rows y * grid + x) resized to [out * out, C] with torch's bicubic antialias.
std::vector<float> resize_grid(const float* table, int64_t grid, int64_t C, int64_t out) {
  std::vector<float> planes(size_t(C * grid * grid));
  for (int64_t p = 0; p < grid * grid; ++p)
    for (int64_t c = 0; c < C; ++c) planes[size_t(c * grid * grid + p)] = table[p * C + c];
  const std::vector<float> r = resize_planes_bicubic_aa(planes.data(), int(C), int(grid), int(grid), int(out), int(out));
  std::vector<float> rows(size_t(out * out * C));
  for (int64_t p = 0; p < out * out; ++p)
    for (int64_t c = 0; c < C; ++c) rows[size_t(p * C + c)] = r[size_t(c * out * out + p)];
  return rows;
}

// get_rel_pos for q_size == k_size == n: the table [L, hd] linearly interpolated (F.interpolate mode "linear",
// align_corners false, float) to 2n - 1 rows when L differs.
std::vector<float> rel_table(const float* rel, int64_t L, int64_t hd, int64_t n) {
  const int64_t M = 2 * n - 1;
  std::vector<float> out(size_t(M * hd));
  if (L == M) {
    std::memcpy(out.data(), rel, out.size() * 4);
    return out;
  }
  const float scale = float(L) / float(M);
  for (int64_t i = 0; i < M; ++i) {
    float src = scale * (float(i) + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    const int64_t i0 = int64_t(src), i1 = i0 + (i0 < L - 1 ? 1 : 0);
    const float l1 = src - float(i0), l0 = 1.0f - l1;
    for (int64_t d = 0; d < hd; ++d) out[size_t(i * hd + d)] = l0 * rel[i0 * hd + d] + l1 * rel[i1 * hd + d];
  }
  return out;
}

// Attention with SAM's decomposed relative position bias over n_win windows of hh x ww tokens (rows of qkv:
// window-major, row-major inside a window; columns: q, k, v, each heads x hd). For query i at (qh, qw) and key j
// at (kh, kw): score = scale * q.k + q.Rh[qh - kh + hh - 1] + q.Rw[qw - kw + ww - 1], softmax over j, times v.
// Scores are materialised (a block of query rows at a time) so the matmuls run on the matmul kernels.
void rel_pos_attention(Ctx& ctx, const Tensor& qkv, int64_t n_win, int64_t hh, int64_t ww, int64_t heads,
                       const std::vector<float>& Rh, const std::vector<float>& Rw, Tensor& out) {
  const int64_t T = hh * ww, W = qkv.dim(1) / 3, hd = W / heads;
  const float scale = 1.0f / std::sqrt(float(hd));
  const int64_t block = std::max<int64_t>(16, (int64_t(1) << 22) / T);  // <= 16 MB of scores
  for (int64_t b = 0; b < n_win; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      ArenaScope scope(*ctx.arena);
      Tensor q = ctx.alloc(DType::F32, {T, hd}), k = ctx.alloc(DType::F32, {T, hd}), vt = ctx.alloc(DType::F32, {hd, T});
      Tensor bh = ctx.alloc(DType::F32, {T, hh}), bw = ctx.alloc(DType::F32, {T, ww});
      const float* src = qkv.ptr<float>() + b * T * 3 * W;
      ctx.pool->parallel_for(T, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const float* r = src + i * 3 * W;
          float* qi = q.ptr<float>() + i * hd;
          std::memcpy(qi, r + h * hd, size_t(hd) * 4);
          std::memcpy(k.ptr<float>() + i * hd, r + W + h * hd, size_t(hd) * 4);
          for (int64_t d = 0; d < hd; ++d) vt.ptr<float>()[d * T + i] = r[2 * W + h * hd + d];
          const int64_t qh = i / ww, qw = i % ww;
          for (int64_t kh = 0; kh < hh; ++kh) {
            const float* R = Rh.data() + (qh - kh + hh - 1) * hd;
            float s = 0;
            for (int64_t d = 0; d < hd; ++d) s += qi[d] * R[d];
            bh.ptr<float>()[i * hh + kh] = s;
          }
          for (int64_t kw = 0; kw < ww; ++kw) {
            const float* R = Rw.data() + (qw - kw + ww - 1) * hd;
            float s = 0;
            for (int64_t d = 0; d < hd; ++d) s += qi[d] * R[d];
            bw.ptr<float>()[i * ww + kw] = s;
          }
        }
      });
      for (int64_t r0 = 0; r0 < T; r0 += block) {
        const int64_t r1 = std::min(T, r0 + block);
        ArenaScope rows(*ctx.arena);
        Tensor s = linear(ctx, q.slice(0, r0, r1), k);  // [r1 - r0, T]
        ctx.pool->parallel_for(r1 - r0, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) {
            float* row = s.ptr<float>() + i * T;
            const float* bhi = bh.ptr<float>() + (r0 + i) * hh;
            const float* bwi = bw.ptr<float>() + (r0 + i) * ww;
            for (int64_t kh = 0; kh < hh; ++kh)
              for (int64_t kw = 0; kw < ww; ++kw) row[kh * ww + kw] = row[kh * ww + kw] * scale + (bhi[kh] + bwi[kw]);
            ctx.k->softmax(row, T);
          }
        });
        Tensor o = linear(ctx, s, vt);  // [r1 - r0, hd]
        for (int64_t i = r0; i < r1; ++i)
          std::memcpy(out.ptr<float>() + (b * T + i) * W + h * hd, o.ptr<float>() + (i - r0) * hd, size_t(hd) * 4);
      }
    }
}

// Conv2d 3x3, padding 1, no bias, on tokens [H * W, C] (row-major grid) -> [Ho * Wo, O] via im2col: columns in
// the weight's (c, ky, kx) order.
Tensor conv3x3(Ctx& ctx, const Tensor& x, int64_t H, int64_t W, const Tensor& w, int64_t stride, int64_t* Ho,
               int64_t* Wo) {
  const int64_t C = x.dim(1);
  *Ho = (H + 2 - 3) / stride + 1;
  *Wo = (W + 2 - 3) / stride + 1;
  const int64_t ho = *Ho, wo = *Wo;
  Tensor cols = ctx.alloc(DType::F32, {ho * wo, C * 9});
  ctx.pool->parallel_for(ho * wo, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* dst = cols.ptr<float>() + p * C * 9;
      const int64_t oy = p / wo, ox = p % wo;
      for (int64_t ky = 0; ky < 3; ++ky)
        for (int64_t kx = 0; kx < 3; ++kx) {
          const int64_t iy = oy * stride - 1 + ky, ix = ox * stride - 1 + kx;
          const bool in = iy >= 0 && iy < H && ix >= 0 && ix < W;
          const float* s = in ? x.ptr<float>() + (iy * W + ix) * C : nullptr;
          for (int64_t c = 0; c < C; ++c) dst[c * 9 + ky * 3 + kx] = in ? s[c] : 0.0f;
        }
    }
  });
  return linear(ctx, cols, w);
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
    PIPIT_ASSIGN_OR_RETURN(b.n1_w, w.get(p + "norm1.weight", {W}));
    PIPIT_ASSIGN_OR_RETURN(b.n1_b, w.get(p + "norm1.bias", {W}));
    PIPIT_ASSIGN_OR_RETURN(b.n2_w, w.get(p + "norm2.weight", {W}));
    PIPIT_ASSIGN_OR_RETURN(b.n2_b, w.get(p + "norm2.bias", {W}));
    PIPIT_ASSIGN_OR_RETURN(b.qkv_w, w.get(p + "attn.qkv.weight", {3 * W, W}));
    PIPIT_ASSIGN_OR_RETURN(b.qkv_b, w.get(p + "attn.qkv.bias", {3 * W}));
    PIPIT_ASSIGN_OR_RETURN(b.proj_w, w.get(p + "attn.proj.weight", {W, W}));
    PIPIT_ASSIGN_OR_RETURN(b.proj_b, w.get(p + "attn.proj.bias", {W}));
    // 2 * input_size - 1 rows: the window, or the 64 x 64 grid of 1024 px for global blocks
    const int64_t L = 2 * (b.global ? kSamTable : kWindow) - 1;
    PIPIT_ASSIGN_OR_RETURN(b.rel_h, w.get(p + "attn.rel_pos_h", {L, shd}));
    PIPIT_ASSIGN_OR_RETURN(b.rel_w, w.get(p + "attn.rel_pos_w", {L, shd}));
    PIPIT_ASSIGN_OR_RETURN(b.fc1_w, w.get(p + "mlp.lin1.weight", {sam_ff, W}));
    PIPIT_ASSIGN_OR_RETURN(b.fc1_b, w.get(p + "mlp.lin1.bias", {sam_ff}));
    PIPIT_ASSIGN_OR_RETURN(b.fc2_w, w.get(p + "mlp.lin2.weight", {W, sam_ff}));
    PIPIT_ASSIGN_OR_RETURN(b.fc2_b, w.get(p + "mlp.lin2.bias", {W}));
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
    ClipBlock b;
    PIPIT_ASSIGN_OR_RETURN(b.ln1_w, w.get(p + "layer_norm1.weight", {C}));
    PIPIT_ASSIGN_OR_RETURN(b.ln1_b, w.get(p + "layer_norm1.bias", {C}));
    PIPIT_ASSIGN_OR_RETURN(b.ln2_w, w.get(p + "layer_norm2.weight", {C}));
    PIPIT_ASSIGN_OR_RETURN(b.ln2_b, w.get(p + "layer_norm2.bias", {C}));
    PIPIT_ASSIGN_OR_RETURN(b.qkv_w, w.get(p + "self_attn.qkv_proj.weight", {3 * C, C}));
    PIPIT_ASSIGN_OR_RETURN(b.qkv_b, w.get(p + "self_attn.qkv_proj.bias", {3 * C}));
    PIPIT_ASSIGN_OR_RETURN(b.o_w, w.get(p + "self_attn.out_proj.weight", {C, C}));
    PIPIT_ASSIGN_OR_RETURN(b.o_b, w.get(p + "self_attn.out_proj.bias", {C}));
    PIPIT_ASSIGN_OR_RETURN(b.fc1_w, w.get(p + "mlp.fc1.weight", {clip_ff, C}));
    PIPIT_ASSIGN_OR_RETURN(b.fc1_b, w.get(p + "mlp.fc1.bias", {clip_ff}));
    PIPIT_ASSIGN_OR_RETURN(b.fc2_w, w.get(p + "mlp.fc2.weight", {C, clip_ff}));
    PIPIT_ASSIGN_OR_RETURN(b.fc2_b, w.get(p + "mlp.fc2.bias", {C}));
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
  const int64_t W = sam_w_, hd = W / sam_heads_;
  Tensor h = layer_norm(ctx, x, b.n1_w, b.n1_b, 1e-6f);
  Tensor rh = heap_f32(ctx, b.rel_h), rw = heap_f32(ctx, b.rel_w);
  Tensor attn = ctx.alloc(DType::F32, {g * g, W});
  if (b.global) {
    Tensor qkv = linear(ctx, h, b.qkv_w, b.qkv_b);
    rel_pos_attention(ctx, qkv, 1, g, g, sam_heads_, rel_table(rh.ptr<float>(), rh.dim(0), hd, g),
                      rel_table(rw.ptr<float>(), rw.dim(0), hd, g), attn);
  } else {
    // window_partition: the grid zero-padded to a multiple of the window; padded tokens are keys too (their
    // q/k/v are the qkv bias), as in the remote code
    const int64_t nw = (g + kWindow - 1) / kWindow, T = kWindow * kWindow;
    Tensor xw = ctx.alloc(DType::F32, {nw * nw * T, W});
    std::memset(xw.data(), 0, xw.nbytes());
    for (int64_t wy = 0; wy < nw; ++wy)
      for (int64_t wx = 0; wx < nw; ++wx)
        for (int64_t ty = 0; ty < kWindow; ++ty)
          for (int64_t tx = 0; tx < kWindow; ++tx) {
            const int64_t y = wy * kWindow + ty, xx = wx * kWindow + tx;
            if (y < g && xx < g)
              std::memcpy(xw.ptr<float>() + ((wy * nw + wx) * T + ty * kWindow + tx) * W,
                          h.ptr<float>() + (y * g + xx) * W, size_t(W) * 4);
          }
    Tensor qkv = linear(ctx, xw, b.qkv_w, b.qkv_b);
    Tensor o = ctx.alloc(DType::F32, {nw * nw * T, W});
    rel_pos_attention(ctx, qkv, nw * nw, kWindow, kWindow, sam_heads_,
                      rel_table(rh.ptr<float>(), rh.dim(0), hd, kWindow),
                      rel_table(rw.ptr<float>(), rw.dim(0), hd, kWindow), o);
    for (int64_t y = 0; y < g; ++y)  // window_unpartition: back to the grid, padding dropped
      for (int64_t xx = 0; xx < g; ++xx) {
        const int64_t wy = y / kWindow, wx = xx / kWindow;
        std::memcpy(attn.ptr<float>() + (y * g + xx) * W,
                    o.ptr<float>() + ((wy * nw + wx) * T + (y % kWindow) * kWindow + xx % kWindow) * W,
                    size_t(W) * 4);
      }
  }
  add_(ctx, x, linear(ctx, attn, b.proj_w, b.proj_b));  // proj is per token: after unpartition is the same
  Tensor a = linear(ctx, layer_norm(ctx, x, b.n2_w, b.n2_b, 1e-6f), b.fc1_w, b.fc1_b);
  gelu_(ctx, a);
  add_(ctx, x, linear(ctx, a, b.fc2_w, b.fc2_b));
}

Tensor DeepEncoder::sam(Ctx& ctx, const float* px, int64_t S, int64_t* grid) const {
  const int64_t g = S / kPatch, W = sam_w_, p = kPatch;
  Tensor x = Tensor::empty(DType::F32, {g * g, W});
  {
    ArenaScope scope(*ctx.arena);
    // PatchEmbed: Conv2d(kernel = stride = 16) as a matmul over (c, py, px) columns
    Tensor cols = ctx.alloc(DType::F32, {g * g, 3 * p * p});
    for (int64_t gy = 0; gy < g; ++gy)
      for (int64_t gx = 0; gx < g; ++gx)
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t py = 0; py < p; ++py)
            std::memcpy(cols.ptr<float>() + (gy * g + gx) * 3 * p * p + (c * p + py) * p,
                        px + (c * S + gy * p + py) * S + gx * p, size_t(p) * 4);
    Tensor pe = linear(ctx, cols, patch_w_, patch_b_);
    Tensor pos = to_f32(ctx, pos_);
    if (g == kSamTable) {
      std::memcpy(x.data(), pos.data(), x.nbytes());
    } else {  // get_abs_pos: bicubic antialias in float32
      const std::vector<float> r = resize_grid(pos.ptr<float>(), kSamTable, W, g);
      std::memcpy(x.data(), r.data(), x.nbytes());
    }
    add_(ctx, x, pe);
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
  return to_heap(c3);
}

Tensor DeepEncoder::clip(Ctx& ctx, const Tensor& patches, int64_t grid) const {
  const int64_t N = grid * grid, n = N + 1, C = clip_w_, hd = C / clip_heads_;
  Tensor x = Tensor::empty(DType::F32, {n, C});
  {
    ArenaScope scope(*ctx.arena);
    Tensor emb = ctx.alloc(DType::F32, {n, C});
    Tensor cls = to_f32(ctx, cls_), pos = to_f32(ctx, clip_pos_);
    std::memcpy(emb.row_ptr(0), cls.data(), size_t(C) * 4);
    std::memcpy(emb.row_ptr(1), patches.data(), size_t(N * C) * 4);
    Tensor p = ctx.alloc(DType::F32, {n, C});
    std::memcpy(p.row_ptr(0), pos.row_ptr(0), size_t(C) * 4);  // the class token's position is never resized
    if (grid == kClipTable) {
      std::memcpy(p.row_ptr(1), pos.row_ptr(1), size_t(N * C) * 4);
    } else {
      const std::vector<float> r = resize_grid(pos.ptr<float>() + C, kClipTable, C, grid);
      std::memcpy(p.row_ptr(1), r.data(), size_t(N * C) * 4);
    }
    add_(ctx, emb, p);
    Tensor y = layer_norm(ctx, emb, pre_w_, pre_b_, 1e-5f);
    std::memcpy(x.data(), y.data(), x.nbytes());
  }
  ctx.name(x, "vision.clip.embed");
  const std::vector<int32_t> cu = {0, int32_t(n)};
  for (size_t il = 0; il < clip_blocks_.size(); ++il) {
    const ClipBlock& L = clip_blocks_[il];
    ArenaScope scope(*ctx.arena);
    Tensor qkv = linear(ctx, layer_norm(ctx, x, L.ln1_w, L.ln1_b, 1e-5f), L.qkv_w, L.qkv_b);  // [n, (3, heads, hd)]
    Tensor q = ctx.alloc(DType::F32, {n, clip_heads_, hd}), k = ctx.alloc(DType::F32, {n, clip_heads_, hd}),
           v = ctx.alloc(DType::F32, {n, clip_heads_, hd});
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(q.ptr<float>() + r * C, qkv.ptr<float>() + r * 3 * C, size_t(C) * 4);
      std::memcpy(k.ptr<float>() + r * C, qkv.ptr<float>() + r * 3 * C + C, size_t(C) * 4);
      std::memcpy(v.ptr<float>() + r * C, qkv.ptr<float>() + r * 3 * C + 2 * C, size_t(C) * 4);
    }
    Tensor o = ctx.alloc(DType::F32, {n, clip_heads_, hd});
    attention_segments(ctx, q, k, v, cu, 1.0f / std::sqrt(float(hd)), o);
    add_(ctx, x, linear(ctx, o.reshape({n, C}), L.o_w, L.o_b));
    Tensor a = linear(ctx, layer_norm(ctx, x, L.ln2_w, L.ln2_b, 1e-5f), L.fc1_w, L.fc1_b);
    quick_gelu_(ctx, a);
    add_(ctx, x, linear(ctx, a, L.fc2_w, L.fc2_b));
    ctx.name(x, "vision.clip.block", int(il));
  }
  return x;
}

Tensor DeepEncoder::view_features(Ctx& ctx, const float* pixels, int64_t S) const {
  int64_t g = 0;
  Tensor s1 = sam(ctx, pixels, S, &g);
  Tensor s2 = clip(ctx, s1, g);
  ArenaScope scope(*ctx.arena);
  const int64_t N = g * g, C = clip_w_;
  Tensor f = ctx.alloc(DType::F32, {N, C + d3_});  // cat(CLIP tokens without the class token, SAM tokens)
  for (int64_t r = 0; r < N; ++r) {
    std::memcpy(f.ptr<float>() + r * (C + d3_), s2.row_ptr(r + 1), size_t(C) * 4);
    std::memcpy(f.ptr<float>() + r * (C + d3_) + C, s1.row_ptr(r), size_t(d3_) * 4);
  }
  return to_heap(linear(ctx, f, proj_w_, proj_b_));
}

Result<Tensor> DeepEncoder::encode(Ctx& ctx, const ProcessedImage& img) const {
  const Tensor& pv = img.pixel_values;
  if (pv.dtype() != DType::F32 || pv.ndim() != 3 || pv.dim(0) != 3 || pv.dim(1) != pv.dim(2) || pv.dim(1) % kPatch)
    return Error::invalid_argument("[vision] pixel_values {}, expected f32 [3, S, S] with S a multiple of 16",
                                   pv.describe());
  const int64_t E = n_embd_, S = pv.dim(1), g = grid_of(S);
  Tensor global = view_features(ctx, pv.ptr<float>(), S);
  Tensor out = Tensor::empty(DType::F32, {n_tokens(img), E});
  ArenaScope scope(*ctx.arena);
  Tensor nl = to_f32(ctx, newline_), sep = to_f32(ctx, separator_);
  int64_t row = 0;
  auto put = [&](const float* src) { std::memcpy(out.ptr<float>() + (row++) * E, src, size_t(E) * 4); };
  if (img.crops.defined()) {
    const Tensor& cr = img.crops;
    const int64_t n_tiles = cr.dim(0), ts = cr.dim(2), tg = grid_of(ts), cols = img.crop_cols, rows = img.crop_rows;
    if (cr.ndim() != 4 || cr.dim(1) != 3 || cr.dim(3) != ts || n_tiles != cols * rows || ts % kPatch)
      return Error::invalid_argument("[vision] crops {} for a {}x{} grid", cr.describe(), cols, rows);
    Ctx quiet = ctx;  // the stages named are the global view's
    quiet.on_tensor = nullptr;
    std::vector<Tensor> tiles;
    for (int64_t t = 0; t < n_tiles; ++t) tiles.push_back(view_features(quiet, cr.ptr<float>() + t * 3 * ts * ts, ts));
    // [rows, cols, h, w, C] -> [rows * h, cols * w, C], a newline after every row of the big grid
    for (int64_t Y = 0; Y < rows * tg; ++Y) {
      for (int64_t X = 0; X < cols * tg; ++X)
        put(tiles[size_t((Y / tg) * cols + X / tg)].ptr<float>() + ((Y % tg) * tg + X % tg) * E);
      put(nl.ptr<float>());
    }
  }
  for (int64_t y = 0; y < g; ++y) {
    for (int64_t x = 0; x < g; ++x) put(global.ptr<float>() + (y * g + x) * E);
    put(nl.ptr<float>());
  }
  put(sep.ptr<float>());
  PIPIT_ASSERT(row == out.dim(0));
  return out;
}

}  // namespace pipit
