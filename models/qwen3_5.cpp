// Qwen3.5 text model (model_type qwen3_5_text, Qwen3_5ForCausalLM; and the decoder of qwen3_5,
// Qwen3_5ForConditionalGeneration, whose images come through the Qwen VL family: make_qwen3_5 below): a hybrid of
// Gated DeltaNet linear-attention layers and gated full-attention layers (layer_types; by default every 4th layer
// is full), each followed by a SwiGLU MLP; (1 + w) RMSNorms.
//  - linear attention: in_proj_qkv -> depthwise causal conv1d (kernel 4) + SiLU -> q | k | v; q, k L2-normalised,
//    q scaled by dk^-0.5; beta = sigmoid(in_proj_b x); g = -exp(A_log) softplus(in_proj_a x + dt_bias); the gated
//    delta rule over a per-sequence state (KvCache recurrent state: conv window + [v_heads, dk, dv] matrices);
//    gated RMSNorm with z = in_proj_z x (plain w), out_proj.
//  - full attention: q_proj gives [query | gate] per head; q/k RMSNorm (1 + w) over head_dim; partial RoPE
//    (partial_rotary_factor of head_dim); softmax attention over the KV cache; output * sigmoid(gate), o_proj.
// reference: HF modeling_qwen3_5.py (Qwen3_5GatedDeltaNet, Qwen3_5Attention, Qwen3_5DecoderLayer, Qwen3_5TextModel)
// and configuration_qwen3_5.py (defaults).
#include <cmath>

#include "core/host_f32.h"
#include "models/blocks.h"
#include "models/layer_types.h"
#include "models/mtp.h"
#include "models/qwen2_vl.h"
#include "models/recipe_rules.h"

