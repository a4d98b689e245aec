// The op API's one layer above the devices: each op notes itself (Ctx::ops_seen) and runs on ctx.device(). Ops
// that are compositions of others (linear of one weight, swiglu / geglu) are written here once for every device.
#include "backends/ops.h"

#include "backends/device.h"

namespace pipit {

const char* op_name(Op op) {
  static const char* const kNames[] = {
#define PIPIT_OP_NAME(id, name) name,
      PIPIT_OPS(PIPIT_OP_NAME)
#undef PIPIT_OP_NAME
  };
  return size_t(op) < size_t(Op::kCount) ? kNames[size_t(op)] : "?";
}

OpSet op_set(std::initializer_list<Op> ops) {
  OpSet s;
  for (Op o : ops) s.set(size_t(o));
  return s;
}

Tensor to_f32(Ctx& ctx, const Tensor& x) {
  ctx.seen(Op::kToF32);
  return ctx.device().to_f32(ctx, x);
}

Tensor linear(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& bias) {
  Tensor y;
  const Tensor* ws[] = {&w};
  const Tensor* bs[] = {&bias};
  Tensor* ys[] = {&y};
  linear_multi(ctx, x, ws, bs, ys);
  return y;
}

void linear_multi(Ctx& ctx, const Tensor& x, std::span<const Tensor* const> ws, std::span<const Tensor* const> biases,
                  std::span<Tensor* const> ys) {
  ctx.seen(Op::kLinear);
  ctx.device().linear_multi(ctx, x, ws, biases, ys);
}

Tensor linear_gated(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& up, GateAct act) {
  ctx.seen(Op::kLinearGated);
  return ctx.device().linear_gated(ctx, x, gate, up, act);
}

Tensor embedding(Ctx& ctx, const Tensor& table, std::span<const int32_t> ids) {
  ctx.seen(Op::kEmbedding);
  return ctx.device().embedding(ctx, table, ids);
}

Tensor rms_norm(Ctx& ctx, const Tensor& x, const Tensor& w, float eps, float w_offset) {
  ctx.seen(Op::kRmsNorm);
  return ctx.device().rms_norm(ctx, x, w, eps, w_offset);
}

void rms_norm_heads_(Ctx& ctx, Tensor& x, const Tensor& w, float eps, float w_offset) {
  ctx.seen(Op::kRmsNormHeads);
  ctx.device().rms_norm_heads_(ctx, x, w, eps, w_offset);
}

Tensor swiglu(Ctx& ctx, const Tensor& gate, const Tensor& up) {
  ctx.seen(Op::kGated);
  return ctx.device().gated(ctx, gate, up, GateAct::kSilu);
}

Tensor geglu(Ctx& ctx, const Tensor& gate, const Tensor& up) {
  ctx.seen(Op::kGated);
  return ctx.device().gated(ctx, gate, up, GateAct::kGeluTanh);
}

void add_(Ctx& ctx, Tensor& x, const Tensor& y) {
  ctx.seen(Op::kAdd);
  ctx.device().add_(ctx, x, y);
}

void scale_(Ctx& ctx, Tensor& x, float s) {
  ctx.seen(Op::kScale);
  ctx.device().scale_(ctx, x, s);
}

void softmax_(Ctx& ctx, Tensor& x) {
  ctx.seen(Op::kSoftmax);
  ctx.device().softmax_(ctx, x);
}

Tensor gather_rows(Ctx& ctx, const Tensor& x, std::span<const int64_t> rows) {
  ctx.seen(Op::kGatherRows);
  return ctx.device().gather_rows(ctx, x, rows);
}

void copy_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) {
  ctx.seen(Op::kCopyRows);
  ctx.device().copy_rows_(ctx, dst, src_row, src);
}

Tensor to_host(Ctx& ctx, const Tensor& x) {
  if (!ctx.dev || !dynamic_cast<const DeviceStorage*>(x.storage().get())) return x;
  PIPIT_ASSERT(x.is_contiguous(), "to_host of a strided {}", x.describe());
  Tensor h = Tensor::empty(x.dtype(), x.shape());
  ctx.dev->read(x, h.data(), x.nbytes());
  return h;
}

void rope_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const float> inv_freq, float mscale) {
  ctx.seen(Op::kRope);
  ctx.device().rope_(ctx, x, pos, inv_freq, mscale);
}

void rope_multi_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const uint8_t> stream,
                 std::span<const float> inv_freq) {
  ctx.seen(Op::kRopeMulti);
  ctx.device().rope_multi_(ctx, x, pos, stream, inv_freq);
}

