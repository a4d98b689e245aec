// Gemma 3 text decoder (model_type gemma3_text, Gemma3ForCausalLM): (1 + w) RMSNorms, embeddings scaled by
// sqrt(hidden), q/k norms, a norm before and after both attention and MLP, sliding-window layers interleaved with
// global ones (each kind with its own RoPE base), GeGLU, optional attention / final logit soft-capping.
// reference: HF modeling_gemma3.py (Gemma3TextScaledWordEmbedding, Gemma3Attention, Gemma3DecoderLayer,
// Gemma3TextModel, Gemma3ForCausalLM) and configuration_gemma3.py (defaults).
#include <cmath>

#include "models/blocks.h"
#include "models/layer_types.h"

namespace pipit {

namespace {

constexpr float kNormOffset = 1.0f;  // Gemma3RMSNorm: normed * (1 + weight)

struct Gemma3Layer {
  bool sliding;                       // layer_types[il] == "sliding_attention"
  Tensor attn_norm, post_attn_norm;   // input_layernorm, post_attention_layernorm [n_embd]
  Tensor ffn_norm, post_ffn_norm;     // pre_feedforward_layernorm, post_feedforward_layernorm [n_embd]
  AttnWeights attn;                   // with q_norm / k_norm [head_dim]
  MlpWeights mlp;
};

// layer_types, or (older configs) every sliding_window_pattern-th layer global, the others sliding.
Result<std::vector<bool>> sliding_layers(const HfConfig& cfg, int64_t n_layer) {
  const int64_t pattern = cfg.get_int_or("sliding_window_pattern", 6);
  if (!cfg.has("layer_types") && pattern <= 0)
    return Error::invalid_argument("[gemma3] sliding_window_pattern {} must be positive", pattern);
  return layer_kinds(cfg, "gemma3", n_layer, "sliding_attention", "full_attention",
                     [&](int64_t il) { return (il + 1) % pattern != 0; });
}

// An optional float that may be JSON null (soft-capping off).
float optional_float(const HfConfig& cfg, const char* key) { return float(cfg.get_float_or(key, 0.0)); }

class Gemma3Model : public Model {
 public:
  Status load(const HfConfig& cfg, const WeightSource& w) {
    const char* arch = "gemma3";
    PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, cfg.get_int("hidden_size"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_head, cfg.get_int("num_attention_heads"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_ff, cfg.get_int("intermediate_size"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_vocab, cfg.get_int("vocab_size"));
    const int64_t n_head_kv = cfg.get_int_or("num_key_value_heads", n_head);
    const int64_t head_dim = cfg.get_int_or("head_dim", 256);  // Gemma3TextConfig default
    PIPIT_TRY(check_dims(arch, n_embd, n_head, n_head_kv, head_dim, n_ff, n_layer, n_vocab));
    if (cfg.get_bool_or("use_bidirectional_attention", false))
      return Error::unsupported("[gemma3] use_bidirectional_attention (embedding models) is not supported");
    const std::string act = cfg.get_string_or("hidden_activation", "gelu_pytorch_tanh");
    if (act != "gelu_pytorch_tanh")
      return Error::unsupported("[gemma3] hidden_activation '{}' (only gelu_pytorch_tanh is supported)", act);
    eps_ = float(cfg.get_float_or("rms_norm_eps", 1e-6));
    // HF: torch.tensor(hidden_size ** 0.5), a float32 scalar (a bf16 run would round it further)
    embd_scale_ = float(std::sqrt(double(n_embd)));
    final_softcap_ = optional_float(cfg, "final_logit_softcapping");

    const float scale = float(1.0 / std::sqrt(double(cfg.get_float_or("query_pre_attn_scalar", 256.0))));
    const int64_t window = cfg.get_int_or("sliding_window", 4096);
    if (window <= 0) return Error::invalid_argument("[gemma3] sliding_window {} must be positive", window);
    global_ = AttnConfig{n_embd, n_head, n_head_kv, head_dim, scale, eps_, kNormOffset, 0,
                         optional_float(cfg, "attn_logit_softcapping")};
    local_ = global_;
    local_.window = int(window);
    // global layers: rope_theta (+ rope_scaling); sliding layers: rope_local_base_freq, never scaled
    nlohmann::json rope_cfg = cfg.json();  // with Gemma3TextConfig's defaults for the two bases
    if (!cfg.has("rope_theta")) rope_cfg["rope_theta"] = 1e6;
    if (!cfg.has("rope_local_base_freq")) rope_cfg["rope_local_base_freq"] = 1e4;
    PIPIT_ASSIGN_OR_RETURN(rope_global_, rope_from_config(HfConfig(rope_cfg), head_dim, "rope_theta"));
    PIPIT_ASSIGN_OR_RETURN(rope_local_, rope_from_config(HfConfig(rope_cfg), head_dim, "rope_local_base_freq", false));

    PIPIT_ASSIGN_OR_RETURN(auto sliding, sliding_layers(cfg, n_layer));
    PIPIT_ASSIGN_OR_RETURN(tok_embd_, w.get("model.embed_tokens.weight", {n_vocab, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(out_norm_, w.get("model.norm.weight", {n_embd}));
    if (w.has("lm_head.weight") || !cfg.get_bool_or("tie_word_embeddings", true)) {
      PIPIT_ASSIGN_OR_RETURN(output_, w.get("lm_head.weight", {n_vocab, n_embd}));
    } else {
      output_ = tok_embd_;
    }
    std::vector<int> kv_window;
    for (int64_t il = 0; il < n_layer; ++il) {
      const std::string p = "model.layers." + std::to_string(il) + ".";
      Gemma3Layer L;
      L.sliding = sliding[size_t(il)];
      PIPIT_ASSIGN_OR_RETURN(L.attn_norm, w.get(p + "input_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.post_attn_norm, w.get(p + "post_attention_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.ffn_norm, w.get(p + "pre_feedforward_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.post_ffn_norm, w.get(p + "post_feedforward_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.attn, load_attn(w, p + "self_attn.", global_, cfg.get_bool_or("attention_bias", false),
                                               /*need_qk_norm=*/true));
      PIPIT_ASSIGN_OR_RETURN(L.mlp, load_mlp(w, p + "mlp.", n_embd, n_ff));
      kv_window.push_back(L.sliding ? int(window) : 0);
      layers_.push_back(std::move(L));
    }
    fill_common_info(info_, cfg);
    info_.n_vocab = n_vocab;
    info_.n_embd = n_embd;
    info_.n_layer = n_layer;
    info_.kv = {int(n_layer), int(n_head_kv), int(head_dim), kv_window};  // sliding layers get a ring
    return Status::ok();
  }

  Status forward(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits) override {
    PIPIT_TRY(check_batch_fits("gemma3", batch, kv));
    Tensor x = embedding(ctx, tok_embd_, batch.tokens);
    scale_(ctx, x, embd_scale_);
    ctx.name(x, "embd");
    for (int il = 0; il < int(layers_.size()); ++il) {
      const Gemma3Layer& L = layers_[size_t(il)];
      const AttnConfig& ac = L.sliding ? local_ : global_;
      const RopeSpec& rope = L.sliding ? rope_local_ : rope_global_;
      Tensor h = ctx.name(rms_norm(ctx, x, L.attn_norm, eps_, kNormOffset), "attn_norm", il);
      Tensor a = self_attention(ctx, h, L.attn, ac, &rope, batch, kv, il);
      a = ctx.name(rms_norm(ctx, a, L.post_attn_norm, eps_, kNormOffset), "attn_post_norm", il);
      add_(ctx, x, a);
      h = ctx.name(rms_norm(ctx, x, L.ffn_norm, eps_, kNormOffset), "ffn_norm", il);
      Tensor m = ctx.name(gated_mlp(ctx, h, L.mlp, MlpAct::kGeluTanh), "ffn_out", il);
      m = ctx.name(rms_norm(ctx, m, L.post_ffn_norm, eps_, kNormOffset), "ffn_post_norm", il);
      add_(ctx, x, m);
      ctx.name(x, "l_out", il);
    }
    *logits = ctx.name(output_logits(ctx, x, out_norm_, eps_, kNormOffset, output_, batch, final_softcap_), "logits");
    return Status::ok();
  }

  OpSet ops_used() const override {
    OpSet s = decoder_block_ops();
    if (global_.softcap > 0.0f) s.set(size_t(Op::kAttentionSoftcap));
    if (final_softcap_ > 0.0f) s.set(size_t(Op::kSoftcap));  // output_logits' soft-cap
    return s;
  }

 private:
  float eps_ = 1e-6f, embd_scale_ = 1.0f, final_softcap_ = 0.0f;
  AttnConfig global_{}, local_{};
  RopeSpec rope_global_, rope_local_;
  Tensor tok_embd_, out_norm_, output_;  // output_ is tok_embd_ when tied
  std::vector<Gemma3Layer> layers_;
};

Result<std::unique_ptr<Model>> make_gemma3(const HfConfig& cfg, const WeightSource& w) {
  auto m = std::make_unique<Gemma3Model>();
  PIPIT_TRY(m->load(cfg, w));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace

PIPIT_REGISTER_MODEL("gemma3_text", make_gemma3);

}  // namespace pipit