namespace pipit {

namespace {

constexpr const char* kArch = "qwen3_5";
constexpr float kNormOffset = 1.0f;  // Qwen3_5RMSNorm: norm(x) * (1 + w)

struct LinearAttnWeights {
  Tensor qkv, z, b, a, out;  // in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj
  Tensor conv_w;             // f32 [K, conv_dim]: conv1d.weight [conv_dim, 1, K] transposed at load
  Tensor A_log, dt_bias;     // f32 [v_heads]
  Tensor norm;               // f32 [dv]
};

struct Qwen35Layer {
  bool linear;
  Tensor attn_norm, ffn_norm;
  AttnWeights attn;  // full-attention layers (q holds query and gate rows)
  LinearAttnWeights lin;
  MlpWeights mlp;
};

// HF's Qwen3_5TextRotaryEmbedding always interleaves the M-RoPE streams (apply_interleaved_mrope, whatever
// mrope_interleaved says), with mrope_section [11, 11, 10] when the config names none: frequency i turns with h when
// i % 3 == 1 and i < 3 * section[1], with w when i % 3 == 2 and i < 3 * section[2], else with t.
std::vector<uint8_t> interleaved_mrope_streams(const nlohmann::json& rope, size_t n_freq) {
  int64_t sh = 11, sw = 10;  // rope_from_config has checked a section the config gives
  if (rope.is_object() && rope.contains("mrope_section") && rope["mrope_section"].is_array() &&
      rope["mrope_section"].size() == 3 && rope["mrope_section"][1].is_number_integer() &&
      rope["mrope_section"][2].is_number_integer()) {
    sh = rope["mrope_section"][1].get<int64_t>();
    sw = rope["mrope_section"][2].get<int64_t>();
  }
  std::vector<uint8_t> stream(n_freq, 0);
  for (size_t i = 0; i < n_freq; ++i)
    stream[i] = i % 3 == 1 && int64_t(i) < 3 * sh ? 1 : i % 3 == 2 && int64_t(i) < 3 * sw ? 2 : 0;
  return stream;
}

// The multi-token-prediction head (mtp.*, vLLM Qwen3_5MultiTokenPredictor): pre-fc RMSNorms of the next token's
// embedding and of the target's final-norm hidden state, fc over [embedding | hidden], one gated full-attention
// decoder layer with its own KV cache, a final RMSNorm; the embedding and the lm_head are the target's.
struct MtpWeights {
  Tensor norm_embd, norm_hidden;  // [n_embd] (1 + w)
  Tensor fc;                      // [n_embd, 2 n_embd]
  Qwen35Layer layer;              // full attention
  Tensor norm;                    // [n_embd] (1 + w)
};

class Qwen35Model : public Model, public MtpModel {
 public:
  Status load(const HfConfig& top, const WeightSource& w) {
    // Qwen3_5ForConditionalGeneration nests the text model's fields under text_config and its tensors under
    // model.language_model. (the vision tower is not used for text; the MTP head's mtp.* are top-level names).
    const HfConfig cfg = top.model_type() == "qwen3_5" ? top.sub("text_config") : top;
    const std::string pre = w.has("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
    PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, cfg.get_int("hidden_size"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_head, cfg.get_int("num_attention_heads"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_ff, cfg.get_int("intermediate_size"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_vocab, cfg.get_int("vocab_size"));
    const int64_t n_head_kv = cfg.get_int_or("num_key_value_heads", n_head);
    const int64_t head_dim = cfg.get_int_or("head_dim", 256);  // Qwen3_5TextConfig default
    PIPIT_TRY(check_dims(kArch, n_embd, n_head, n_head_kv, head_dim, n_ff, n_layer, n_vocab));
    const std::string act = cfg.get_string_or("hidden_act", "silu");
    if (act != "silu") return Error::unsupported("[qwen3_5] hidden_act '{}' (only silu is supported)", act);
    if (cfg.get_bool_or("attention_bias", false))
      return Error::unsupported("[qwen3_5] attention_bias = true is not supported");
    eps_ = float(cfg.get_float_or("rms_norm_eps", 1e-6));
    gate_ = cfg.get_bool_or("attn_output_gate", true);

    // linear attention sizes (Qwen3_5TextConfig defaults)
    nk_ = cfg.get_int_or("linear_num_key_heads", 16);
    nv_ = cfg.get_int_or("linear_num_value_heads", 32);
    dk_ = cfg.get_int_or("linear_key_head_dim", 128);
    dv_ = cfg.get_int_or("linear_value_head_dim", 128);
    kconv_ = cfg.get_int_or("linear_conv_kernel_dim", 4);
    if (nk_ <= 0 || nv_ <= 0 || dk_ <= 0 || dv_ <= 0 || kconv_ <= 0 || nv_ % nk_)
      return Error::invalid_argument("[qwen3_5] linear attention sizes must be positive with value heads a multiple "
                                     "of key heads (key heads {}, value heads {}, dims {}/{}, conv kernel {})",
                                     nk_, nv_, dk_, dv_, kconv_);
    conv_dim_ = 2 * nk_ * dk_ + nv_ * dv_;

    PIPIT_ASSIGN_OR_RETURN(auto linear, linear_layers(cfg, n_layer));

    // partial rotary: only the first head_dim * partial_rotary_factor dims of a head turn
    const nlohmann::json rp = rope_parameters_of(cfg);
    double prf = cfg.get_float_or("partial_rotary_factor", 0.25);
    if (rp.is_object() && rp.contains("partial_rotary_factor") && rp["partial_rotary_factor"].is_number())
      prf = rp["partial_rotary_factor"].get<double>();
    const int64_t rot_dim = int64_t(double(head_dim) * prf);  // HF: int(head_dim * partial_rotary_factor)
    PIPIT_ASSIGN_OR_RETURN(rope_spec_, rope_from_config(cfg, rot_dim));
    // Interleaved M-RoPE. Text has every position stream equal to the token's position, where the plain rotation
    // is exact (and used); a batch with image positions (Batch::pos_streams) turns frequency i with stream
    // mrope_stream[i].
    rope_spec_.mrope_stream = interleaved_mrope_streams(rp.is_object() ? rp : cfg.json().value("rope_scaling",
                                                        nlohmann::json()), rope_spec_.inv_freq.size());
    attn_ = AttnConfig{n_embd, n_head, n_head_kv, head_dim, 1.0f / std::sqrt(float(head_dim)), eps_, kNormOffset};

    PIPIT_ASSIGN_OR_RETURN(tok_embd_, w.get(pre + "embed_tokens.weight", {n_vocab, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(out_norm_, w.get(pre + "norm.weight", {n_embd}));
    const bool tied = top.get_bool_or("tie_word_embeddings", cfg.get_bool_or("tie_word_embeddings", false));
    if (w.has("lm_head.weight") || !tied) {
      PIPIT_ASSIGN_OR_RETURN(output_, w.get("lm_head.weight", {n_vocab, n_embd}));
    } else {
      output_ = tok_embd_;
    }
    std::vector<StateShapes> state(static_cast<size_t>(n_layer));
    for (int64_t il = 0; il < n_layer; ++il) {
      const std::string p = pre + "layers." + std::to_string(il) + ".";
      Qwen35Layer L;
      L.linear = linear[size_t(il)];
      PIPIT_ASSIGN_OR_RETURN(L.attn_norm, w.get(p + "input_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.ffn_norm, w.get(p + "post_attention_layernorm.weight", {n_embd}));
      if (L.linear) {
        PIPIT_ASSIGN_OR_RETURN(L.lin, load_linear_attn(w, p + "linear_attn.", n_embd));
        // conv window [K, conv_dim] and one [dk, dv] matrix per value head
        state[size_t(il)] = {{kconv_, conv_dim_}, {nv_, dk_, dv_}};
      } else {
        const std::string a = p + "self_attn.";
        const int64_t nq = n_head * head_dim, nkv = n_head_kv * head_dim;
        PIPIT_ASSIGN_OR_RETURN(L.attn.q, w.get(a + "q_proj.weight", {gate_ ? 2 * nq : nq, n_embd}));  // [query | gate]
        PIPIT_ASSIGN_OR_RETURN(L.attn.k, w.get(a + "k_proj.weight", {nkv, n_embd}));
        PIPIT_ASSIGN_OR_RETURN(L.attn.v, w.get(a + "v_proj.weight", {nkv, n_embd}));
        PIPIT_ASSIGN_OR_RETURN(L.attn.o, w.get(a + "o_proj.weight", {n_embd, nq}));
        PIPIT_ASSIGN_OR_RETURN(L.attn.q_norm, w.get(a + "q_norm.weight", {head_dim}));
        PIPIT_ASSIGN_OR_RETURN(L.attn.k_norm, w.get(a + "k_norm.weight", {head_dim}));
      }
      PIPIT_ASSIGN_OR_RETURN(L.mlp, load_mlp(w, p + "mlp.", n_embd, n_ff));
      layers_.push_back(std::move(L));
    }
    PIPIT_TRY(load_mtp(cfg, w, n_embd, n_ff, head_dim));
    fill_common_info(info_, cfg);
    if (top.has("eos_token_id")) {  // the multimodal config keeps the special ids at the top level
      info_.eos_ids.clear();
      for (auto id : top.get_int_list("eos_token_id")) info_.eos_ids.push_back(int32_t(id));
    }
    info_.n_vocab = n_vocab;
    info_.n_embd = n_embd;
    info_.n_layer = n_layer;
    info_.kv = {int(n_layer), int(n_head_kv), int(head_dim), {}, state};
    return Status::ok();
  }

  Status forward(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits) override {
    return run(ctx, batch, kv, logits, nullptr);
  }

  // ---- MtpModel ----
  std::string mtp_missing() const override { return mtp_missing_; }
  Status forward_hidden(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits, Tensor* hidden) override {
    return run(ctx, batch, kv, logits, hidden);
  }
  KvCacheSpec mtp_kv_spec() const override { return {1, int(attn_.n_head_kv), int(attn_.head_dim), {}, {}}; }

  // vLLM Qwen3_5MultiTokenPredictor.forward (reference: testdata/reference/qwen3_5_mtp.py RefQwen35MTP.forward).
  Status forward_mtp(Ctx& ctx, const Batch& batch, const Tensor& hidden, KvCache& kv, Tensor* logits,
                     Tensor* out) override {
    PIPIT_ASSERT(mtp_missing_.empty(), "forward_mtp without mtp.* weights");
    PIPIT_TRY(check_batch_fits("qwen3_5 mtp", batch, kv));
    const int64_t n = batch.n_tokens(), E = attn_.n_embd;
    if (hidden.ndim() != 2 || hidden.dim(0) != n || hidden.dim(1) != E || hidden.dtype() != DType::F32)
      return Error::invalid_argument("[qwen3_5 mtp] hidden {} for {} pairs of width {}", hidden.describe(), n, E);
    Tensor e = ctx.name(rms_norm(ctx, input_embeddings(ctx, tok_embd_, batch), mtp_.norm_embd, eps_, kNormOffset),
                        "mtp_norm_embd");
    Tensor h = ctx.name(rms_norm(ctx, hidden, mtp_.norm_hidden, eps_, kNormOffset), "mtp_norm_hidden");
    // concat([e, h], -1) as rows of a [2n, E] view of [n, 2E]: row 2i is e_i, row 2i + 1 is h_i (embedding first)
    Tensor cat = ctx.alloc(DType::F32, {2 * n, E});
    std::vector<int32_t> from_e(size_t(2 * n), -1), from_h(size_t(2 * n), -1);
    for (int64_t i = 0; i < n; ++i) from_e[size_t(2 * i)] = int32_t(i), from_h[size_t(2 * i + 1)] = int32_t(i);
    copy_rows_(ctx, cat, from_e, e);
    copy_rows_(ctx, cat, from_h, h);
    Tensor x = ctx.name(linear(ctx, cat.reshape({n, 2 * E}), mtp_.fc), "mtp_fc_out");
    const Qwen35Layer& L = mtp_.layer;
    Tensor a = gated_attention(ctx, rms_norm(ctx, x, L.attn_norm, eps_, kNormOffset), L.attn, batch, kv, 0);
    add_(ctx, x, a);
    Tensor m = gated_mlp(ctx, rms_norm(ctx, x, L.ffn_norm, eps_, kNormOffset), L.mlp, MlpAct::kSilu);
    add_(ctx, x, m);
    ctx.name(x, "mtp_layer_out");
    Tensor hn = rms_norm(ctx, x, mtp_.norm, eps_, kNormOffset);
    *logits = ctx.name(linear(ctx, gather_rows(ctx, hn, batch.logits_rows), output_), "mtp_logits");
    if (out) *out = hn;
    return Status::ok();
  }

  OpSet ops_used() const override {
    return decoder_block_ops() | op_set({Op::kCausalConv1dSilu, Op::kL2NormGroups, Op::kDeltaGates,
                                         Op::kGatedDeltaRule, Op::kRmsNormGated, Op::kSigmoidMul});
  }

 private:
  // The decoder; with `hidden`, also every token's final-norm hidden state (the MTP head's input).
  Status run(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits, Tensor* hidden) {
    PIPIT_TRY(check_batch_fits(kArch, batch, kv));
    PIPIT_TRY(kv.begin_state(kArch, batch));
    Tensor x = ctx.name(input_embeddings(ctx, tok_embd_, batch), "embd");
    for (int il = 0; il < int(layers_.size()); ++il) {
      ArenaScope scope(*ctx.arena);
      const Qwen35Layer& L = layers_[size_t(il)];
      Tensor h = ctx.name(rms_norm(ctx, x, L.attn_norm, eps_, kNormOffset), "attn_norm", il);
      Tensor a = L.linear ? linear_attention(ctx, h, L.lin, batch, kv, il) : gated_attention(ctx, h, L.attn, batch, kv, il);
      ctx.name(a, "attn_proj", il);
      add_(ctx, x, a);
      h = ctx.name(rms_norm(ctx, x, L.ffn_norm, eps_, kNormOffset), "ffn_norm", il);
      Tensor m = ctx.name(gated_mlp(ctx, h, L.mlp, MlpAct::kSilu), "ffn_out", il);
      add_(ctx, x, m);
      ctx.name(x, "l_out", il);
    }
    // the logits exactly as without `hidden` (rms_norm works row by row: the same rows give the same values)
    *logits = ctx.name(output_logits(ctx, x, out_norm_, eps_, kNormOffset, output_, batch), "logits");
    if (hidden) *hidden = ctx.name(rms_norm(ctx, x, out_norm_, eps_, kNormOffset), "hidden");
    kv.end_state(batch);
    return Status::ok();
  }

  // mtp.* when the weights have them (mtp_num_hidden_layers = 1, shared embedding: the released checkpoints);
  // otherwise mtp_missing_ says why there is no head. A head that is there but malformed is an error.
  Status load_mtp(const HfConfig& cfg, const WeightSource& w, int64_t n_embd, int64_t n_ff, int64_t head_dim) {
    if (!w.has("mtp.fc.weight")) {
      mtp_missing_ = "the model file has no mtp.* tensors (the Hub's Qwen3.5 checkpoints have them; convert from "
                     "those files: pipit convert keeps them)";
      return Status::ok();
    }
    const int64_t n_mtp = cfg.get_int_or("mtp_num_hidden_layers", 1);
    if (n_mtp != 1) {
      mtp_missing_ = fmt("mtp_num_hidden_layers = {} (only 1 MTP layer is supported)", n_mtp);
      return Status::ok();
    }
    if (cfg.get_bool_or("mtp_use_dedicated_embeddings", false)) {
      mtp_missing_ = "mtp_use_dedicated_embeddings = true is not supported";
      return Status::ok();
    }
    const std::string p = "mtp.";
    PIPIT_ASSIGN_OR_RETURN(mtp_.norm_embd, w.get(p + "pre_fc_norm_embedding.weight", {n_embd}));
    PIPIT_ASSIGN_OR_RETURN(mtp_.norm_hidden, w.get(p + "pre_fc_norm_hidden.weight", {n_embd}));
    PIPIT_ASSIGN_OR_RETURN(mtp_.fc, w.get(p + "fc.weight", {n_embd, 2 * n_embd}));
    PIPIT_ASSIGN_OR_RETURN(mtp_.norm, w.get(p + "norm.weight", {n_embd}));
    const std::string l = p + "layers.0.", a = l + "self_attn.";
    Qwen35Layer& L = mtp_.layer;
    L.linear = false;
    PIPIT_ASSIGN_OR_RETURN(L.attn_norm, w.get(l + "input_layernorm.weight", {n_embd}));
    PIPIT_ASSIGN_OR_RETURN(L.ffn_norm, w.get(l + "post_attention_layernorm.weight", {n_embd}));
    const int64_t nq = attn_.n_head * head_dim, nkv = attn_.n_head_kv * head_dim;
    PIPIT_ASSIGN_OR_RETURN(L.attn.q, w.get(a + "q_proj.weight", {gate_ ? 2 * nq : nq, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(L.attn.k, w.get(a + "k_proj.weight", {nkv, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(L.attn.v, w.get(a + "v_proj.weight", {nkv, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(L.attn.o, w.get(a + "o_proj.weight", {n_embd, nq}));
    PIPIT_ASSIGN_OR_RETURN(L.attn.q_norm, w.get(a + "q_norm.weight", {head_dim}));
    PIPIT_ASSIGN_OR_RETURN(L.attn.k_norm, w.get(a + "k_norm.weight", {head_dim}));
    PIPIT_ASSIGN_OR_RETURN(L.mlp, load_mlp(w, l + "mlp.", n_embd, n_ff));
    return Status::ok();
  }

  float eps_ = 1e-6f;
  bool gate_ = true;
  int64_t nk_ = 0, nv_ = 0, dk_ = 0, dv_ = 0, kconv_ = 0, conv_dim_ = 0;
  AttnConfig attn_{};
  RopeSpec rope_spec_;
  Tensor tok_embd_, out_norm_, output_;
  std::vector<Qwen35Layer> layers_;
  MtpWeights mtp_;
  std::string mtp_missing_;  // empty: mtp_ is loaded

  // layer_types, or HF's default from full_attention_interval: layer i is full when (i + 1) % interval == 0.
  static Result<std::vector<bool>> linear_layers(const HfConfig& cfg, int64_t n_layer) {
    const int64_t interval = cfg.get_int_or("full_attention_interval", 4);
    if (!cfg.has("layer_types") && interval <= 0)
      return Error::invalid_argument("[qwen3_5] full_attention_interval {} must be positive", interval);
    return layer_kinds(cfg, "qwen3_5", n_layer, "linear_attention", "full_attention",
                       [&](int64_t il) { return (il + 1) % interval != 0; });
  }

  Result<LinearAttnWeights> load_linear_attn(const WeightSource& w, const std::string& p, int64_t n_embd) const {
    LinearAttnWeights L;
    PIPIT_ASSIGN_OR_RETURN(L.qkv, w.get(p + "in_proj_qkv.weight", {conv_dim_, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(L.z, w.get(p + "in_proj_z.weight", {nv_ * dv_, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(L.b, w.get(p + "in_proj_b.weight", {nv_, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(L.a, w.get(p + "in_proj_a.weight", {nv_, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(L.out, w.get(p + "out_proj.weight", {n_embd, nv_ * dv_}));
    if (w.has(p + "conv1d.bias")) return Error::unsupported("[qwen3_5] {}conv1d.bias: a conv bias is not supported", p);
    PIPIT_ASSIGN_OR_RETURN(Tensor cw, w.get(p + "conv1d.weight", {conv_dim_, 1, kconv_}));
    // tap-major [kconv, conv_dim]: a tap's channels are contiguous (small parameters: bf16 in HF files, f32 in ours).
    // Made on the host at load, then placed where the weights are (w.constant: uploaded on a device).
    PIPIT_ASSIGN_OR_RETURN(Tensor cwt, host_f32_transposed(cw, conv_dim_, kconv_));
    PIPIT_ASSIGN_OR_RETURN(L.conv_w, w.constant(cwt));
    PIPIT_ASSIGN_OR_RETURN(Tensor al, w.get(p + "A_log", {nv_}));
    PIPIT_ASSIGN_OR_RETURN(Tensor dt, w.get(p + "dt_bias", {nv_}));
    PIPIT_ASSIGN_OR_RETURN(Tensor nw, w.get(p + "norm.weight", {dv_}));
    PIPIT_ASSIGN_OR_RETURN(Tensor alf, host_f32(al, {nv_}));
    PIPIT_ASSIGN_OR_RETURN(Tensor dtf, host_f32(dt, {nv_}));
    PIPIT_ASSIGN_OR_RETURN(Tensor nwf, host_f32(nw, {dv_}));
    PIPIT_ASSIGN_OR_RETURN(L.A_log, w.constant(alf));
    PIPIT_ASSIGN_OR_RETURN(L.dt_bias, w.constant(dtf));
    PIPIT_ASSIGN_OR_RETURN(L.norm, w.constant(nwf));
    return L;
  }

  // Qwen3_5GatedDeltaNet.forward for the batch's sequences, each continuing its own recurrent state.
  Tensor linear_attention(Ctx& ctx, const Tensor& x, const LinearAttnWeights& w, const Batch& batch, KvCache& kv,
                          int il) const {
    const int64_t n = x.dim(0);
    Tensor qkv, z, b, a;
    const Tensor none;
    const Tensor* ws[] = {&w.qkv, &w.z, &w.b, &w.a};
    const Tensor* bs[] = {&none, &none, &none, &none};
    Tensor* ys[] = {&qkv, &z, &b, &a};
    linear_multi(ctx, x, ws, bs, ys);
    ctx.name(qkv, "lin_qkv", il);
    Tensor conv = ctx.alloc(DType::F32, {n, conv_dim_});
    std::vector<DeltaSeq> seqs;
    for (const auto& s : batch.seqs) {
      Tensor cs = kv.state(il, s.slot, 0);
      Tensor y = conv.slice(0, s.begin, s.begin + s.n);
      causal_conv1d_silu(ctx, qkv.slice(0, s.begin, s.begin + s.n), cs, w.conv_w, y);
      seqs.push_back({s.begin, s.n, kv.state(il, s.slot, 1)});
    }
    ctx.name(conv, "lin_conv", il);
    Tensor q = conv.slice(1, 0, nk_ * dk_);
    Tensor k = conv.slice(1, nk_ * dk_, 2 * nk_ * dk_);
    Tensor v = conv.slice(1, 2 * nk_ * dk_, conv_dim_);
    l2_norm_groups_(ctx, q, dk_, 1e-6f, 1.0f / std::sqrt(float(dk_)));  // HF l2norm eps, then q * dk^-0.5
    l2_norm_groups_(ctx, k, dk_, 1e-6f);
    delta_gates_(ctx, a, b, w.A_log, w.dt_bias);  // a -> g, b -> beta
    Tensor o = ctx.alloc(DType::F32, {n, nv_ * dv_});
    gated_delta_rule(ctx, q, k, v, dk_, dv_, a, b, seqs, o);
    ctx.name(o, "lin_core", il);
    Tensor normed = rms_norm_gated(ctx, o.reshape({n * nv_, dv_}), w.norm, z.reshape({n * nv_, dv_}), eps_);
    return linear(ctx, normed.reshape({n, nv_ * dv_}), w.out);
  }

  // Qwen3_5Attention.forward: as blocks.h's self_attention, with the per-head output gate in q_proj.
  Tensor gated_attention(Ctx& ctx, const Tensor& x, const AttnWeights& w, const Batch& batch, KvCache& kv,
                         int il) const {
    const int64_t n = x.dim(0), H = attn_.n_head, D = attn_.head_dim;
    Tensor qg, k, v;
    const Tensor none;
    const Tensor* ws[] = {&w.q, &w.k, &w.v};
    const Tensor* bs[] = {&none, &none, &none};
    Tensor* ys[] = {&qg, &k, &v};
    linear_multi(ctx, x, ws, bs, ys);
    Tensor q = qg, gate;
    if (gate_) {  // q_proj(x).view(n, H, 2D): query = first D of each head, gate = last D (contiguous copies)
      const Tensor heads = qg.reshape({n * H, 2 * D});
      q = to_f32(ctx, heads.slice(1, 0, D));
      gate = to_f32(ctx, heads.slice(1, D, 2 * D)).reshape({n, H * D});
    }
    q = q.reshape({n, H, D});
    k = k.reshape({n, attn_.n_head_kv, D});
    v = v.reshape({n, attn_.n_head_kv, D});
    rms_norm_heads_(ctx, q, w.q_norm, eps_, kNormOffset);
    rms_norm_heads_(ctx, k, w.k_norm, eps_, kNormOffset);
    if (!batch.pos_streams.empty()) {  // 3-D positions of a prompt with images, or of the tokens after one
      const std::vector<int32_t>& pos3 = batch.pos_streams.pos;
      PIPIT_ASSERT(pos3.size() == PosStreams::kStreams * batch.tokens.size() && rope_spec_.attention_factor == 1.0f);
      rope_multi_(ctx, q, pos3, rope_spec_.mrope_stream, rope_spec_.inv_freq);
      rope_multi_(ctx, k, pos3, rope_spec_.mrope_stream, rope_spec_.inv_freq);
    } else {
      rope_(ctx, q, batch.pos, rope_spec_.inv_freq, rope_spec_.attention_factor);
      rope_(ctx, k, batch.pos, rope_spec_.inv_freq, rope_spec_.attention_factor);
    }
    Tensor o = cached_attention(ctx, q, k, v, attn_, batch, kv, il).reshape({n, H * D});
    if (gate_) sigmoid_mul_(ctx, o, gate);  // attn * sigmoid(gate)
    return linear(ctx, o, w.o);
  }
};

Result<std::unique_ptr<Model>> make_qwen3_5_text(const HfConfig& cfg, const WeightSource& w) {
  auto m = std::make_unique<Qwen35Model>();
  PIPIT_TRY(m->load(cfg, w));
  return std::unique_ptr<Model>(std::move(m));
}

// Qwen3_5ForConditionalGeneration: Qwen3-VL's vision tower without DeepStack (Qwen3_5VisionConfig drops
// deepstack_visual_indexes) in front of this decoder, through the Qwen VL family (models/qwen2_vl.cpp: image
// features at the <|image_pad|> rows, get_rope_index positions). A checkpoint without the tower's tensors (a
// text-only export) loads as the text model. The mtp.* tensors (multi-token prediction) are read by the decoder
// (MtpModel, models/mtp.h) and reached through the family's model.
Result<std::unique_ptr<Model>> make_qwen3_5(const HfConfig& cfg, const WeightSource& w) {
  const bool tower = w.has("model.visual.patch_embed.proj.weight") || w.has("visual.patch_embed.proj.weight");
  if (cfg.model_type() != "qwen3_5" || !cfg.has("vision_config") || !tower) return make_qwen3_5_text(cfg, w);
  // Qwen3_5Config defaults: <|image_pad|> 248056, <|vision_start|> 248053, <|vision_end|> 248054, <|video_pad|> 248057
  return make_qwen_vl_family(cfg, w, QwenVisionTower::Kind::kQwen3,
                             QwenVlDecoder{kArch, make_qwen3_5_text, {248056, 248053, 248054, 248057}});
}

}  // namespace

PIPIT_REGISTER_MODEL("qwen3_5_text", make_qwen3_5);
PIPIT_REGISTER_MODEL("qwen3_5", make_qwen3_5);
// Under q8 / q4 the Gated DeltaNet gate projections stay 16-bit (convert/recipe.h rule 4): these few rows (one per
// value head) set each head's decay exp(-e^A_log softplus(a + dt_bias)) and write strength sigmoid(b) at every
// token; an error there compounds through the recurrent state over the whole sequence (~0.1% of the layer's
// weights). A_log, dt_bias, the conv and norm weights are not 2-D and stay f32 by the general rules.
static FamilyRecipeRegistrar kQwen35Recipe(
    {"qwen3_5", "qwen3_5_text"},
    {{.label = "linear-attention gates", .suffix = {"linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight"},
      .quants = {"q8_0", "q4_0"}, .gives = RuleGives::kHalf}});

}  // namespace pipit
