// Shared decoder blocks (attention, MLP, output head).
#include "models/blocks.h"

#include <cmath>
#include <cstring>

namespace pipit {

Result<AttnWeights> load_attn(const WeightSource& w, const std::string& p, const AttnConfig& c, bool need_qkv_bias,
                              bool need_qk_norm) {
  AttnWeights a;
  const int64_t nq = c.n_head * c.head_dim, nkv = c.n_head_kv * c.head_dim;
  PIPIT_ASSIGN_OR_RETURN(a.q, w.get(p + "q_proj.weight", {nq, c.n_embd}));
  PIPIT_ASSIGN_OR_RETURN(a.k, w.get(p + "k_proj.weight", {nkv, c.n_embd}));
  PIPIT_ASSIGN_OR_RETURN(a.v, w.get(p + "v_proj.weight", {nkv, c.n_embd}));
  PIPIT_ASSIGN_OR_RETURN(a.o, w.get(p + "o_proj.weight", {c.n_embd, nq}));
  if (need_qkv_bias) {
    PIPIT_ASSIGN_OR_RETURN(a.q_bias, w.get(p + "q_proj.bias", {nq}));
    PIPIT_ASSIGN_OR_RETURN(a.k_bias, w.get(p + "k_proj.bias", {nkv}));
    PIPIT_ASSIGN_OR_RETURN(a.v_bias, w.get(p + "v_proj.bias", {nkv}));
  } else {
    PIPIT_ASSIGN_OR_RETURN(a.q_bias, w.get_optional(p + "q_proj.bias", {nq}));
    PIPIT_ASSIGN_OR_RETURN(a.k_bias, w.get_optional(p + "k_proj.bias", {nkv}));
    PIPIT_ASSIGN_OR_RETURN(a.v_bias, w.get_optional(p + "v_proj.bias", {nkv}));
  }
  PIPIT_ASSIGN_OR_RETURN(a.o_bias, w.get_optional(p + "o_proj.bias", {c.n_embd}));
  if (need_qk_norm) {
    PIPIT_ASSIGN_OR_RETURN(a.q_norm, w.get(p + "q_norm.weight", {c.head_dim}));
    PIPIT_ASSIGN_OR_RETURN(a.k_norm, w.get(p + "k_norm.weight", {c.head_dim}));
  }
  return a;
}

Result<MlpWeights> load_mlp(const WeightSource& w, const std::string& p, int64_t n_embd, int64_t n_ff) {
  MlpWeights m;
  PIPIT_ASSIGN_OR_RETURN(m.gate, w.get(p + "gate_proj.weight", {n_ff, n_embd}));
  PIPIT_ASSIGN_OR_RETURN(m.up, w.get(p + "up_proj.weight", {n_ff, n_embd}));
  PIPIT_ASSIGN_OR_RETURN(m.down, w.get(p + "down_proj.weight", {n_embd, n_ff}));
  return m;
}

Tensor self_attention(Ctx& ctx, const Tensor& x, const AttnWeights& w, const AttnConfig& c, const RopeSpec* rope,
                      const Batch& batch, KvCache& kv, int layer) {
  const int64_t n = x.dim(0);
  Tensor q, k, v;  // one pass over x for the three projections
  const Tensor* ws[] = {&w.q, &w.k, &w.v};
  const Tensor* bs[] = {&w.q_bias, &w.k_bias, &w.v_bias};
  Tensor* ys[] = {&q, &k, &v};
  linear_multi(ctx, x, ws, bs, ys);
  q = ctx.name(q, "q", layer).reshape({n, c.n_head, c.head_dim});
  k = ctx.name(k, "k", layer).reshape({n, c.n_head_kv, c.head_dim});
  v = ctx.name(v, "v", layer).reshape({n, c.n_head_kv, c.head_dim});
  if (w.q_norm.defined()) {
    rms_norm_heads_(ctx, q, w.q_norm, c.norm_eps, c.norm_offset);
    rms_norm_heads_(ctx, k, w.k_norm, c.norm_eps, c.norm_offset);
  }
  if (rope && !rope->mrope_stream.empty() && !batch.pos_streams.empty()) {  // M-RoPE positions after an image
    const std::vector<int32_t>& pos3 = batch.pos_streams.pos;
    PIPIT_ASSERT(pos3.size() == PosStreams::kStreams * batch.tokens.size() && rope->attention_factor == 1.0f);
    rope_multi_(ctx, q, pos3, rope->mrope_stream, rope->inv_freq);
    rope_multi_(ctx, k, pos3, rope->mrope_stream, rope->inv_freq);
  } else if (rope) {
    rope_(ctx, q, batch.pos, rope->inv_freq, rope->attention_factor);
    rope_(ctx, k, batch.pos, rope->inv_freq, rope->attention_factor);
  }
  ctx.name(q, "q_rope", layer);
  ctx.name(k, "k_rope", layer);
  Tensor out = cached_attention(ctx, q, k, v, c, batch, kv, layer);
  return linear(ctx, out.reshape({n, c.n_head * c.head_dim}), w.o, w.o_bias);
}

Tensor cached_attention(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, const AttnConfig& c,
                        const Batch& batch, KvCache& kv, int layer) {
  Tensor out = ctx.alloc(DType::F32, {q.dim(0), c.n_head, c.head_dim});
  const bool ring = kv.is_ring(layer);  // a sliding-window layer's bounded cache
  PIPIT_ASSERT(!ring || c.window > 0, "layer {} has a ring cache but no sliding window", layer);
  AttnParams ap{c.scale, c.softcap, c.window, ring, c.sinks};
  for (const auto& s : batch.seqs) {
    std::span<const int32_t> pos(batch.pos.data() + s.begin, size_t(s.n));
    Tensor kc = kv.k(layer, s.slot), vc = kv.v(layer, s.slot);
    store_kv(ctx, k.slice(0, s.begin, s.begin + s.n), kc, pos, ring);
    store_kv(ctx, v.slice(0, s.begin, s.begin + s.n), vc, pos, ring);
    Tensor o = out.slice(0, s.begin, s.begin + s.n);
    attention(ctx, q.slice(0, s.begin, s.begin + s.n), kc, vc, pos, ap, o);
  }
  return ctx.name(out, "attn_out", layer);
}

Tensor input_embeddings(Ctx& ctx, const Tensor& tok_embd, const Batch& batch) {
  Tensor x = embedding(ctx, tok_embd, batch.tokens);
  const MediaEmbd& m = batch.media;
  if (m.empty()) return x;
  PIPIT_ASSERT(m.row.size() == batch.tokens.size() && m.embd.dtype() == DType::F32 && m.embd.dim(-1) == x.dim(1) &&
               m.embd.is_contiguous(), "media embd {} for {} tokens", m.embd.describe(), batch.tokens.size());
  copy_rows_(ctx, x, m.row, m.embd);
  return x;
}

void add_deepstack_(Ctx& ctx, Tensor& x, const Batch& batch, int layer) {
  if (batch.media.empty() || layer >= int(batch.deepstack.size())) return;
  const Tensor& f = batch.deepstack[size_t(layer)];
  PIPIT_ASSERT(f.dtype() == DType::F32 && f.ndim() == 2 && f.dim(1) == x.dim(1), "deepstack {} for width {}",
               f.describe(), x.dim(1));
  add_rows_(ctx, x, batch.media.row, f);
}

Tensor gated_mlp(Ctx& ctx, const Tensor& x, const MlpWeights& w, MlpAct act) {
  Tensor h = linear_gated(ctx, x, w.gate, w.up, act == MlpAct::kSilu ? GateAct::kSilu : GateAct::kGeluTanh);
  return linear(ctx, h, w.down);
}

Tensor output_logits(Ctx& ctx, const Tensor& x, const Tensor& norm, float eps, float norm_offset, const Tensor& head,
                     const Batch& batch, float final_softcap) {
  Tensor sel = gather_rows(ctx, x, batch.logits_rows);
  Tensor h = ctx.name(rms_norm(ctx, sel, norm, eps, norm_offset), "final_norm");
  Tensor logits = linear(ctx, h, head);
  if (final_softcap > 0.0f) softcap_(ctx, logits, final_softcap);
  return logits;
}

OpSet decoder_block_ops() {
  return op_set({Op::kToF32, Op::kLinear, Op::kLinearGated, Op::kEmbedding, Op::kRmsNorm, Op::kRmsNormHeads,
                 Op::kAdd, Op::kScale, Op::kGatherRows, Op::kCopyRows, Op::kRope, Op::kRopeMulti, Op::kStoreKv,
                 Op::kAttention});
}

Status check_batch_fits(const char* arch, const Batch& batch, const KvCache& kv) {
  for (const auto& s : batch.seqs) {
    if (s.n > kv.max_chunk())
      return Error::invalid_argument("[{}] a sequence adds {} tokens in one forward; the sliding-window KV cache "
                                     "takes at most {} (its n_batch)", arch, s.n, kv.max_chunk());
    for (int64_t i = s.begin; i < s.begin + s.n; ++i)
      if (batch.pos[size_t(i)] < 0 || batch.pos[size_t(i)] >= kv.n_ctx())
        return Error::out_of_range("[{}] position {} outside the context of {}", arch, batch.pos[size_t(i)],
                                   kv.n_ctx());
  }
  return Status::ok();
}

Status check_dims(const char* arch, int64_t n_embd, int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t n_ff,
                  int64_t n_layer, int64_t n_vocab) {
  if (n_embd <= 0 || n_head <= 0 || n_head_kv <= 0 || head_dim <= 0 || n_ff <= 0 || n_layer <= 0 || n_vocab <= 0)
    return Error::invalid_argument("[{}] config sizes must be positive (hidden {}, heads {}/{}, head_dim {}, "
                                   "intermediate {}, layers {}, vocab {})",
                                   arch, n_embd, n_head, n_head_kv, head_dim, n_ff, n_layer, n_vocab);
  if (n_head % n_head_kv)
    return Error::invalid_argument("[{}] num_attention_heads {} is not a multiple of num_key_value_heads {}", arch,
                                   n_head, n_head_kv);
  if (head_dim % 2) return Error::invalid_argument("[{}] head_dim {} must be even for RoPE", arch, head_dim);
  return Status::ok();
}

void fill_common_info(ModelInfo& info, const HfConfig& cfg) {
  info.arch = cfg.model_type();
  info.max_ctx = cfg.get_int_or("max_position_embeddings", 4096);
  for (auto id : cfg.get_int_list("eos_token_id")) info.eos_ids.push_back(int32_t(id));
  info.bos_id = int32_t(cfg.get_int_or("bos_token_id", -1));
}

}  // namespace pipit