void store_kv(Ctx& ctx, const Tensor& src, Tensor& dst, std::span<const int32_t> pos, bool ring) {
  ctx.seen(Op::kStoreKv);
  ctx.device().store_kv(ctx, src, dst, pos, ring);
}

void attention(Ctx& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> pos,
               const AttnParams& p, Tensor& out) {
  ctx.seen(Op::kAttention);
  if (p.sinks) ctx.seen(Op::kAttentionSinks);
  if (p.softcap > 0.0f) ctx.seen(Op::kAttentionSoftcap);
  ctx.device().attention(ctx, q, k_cache, v_cache, pos, p, out);
}

// ---- linear attention ----
void causal_conv1d_silu(Ctx& ctx, const Tensor& x, Tensor& state, const Tensor& w, Tensor& y) {
  ctx.seen(Op::kCausalConv1dSilu);
  ctx.device().causal_conv1d_silu(ctx, x, state, w, y);
}

void l2_norm_groups_(Ctx& ctx, Tensor& x, int64_t group, float eps, float scale) {
  ctx.seen(Op::kL2NormGroups);
  ctx.device().l2_norm_groups_(ctx, x, group, eps, scale);
}

void delta_gates_(Ctx& ctx, Tensor& a, Tensor& b, const Tensor& A_log, const Tensor& dt_bias) {
  ctx.seen(Op::kDeltaGates);
  ctx.device().delta_gates_(ctx, a, b, A_log, dt_bias);
}

void gated_delta_rule(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t dk, int64_t dv,
                      const Tensor& g, const Tensor& beta, std::span<const DeltaSeq> seqs, Tensor& out) {
  ctx.seen(Op::kGatedDeltaRule);
  ctx.device().gated_delta_rule(ctx, q, k, v, dk, dv, g, beta, seqs, out);
}

Tensor rms_norm_gated(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& z, float eps) {
  ctx.seen(Op::kRmsNormGated);
  return ctx.device().rms_norm_gated(ctx, x, w, z, eps);
}

// ---- encoders ----
Tensor layer_norm(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& b, float eps) {
  ctx.seen(Op::kLayerNorm);
  return ctx.device().layer_norm(ctx, x, w, b, eps);
}

void activation_(Ctx& ctx, Tensor& x, Act act) {
  ctx.seen(Op::kActivation);
  ctx.device().activation_(ctx, x, act);
}

void attention_segments(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, std::span<const int32_t> cu,
                        float scale, Tensor& out) {
  ctx.seen(Op::kAttentionSegments);
  ctx.device().attention_segments(ctx, q, k, v, cu, scale, out);
}

void clamp_(Ctx& ctx, Tensor& x, float lo, float hi) {
  ctx.seen(Op::kClamp);
  ctx.device().clamp_(ctx, x, lo, hi);
}

void shift_scale_(Ctx& ctx, Tensor& x, float shift, float scale) {
  ctx.seen(Op::kShiftScale);
  ctx.device().shift_scale_(ctx, x, shift, scale);
}

void rope_parts_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, int n_part, std::span<const float> inv_freq) {
  ctx.seen(Op::kRopeParts);
  ctx.device().rope_parts_(ctx, x, pos, n_part, inv_freq);
}

Tensor pool_grid(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t k) {
  ctx.seen(Op::kPoolGrid);
  return ctx.device().pool_grid(ctx, x, grid_h, grid_w, k);
}

Tensor glu(Ctx& ctx, const Tensor& x) {
  ctx.seen(Op::kGlu);
  return ctx.device().glu(ctx, x);
}

Tensor depthwise_conv1d_causal(Ctx& ctx, const Tensor& x, const Tensor& w) {
  ctx.seen(Op::kDepthwiseConv1dCausal);
  return ctx.device().depthwise_conv1d_causal(ctx, x, w);
}

Tensor conv2d_3x3_s2(Ctx& ctx, const Tensor& x, const Tensor& w) {
  ctx.seen(Op::kConv2d3x3S2);
  return ctx.device().conv2d_3x3_s2(ctx, x, w);
}

Tensor local_rel_attention(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel_k,
                           int window, float softcap) {
  ctx.seen(Op::kLocalRelAttention);
  return ctx.device().local_rel_attention(ctx, q, k, v, rel_k, window, softcap);
}

// ---- encoder layout and convolution ops ----
void copy_(Ctx& ctx, Tensor& dst, const Tensor& src) {
  ctx.seen(Op::kCopy);
  ctx.device().copy_(ctx, dst, src);
}

void fill_(Ctx& ctx, Tensor& x, float value) {
  ctx.seen(Op::kFill);
  ctx.device().fill_(ctx, x, value);
}

