// Llama (Llama 2/3, SmolLM2, TinyLlama, stories260k). reference: HF modeling_llama.py (LlamaDecoderLayer,
// LlamaModel, LlamaForCausalLM).
#include "models/llama.h"

#include <cmath>

namespace pipit {

namespace {

struct LlamaLayer {
  Tensor attn_norm, ffn_norm;  // input_layernorm, post_attention_layernorm [n_embd]
  AttnWeights attn;
  MlpWeights mlp;
};

class LlamaModel : public Model {
 public:
  Status load(const HfConfig& cfg, const WeightSource& w, const LlamaOptions& opt) {
    const std::string model_type = cfg.model_type();
    const char* arch = model_type.c_str();
    PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, cfg.get_int("hidden_size"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_head, cfg.get_int("num_attention_heads"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_ff, cfg.get_int("intermediate_size"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_vocab, cfg.get_int("vocab_size"));
    const int64_t n_head_kv = cfg.get_int_or("num_key_value_heads", n_head);
    const int64_t head_dim = cfg.get_int_or("head_dim", n_head > 0 ? n_embd / n_head : 0);
    PIPIT_TRY(check_dims(arch, n_embd, n_head, n_head_kv, head_dim, n_ff, n_layer, n_vocab));
    eps_ = float(cfg.get_float_or("rms_norm_eps", 1e-6));
    if (cfg.get_bool_or("mlp_bias", false)) return Error::unsupported("[{}] mlp_bias = true is not supported", arch);
    if (!opt.use_rope.empty() && int64_t(opt.use_rope.size()) != n_layer)
      return Error::invalid_argument("[{}] {} per-layer RoPE flags for {} layers", arch, opt.use_rope.size(), n_layer);
    use_rope_ = opt.use_rope.empty() ? std::vector<bool>(size_t(n_layer), true) : opt.use_rope;

    attn_ = AttnConfig{n_embd, n_head, n_head_kv, head_dim, 1.0f / std::sqrt(float(head_dim)), eps_};
    PIPIT_ASSIGN_OR_RETURN(rope_, rope_from_config(cfg, head_dim));

    PIPIT_ASSIGN_OR_RETURN(tok_embd_, w.get("model.embed_tokens.weight", {n_vocab, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(out_norm_, w.get("model.norm.weight", {n_embd}));
    const bool tied = cfg.get_bool_or("tie_word_embeddings", false);
    if (w.has("lm_head.weight") || !tied) {
      PIPIT_ASSIGN_OR_RETURN(output_, w.get("lm_head.weight", {n_vocab, n_embd}));
    } else {
      output_ = tok_embd_;
    }
    for (int64_t il = 0; il < n_layer; ++il) {
      const std::string p = "model.layers." + std::to_string(il) + ".";
      LlamaLayer L;
      PIPIT_ASSIGN_OR_RETURN(L.attn_norm, w.get(p + "input_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.ffn_norm, w.get(p + "post_attention_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.attn, load_attn(w, p + "self_attn.", attn_, opt.qkv_bias, opt.qk_norm));
      PIPIT_ASSIGN_OR_RETURN(L.mlp, load_mlp(w, p + "mlp.", n_embd, n_ff));
      layers_.push_back(std::move(L));
    }
    fill_common_info(info_, cfg);
    info_.n_vocab = n_vocab;
    info_.n_embd = n_embd;
    info_.n_layer = n_layer;
    info_.kv = {int(n_layer), int(n_head_kv), int(head_dim)};
    return Status::ok();
  }

  Status forward(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits) override {
    Tensor x = ctx.name(input_embeddings(ctx, tok_embd_, batch), "embd");
    for (int il = 0; il < int(layers_.size()); ++il) {
      ArenaScope scope(*ctx.arena);  // the layer's activations are dead once x is updated
      const LlamaLayer& L = layers_[size_t(il)];
      Tensor h = ctx.name(rms_norm(ctx, x, L.attn_norm, eps_), "attn_norm", il);
      const RopeSpec* rope = use_rope_[size_t(il)] ? &rope_ : nullptr;
      Tensor a = ctx.name(self_attention(ctx, h, L.attn, attn_, rope, batch, kv, il), "attn_proj", il);
      add_(ctx, x, a);
      h = ctx.name(rms_norm(ctx, x, L.ffn_norm, eps_), "ffn_norm", il);
      Tensor m = ctx.name(gated_mlp(ctx, h, L.mlp, MlpAct::kSilu), "ffn_out", il);
      add_(ctx, x, m);
      ctx.name(x, "l_out", il);
    }
    *logits = ctx.name(output_logits(ctx, x, out_norm_, eps_, 0.0f, output_, batch), "logits");
    return Status::ok();
  }

 private:
  float eps_ = 1e-6f;
  AttnConfig attn_{};
  RopeSpec rope_;
  std::vector<bool> use_rope_;  // per layer
  Tensor tok_embd_, out_norm_, output_;
  std::vector<LlamaLayer> layers_;
};

Result<std::unique_ptr<Model>> make_llama(const HfConfig& cfg, const WeightSource& w) {
  return make_llama_like(cfg, w, LlamaOptions{});
}

}  // namespace

Result<std::unique_ptr<Model>> make_llama_like(const HfConfig& cfg, const WeightSource& w, const LlamaOptions& opt) {
  auto m = std::make_unique<LlamaModel>();
  PIPIT_TRY(m->load(cfg, w, opt));
  return std::unique_ptr<Model>(std::move(m));
}

PIPIT_REGISTER_MODEL("llama", make_llama);

}  // namespace pipit
