// Shared ViT encoder block (see vit_block.h).
#include "models/vision/vit_block.h"

#include <cmath>

namespace pipit {

Result<VitBlock> load_vit_block(const WeightSource& w, const std::string& p, const VitBlockNames& nm, int64_t E,
                                int64_t F) {
  VitBlock b;
  PIPIT_ASSIGN_OR_RETURN(b.norm1_w, w.get(p + nm.norm1 + ".weight", {E}));
  if (nm.norm_bias) {
    PIPIT_ASSIGN_OR_RETURN(b.norm1_b, w.get(p + nm.norm1 + ".bias", {E}));
  }
  PIPIT_ASSIGN_OR_RETURN(b.norm2_w, w.get(p + nm.norm2 + ".weight", {E}));
  if (nm.norm_bias) {
    PIPIT_ASSIGN_OR_RETURN(b.norm2_b, w.get(p + nm.norm2 + ".bias", {E}));
  }
  if (!nm.qkv.empty()) {
    PIPIT_ASSIGN_OR_RETURN(b.qkv_w, w.get(p + nm.qkv + ".weight", {3 * E, E}));
    PIPIT_ASSIGN_OR_RETURN(b.qkv_b, w.get(p + nm.qkv + ".bias", {3 * E}));
  } else {
    PIPIT_ASSIGN_OR_RETURN(b.q_w, w.get(p + nm.q + ".weight", {E, E}));
    PIPIT_ASSIGN_OR_RETURN(b.q_b, w.get(p + nm.q + ".bias", {E}));
    PIPIT_ASSIGN_OR_RETURN(b.k_w, w.get(p + nm.k + ".weight", {E, E}));
    PIPIT_ASSIGN_OR_RETURN(b.k_b, w.get(p + nm.k + ".bias", {E}));
    PIPIT_ASSIGN_OR_RETURN(b.v_w, w.get(p + nm.v + ".weight", {E, E}));
    PIPIT_ASSIGN_OR_RETURN(b.v_b, w.get(p + nm.v + ".bias", {E}));
  }
  PIPIT_ASSIGN_OR_RETURN(b.o_w, w.get(p + nm.o + ".weight", {E, E}));
  PIPIT_ASSIGN_OR_RETURN(b.o_b, w.get(p + nm.o + ".bias", {E}));
  if (!nm.fc1.empty()) {
    PIPIT_ASSIGN_OR_RETURN(b.fc1_w, w.get(p + nm.fc1 + ".weight", {F, E}));
    PIPIT_ASSIGN_OR_RETURN(b.fc1_b, w.get(p + nm.fc1 + ".bias", {F}));
    PIPIT_ASSIGN_OR_RETURN(b.fc2_w, w.get(p + nm.fc2 + ".weight", {E, F}));
    PIPIT_ASSIGN_OR_RETURN(b.fc2_b, w.get(p + nm.fc2 + ".bias", {E}));
  }
  return b;
}

std::array<Tensor, 3> vit_qkv(Ctx& ctx, const Tensor& h, const VitBlock& b, int64_t n_head, int64_t hd) {
  const int64_t n = h.dim(0), width = n_head * hd;
  if (!b.qkv_w.defined())  // a fresh contiguous linear output: the reshape is a view (q, k, v in this order)
    return {linear(ctx, h, b.q_w, b.q_b).reshape({n, n_head, hd}),
            linear(ctx, h, b.k_w, b.k_b).reshape({n, n_head, hd}),
            linear(ctx, h, b.v_w, b.v_b).reshape({n, n_head, hd})};
  Tensor qkv = linear(ctx, h, b.qkv_w, b.qkv_b);  // [n, (3, heads, hd)]
  auto part = [&](int64_t i) {                    // column block i copied out as [n, heads, hd]
    Tensor t = ctx.alloc(DType::F32, {n, n_head, hd}), rows = t.reshape({n, width});
    copy_(ctx, rows, qkv.slice(1, i * width, (i + 1) * width));
    return t;
  };
  Tensor q = part(0), k = part(1), v = part(2);
  return {q, k, v};
}

Tensor vit_mlp(Ctx& ctx, const Tensor& h, const VitBlock& b, Act act) {
  Tensor a = linear(ctx, h, b.fc1_w, b.fc1_b);
  activation_(ctx, a, act);
  return linear(ctx, a, b.fc2_w, b.fc2_b);
}

void clip_block_forward(Ctx& ctx, Tensor& x, const VitBlock& b, int64_t n_head, float eps,
                        std::span<const int32_t> cu, Act act) {
  const int64_t n = x.dim(0), E = x.dim(1), hd = E / n_head;
  auto [q, k, v] = vit_qkv(ctx, layer_norm(ctx, x, b.norm1_w, b.norm1_b, eps), b, n_head, hd);
  Tensor o = ctx.alloc(DType::F32, {n, n_head, hd});
  attention_segments(ctx, q, k, v, cu, 1.0f / std::sqrt(float(hd)), o);
  add_(ctx, x, linear(ctx, o.reshape({n, E}), b.o_w, b.o_b));
  add_(ctx, x, vit_mlp(ctx, layer_norm(ctx, x, b.norm2_w, b.norm2_b, eps), b, act));
}

}  // namespace pipit