void scale_channels_(Ctx& ctx, Tensor& x, const Tensor& w) {
  ctx.seen(Op::kScaleChannels);
  ctx.device().scale_channels_(ctx, x, w);
}

Tensor conv2d(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, int64_t kernel, int64_t stride,
              int64_t padding) {
  ctx.seen(Op::kConv2d);
  return ctx.device().conv2d(ctx, x, w, bias, kernel, stride, padding);
}

Tensor window_partition(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t win) {
  ctx.seen(Op::kWindowPartition);
  return ctx.device().window_partition(ctx, x, grid_h, grid_w, win);
}

Tensor window_unpartition(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t win) {
  ctx.seen(Op::kWindowUnpartition);
  return ctx.device().window_unpartition(ctx, x, grid_h, grid_w, win);
}

Tensor rel_pos_attention(Ctx& ctx, const Tensor& qkv, int64_t n_win, int64_t win_h, int64_t win_w, int64_t n_head,
                         const Tensor& rel_h, const Tensor& rel_w) {
  ctx.seen(Op::kRelPosAttention);
  return ctx.device().rel_pos_attention(ctx, qkv, n_win, win_h, win_w, n_head, rel_h, rel_w);
}

Tensor resize_bicubic_aa(Ctx& ctx, const Tensor& x, int64_t out_h, int64_t out_w) {
  ctx.seen(Op::kResizeBicubicAa);
  return ctx.device().resize_bicubic_aa(ctx, x, out_h, out_w);
}

Tensor resize_bilinear_aligned(Ctx& ctx, const Tensor& x, int64_t out_h, int64_t out_w) {
  ctx.seen(Op::kResizeBilinearAligned);
  return ctx.device().resize_bilinear_aligned(ctx, x, out_h, out_w);
}

// ---- decoder ops ----
MoeRoutes moe_route(Ctx& ctx, const Tensor& logits, const MoeRouteParams& p) {
  ctx.seen(Op::kMoeRoute);
  return ctx.device().moe_route(ctx, logits, p);
}

ExpertGroups group_by_expert(Ctx& ctx, const MoeRoutes& r, int64_t n_expert) {
  const Tensor sel = to_host(ctx, r.sel), wt = to_host(ctx, r.wt);
  const int64_t nk = sel.numel();
  PIPIT_ASSERT(sel.dtype() == DType::I32 && wt.dtype() == DType::F32 && wt.numel() == nk && sel.is_contiguous() &&
               wt.is_contiguous(), "group_by_expert of {} and {}", sel.describe(), wt.describe());
  const int32_t* s = sel.ptr<int32_t>();
  ExpertGroups g;
  g.begin.assign(size_t(n_expert + 1), 0);
  for (int64_t i = 0; i < nk; ++i) {  // counting sort: tokens stay in order within an expert
    PIPIT_ASSERT(s[i] >= 0 && s[i] < n_expert, "expert {} of {}", s[i], n_expert);
    ++g.begin[size_t(s[i]) + 1];
  }
  for (int64_t e = 0; e < n_expert; ++e) g.begin[size_t(e + 1)] += g.begin[size_t(e)];
  g.token.resize(size_t(nk));
  g.weight.resize(size_t(nk));
  std::vector<int64_t> next(g.begin.begin(), g.begin.end() - 1);
  const int64_t k = sel.dim(-1);
  for (int64_t i = 0; i < nk; ++i) {
    const int64_t at = next[size_t(s[i])]++;
    g.token[size_t(at)] = i / k;
    g.weight[size_t(at)] = wt.ptr<float>()[i];
  }
  return g;
}

void add_rows_scaled_(Ctx& ctx, Tensor& out, std::span<const int64_t> rows, std::span<const float> w,
                      const Tensor& y) {
  ctx.seen(Op::kAddRowsScaled);
  ctx.device().add_rows_scaled_(ctx, out, rows, w, y);
}

Tensor swiglu_clamped(Ctx& ctx, const Tensor& gu, float alpha, float limit) {
  ctx.seen(Op::kSwigluClamped);
  return ctx.device().swiglu_clamped(ctx, gu, alpha, limit);
}

void sigmoid_mul_(Ctx& ctx, Tensor& x, const Tensor& gate) {
  ctx.seen(Op::kSigmoidMul);
  ctx.device().sigmoid_mul_(ctx, x, gate);
}

void softcap_(Ctx& ctx, Tensor& x, float cap) {
  ctx.seen(Op::kSoftcap);
  ctx.device().softcap_(ctx, x, cap);
}

void add_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) {
  ctx.seen(Op::kAddRows);
  ctx.device().add_rows_(ctx, dst, src_row, src);
}

}  // namespace pipit
