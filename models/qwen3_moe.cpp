// Qwen3-MoE: the Qwen3 decoder (GQA, q/k RMSNorm before RoPE, no qkv bias) whose MLP is a sparse mixture of
// experts on every decoder_sparse_step-th layer not listed in mlp_only_layers (the others keep a dense MLP).
// reference: HF modeling_qwen3_moe.py (Qwen3MoeDecoderLayer, Qwen3MoeSparseMoeBlock, Qwen3MoeForCausalLM) and
// configuration_qwen3_moe.py (defaults: norm_topk_prob false, decoder_sparse_step 1, mlp_only_layers []).
#include <algorithm>
#include <cmath>

#include "models/moe.h"

namespace pipit {

namespace {

struct Qwen3MoeLayer {
  Tensor attn_norm, ffn_norm;  // input_layernorm, post_attention_layernorm [n_embd]
  AttnWeights attn;
  bool sparse;    // MoE block, or a dense MLP (mlp_only_layers)
  MoeWeights moe;
  MlpWeights mlp;
};

class Qwen3MoeModel : public Model {
 public:
  Status load(const HfConfig& cfg, const WeightSource& w) {
    const char* arch = "qwen3_moe";
    PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, cfg.get_int("hidden_size"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_head, cfg.get_int("num_attention_heads"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_vocab, cfg.get_int("vocab_size"));
    PIPIT_ASSIGN_OR_RETURN(moe_.n_expert, cfg.get_int("num_experts"));
    PIPIT_ASSIGN_OR_RETURN(moe_.n_expert_used, cfg.get_int("num_experts_per_tok"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_ff_exp, cfg.get_int("moe_intermediate_size"));
    moe_.norm_topk_prob = cfg.get_bool_or("norm_topk_prob", false);
    const int64_t n_head_kv = cfg.get_int_or("num_key_value_heads", n_head);
    const int64_t head_dim = cfg.get_int_or("head_dim", n_head > 0 ? n_embd / n_head : 0);
    PIPIT_TRY(check_dims(arch, n_embd, n_head, n_head_kv, head_dim, n_ff_exp, n_layer, n_vocab));
    if (moe_.n_expert <= 0 || moe_.n_expert_used <= 0 || moe_.n_expert_used > moe_.n_expert)
      return Error::invalid_argument("[{}] num_experts_per_tok {} must be in [1, num_experts {}]", arch,
                                     moe_.n_expert_used, moe_.n_expert);
    const std::string act = cfg.get_string_or("hidden_act", "silu");
    if (act != "silu") return Error::unsupported("[{}] hidden_act '{}' (only silu is supported)", arch, act);
    if (cfg.get_bool_or("use_sliding_window", false))
      return Error::unsupported("[{}] use_sliding_window = true is not supported", arch);
    eps_ = float(cfg.get_float_or("rms_norm_eps", 1e-6));

    // which layers are sparse: HF (layer_idx not in mlp_only_layers) and (layer_idx + 1) % decoder_sparse_step == 0
    const int64_t step = cfg.get_int_or("decoder_sparse_step", 1);
    if (step <= 0) return Error::invalid_argument("[{}] decoder_sparse_step {} must be positive", arch, step);
    const std::vector<int64_t> mlp_only = cfg.get_int_list("mlp_only_layers");
    auto is_sparse = [&](int64_t il) {
      return std::find(mlp_only.begin(), mlp_only.end(), il) == mlp_only.end() && (il + 1) % step == 0;
    };
    int64_t n_ff = 0;  // only dense layers need intermediate_size
    for (int64_t il = 0; il < n_layer; ++il)
      if (!is_sparse(il)) {
        PIPIT_ASSIGN_OR_RETURN(n_ff, cfg.get_int("intermediate_size"));
        break;
      }

    attn_ = AttnConfig{n_embd, n_head, n_head_kv, head_dim, float(1.0 / std::sqrt(double(head_dim))), eps_};
    PIPIT_ASSIGN_OR_RETURN(rope_, rope_from_config(cfg, head_dim));
    PIPIT_ASSIGN_OR_RETURN(tok_embd_, w.get("model.embed_tokens.weight", {n_vocab, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(out_norm_, w.get("model.norm.weight", {n_embd}));
    if (w.has("lm_head.weight") || !cfg.get_bool_or("tie_word_embeddings", false)) {
      PIPIT_ASSIGN_OR_RETURN(output_, w.get("lm_head.weight", {n_vocab, n_embd}));
    } else {
      output_ = tok_embd_;
    }
    for (int64_t il = 0; il < n_layer; ++il) {
      const std::string p = "model.layers." + std::to_string(il) + ".";
      Qwen3MoeLayer L;
      PIPIT_ASSIGN_OR_RETURN(L.attn_norm, w.get(p + "input_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.ffn_norm, w.get(p + "post_attention_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.attn, load_attn(w, p + "self_attn.", attn_, cfg.get_bool_or("attention_bias", false),
                                               /*need_qk_norm=*/true));
      L.sparse = is_sparse(il);
      if (L.sparse) {
        PIPIT_ASSIGN_OR_RETURN(L.moe, load_moe(w, p + "mlp.", n_embd, n_ff_exp, moe_.n_expert));
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
    Tensor x = ctx.name(embedding(ctx, tok_embd_, batch.tokens), "embd");
    for (int il = 0; il < int(layers_.size()); ++il) {
      const Qwen3MoeLayer& L = layers_[size_t(il)];
      Tensor h = ctx.name(rms_norm(ctx, x, L.attn_norm, eps_), "attn_norm", il);
      Tensor a = ctx.name(self_attention(ctx, h, L.attn, attn_, &rope_, batch, kv, il), "attn_proj", il);
      add_(ctx, x, a);
      h = ctx.name(rms_norm(ctx, x, L.ffn_norm, eps_), "ffn_norm", il);
      Tensor m = L.sparse ? moe_mlp(ctx, h, L.moe, moe_, il) : gated_mlp(ctx, h, L.mlp, MlpAct::kSilu);
      add_(ctx, x, ctx.name(m, "ffn_out", il));
      ctx.name(x, "l_out", il);
    }
    *logits = ctx.name(output_logits(ctx, x, out_norm_, eps_, 0.0f, output_, batch), "logits");
    return Status::ok();
  }

 private:
  float eps_ = 1e-6f;
  AttnConfig attn_{};
  MoeConfig moe_{};
  RopeSpec rope_;
  Tensor tok_embd_, out_norm_, output_;
  std::vector<Qwen3MoeLayer> layers_;
};

Result<std::unique_ptr<Model>> make_qwen3_moe(const HfConfig& cfg, const WeightSource& w) {
  auto m = std::make_unique<Qwen3MoeModel>();
  PIPIT_TRY(m->load(cfg, w));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace

PIPIT_REGISTER_MODEL("qwen3_moe", make_qwen3_moe);

}  // namespace pipit
