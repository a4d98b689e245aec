// Llama (Llama 2/3, SmolLM2, TinyLlama, stories260k). reference: HF modeling_llama.py (LlamaDecoderLayer,
// LlamaModel, LlamaForCausalLM).
#include "models/llama.h"

#include <algorithm>
#include <cmath>

namespace pipit {

namespace {

struct LlamaLayer {
  Tensor attn_norm, ffn_norm;  // input_layernorm, post_attention_layernorm [n_embd]
  AttnWeights attn;
  MlpWeights mlp;  // dense layers
  bool sparse = false;
  MoeWeights moe;  // sparse layers
};

class LlamaModel : public Model {
 public:
  Status load(const HfConfig& cfg, const WeightSource& w, const LlamaOptions& opt) {
    const std::string model_type = cfg.model_type();
    const char* arch = model_type.c_str();
    PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, cfg.get_int("hidden_size"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_head, cfg.get_int("num_attention_heads"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_vocab, cfg.get_int("vocab_size"));
    if (!opt.moe_layers.empty() && int64_t(opt.moe_layers.size()) != n_layer)
      return Error::invalid_argument("[{}] {} per-layer MoE flags for {} layers", arch, opt.moe_layers.size(), n_layer);
    const bool all_sparse = !opt.moe_layers.empty() &&
                            std::find(opt.moe_layers.begin(), opt.moe_layers.end(), false) == opt.moe_layers.end();
    int64_t n_ff = opt.n_ff_exp;  // only dense layers need intermediate_size
    if (!all_sparse) {
      PIPIT_ASSIGN_OR_RETURN(n_ff, cfg.get_int("intermediate_size"));
    }
    const int64_t n_head_kv = cfg.get_int_or("num_key_value_heads", n_head);
    const int64_t head_dim = cfg.get_int_or("head_dim", n_head > 0 ? n_embd / n_head : 0);
    PIPIT_TRY(check_dims(arch, n_embd, n_head, n_head_kv, head_dim, n_ff, n_layer, n_vocab));
    eps_ = float(cfg.get_float_or("rms_norm_eps", 1e-6));
    if (cfg.get_bool_or("mlp_bias", false)) return Error::unsupported("[{}] mlp_bias = true is not supported", arch);
    if (!opt.use_rope.empty() && int64_t(opt.use_rope.size()) != n_layer)
      return Error::invalid_argument("[{}] {} per-layer RoPE flags for {} layers", arch, opt.use_rope.size(), n_layer);
    use_rope_ = opt.use_rope.empty() ? std::vector<bool>(size_t(n_layer), true) : opt.use_rope;

    attn_ = AttnConfig{n_embd, n_head, n_head_kv, head_dim, 1.0f / std::sqrt(float(head_dim)), eps_};
    if (opt.rope) {
      rope_ = *opt.rope;
    } else {
      PIPIT_ASSIGN_OR_RETURN(rope_, rope_from_config(cfg, head_dim));
    }
    embd_scale_ = opt.embd_scale;
    residual_scale_ = opt.residual_scale;
    logit_scale_ = opt.logit_scale;
    max_pos_ = opt.max_pos;
    deepstack_ = opt.deepstack;
    moe_ = opt.moe;

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
      L.sparse = !opt.moe_layers.empty() && opt.moe_layers[size_t(il)];
      if (L.sparse) {
        PIPIT_ASSIGN_OR_RETURN(L.moe, load_moe(w, p + "mlp.", n_embd, opt.n_ff_exp, opt.moe.n_expert,
                                               opt.n_ff_shared));
      } else {
        PIPIT_ASSIGN_OR_RETURN(L.mlp, load_mlp(w, p + "mlp.", n_embd, n_ff));
      }
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
    if (max_pos_ > 0)
      for (int32_t p : batch.pos)
        if (p >= max_pos_)
          return Error::out_of_range("[{}] position {} is past max_position_embeddings {}: the RoPE table of this "
                                     "model ends there (raise it in config.json to extend the context)",
                                     info_.arch, p, max_pos_);
    Tensor x = input_embeddings(ctx, tok_embd_, batch);
    if (embd_scale_ != 1.0f) scale_(ctx, x, embd_scale_);
    ctx.name(x, "embd");
    for (int il = 0; il < int(layers_.size()); ++il) {
      ArenaScope scope(*ctx.arena);  // the layer's activations are dead once x is updated
      const LlamaLayer& L = layers_[size_t(il)];
      Tensor h = ctx.name(rms_norm(ctx, x, L.attn_norm, eps_), "attn_norm", il);
      const RopeSpec* rope = use_rope_[size_t(il)] ? &rope_ : nullptr;
      Tensor a = ctx.name(self_attention(ctx, h, L.attn, attn_, rope, batch, kv, il), "attn_proj", il);
      if (residual_scale_ != 1.0f) scale_(ctx, a, residual_scale_);
      add_(ctx, x, a);
      h = ctx.name(rms_norm(ctx, x, L.ffn_norm, eps_), "ffn_norm", il);
      Tensor m = ctx.name(L.sparse ? moe_mlp(ctx, h, L.moe, moe_, il) : gated_mlp(ctx, h, L.mlp, MlpAct::kSilu),
                          "ffn_out", il);
      if (residual_scale_ != 1.0f) scale_(ctx, m, residual_scale_);
      add_(ctx, x, m);
      if (deepstack_) add_deepstack_(ctx, x, batch, il);
      ctx.name(x, "l_out", il);
    }
    Tensor out = output_logits(ctx, x, out_norm_, eps_, 0.0f, output_, batch);
    if (logit_scale_ != 1.0f) scale_(ctx, out, logit_scale_);
    *logits = ctx.name(out, "logits");
    return Status::ok();
  }

  OpSet ops_used() const override {
    OpSet s = decoder_block_ops();
    for (const LlamaLayer& L : layers_)
      if (L.sparse) s |= moe_ops_used();
    return s;
  }

 private:
  float eps_ = 1e-6f;
  float embd_scale_ = 1.0f, residual_scale_ = 1.0f, logit_scale_ = 1.0f;
  int64_t max_pos_ = 0;
  bool deepstack_ = false;
  MoeConfig moe_{};
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
