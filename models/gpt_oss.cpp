// GPT-OSS (model_type gpt_oss, GptOssForCausalLM): a pre-norm decoder whose layers alternate sliding-window and full
// attention (layer_types), with q/k/v/o biases, one learned attention-sink logit per head, YaRN RoPE, and a sparse
// MoE MLP on every layer: a router with bias picks the top-k experts by raw logit and softmaxes those k; each expert
// is a fused gate/up projection (rows interleaved: gate j, up j) with bias, a clamped SwiGLU
// (up + 1) * g * sigmoid(alpha g) with g = min(gate, limit), up in [-limit, limit], and a down projection with bias.
// Experts come as bf16 or MXFP4 (the Hub's format; kept as mxfp4 blocks and run by the integer kernels).
// reference: HF modeling_gpt_oss.py (GptOssRMSNorm, GptOssAttention + eager_attention_forward with sinks,
// GptOssTopKRouter, GptOssExperts, GptOssDecoderLayer) and configuration_gpt_oss.py (defaults: layer_types even =
// sliding, attention_bias true, swiglu_limit 7.0, alpha 1.702).
#include <cmath>

#include "core/host_f32.h"
#include "models/moe.h"
#include "models/layer_types.h"
#include "models/recipe_rules.h"

namespace pipit {

namespace {

struct GptOssLayer {
  bool sliding;                // layer_types[il] == "sliding_attention"
  Tensor attn_norm, ffn_norm;  // input_layernorm, post_attention_layernorm [n_embd]
  AttnWeights attn;            // with q/k/v/o biases
  std::vector<float> sinks;    // self_attn.sinks [n_head]
  Tensor router, router_bias;  // mlp.router.{weight [E, n_embd], bias [E]}
  Tensor gate_up, gate_up_bias;  // [E, 2 n_ff, n_embd] (rows interleaved gate/up), [E, 2 n_ff]
  Tensor down, down_bias;        // [E, n_embd, n_ff], [E, n_embd]
};

class GptOssModel : public Model {
 public:
  Status load(const HfConfig& cfg, const WeightSource& w) {
    const char* arch = "gpt_oss";
    PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, cfg.get_int("hidden_size"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_head, cfg.get_int("num_attention_heads"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_vocab, cfg.get_int("vocab_size"));
    PIPIT_ASSIGN_OR_RETURN(n_ff_, cfg.get_int("intermediate_size"));
    PIPIT_ASSIGN_OR_RETURN(n_expert_, cfg.get_int("num_local_experts"));
    PIPIT_ASSIGN_OR_RETURN(n_used_, cfg.get_int("num_experts_per_tok"));
    const int64_t n_head_kv = cfg.get_int_or("num_key_value_heads", n_head);
    const int64_t head_dim = cfg.get_int_or("head_dim", n_head > 0 ? n_embd / n_head : 0);
    PIPIT_TRY(check_dims(arch, n_embd, n_head, n_head_kv, head_dim, n_ff_, n_layer, n_vocab));
    if (n_expert_ <= 0 || n_used_ <= 0 || n_used_ > n_expert_)
      return Error::invalid_argument("[gpt_oss] num_experts_per_tok {} must be in [1, num_local_experts {}]", n_used_,
                                     n_expert_);
    eps_ = float(cfg.get_float_or("rms_norm_eps", 1e-5));
    alpha_ = float(cfg.get_float_or("swiglu_alpha", 1.702));
    limit_ = float(cfg.get_float_or("swiglu_limit", 7.0));
    const int64_t window = cfg.get_int_or("sliding_window", 128);
    if (window <= 0) return Error::invalid_argument("[gpt_oss] sliding_window {} must be positive", window);

    // layer_types, or HF's default: even layers sliding, odd layers full
    PIPIT_ASSIGN_OR_RETURN(const std::vector<bool> sliding,
                           layer_kinds(cfg, "gpt_oss", n_layer, "sliding_attention", "full_attention",
                                       [](int64_t il) { return il % 2 == 0; }));

    full_ = AttnConfig{n_embd, n_head, n_head_kv, head_dim, float(1.0 / std::sqrt(double(head_dim))), eps_};
    local_ = full_;
    local_.window = int(window);
    if (!cfg.has("rope_theta") && !cfg.has("rope_parameters")) {  // GptOssConfig's default base
      nlohmann::json j = cfg.json();
      j["rope_theta"] = 150000.0;
      PIPIT_ASSIGN_OR_RETURN(rope_, rope_from_config(HfConfig(j), head_dim));
    } else {
      PIPIT_ASSIGN_OR_RETURN(rope_, rope_from_config(cfg, head_dim));
    }
    PIPIT_ASSIGN_OR_RETURN(tok_embd_, w.get("model.embed_tokens.weight", {n_vocab, n_embd}));
    PIPIT_ASSIGN_OR_RETURN(out_norm_, w.get("model.norm.weight", {n_embd}));
    if (w.has("lm_head.weight") || !cfg.get_bool_or("tie_word_embeddings", false)) {
      PIPIT_ASSIGN_OR_RETURN(output_, w.get("lm_head.weight", {n_vocab, n_embd}));
    } else {
      output_ = tok_embd_;
    }
    const int64_t E = n_expert_;
    std::vector<int> kv_window;
    for (int64_t il = 0; il < n_layer; ++il) {
      const std::string p = "model.layers." + std::to_string(il) + ".";
      GptOssLayer L;
      L.sliding = sliding[size_t(il)];
      PIPIT_ASSIGN_OR_RETURN(L.attn_norm, w.get(p + "input_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.ffn_norm, w.get(p + "post_attention_layernorm.weight", {n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.attn, load_attn(w, p + "self_attn.", full_, cfg.get_bool_or("attention_bias", true),
                                               /*need_qk_norm=*/false));
      PIPIT_ASSIGN_OR_RETURN(Tensor sinks, w.get(p + "self_attn.sinks", {n_head}));
      PIPIT_ASSIGN_OR_RETURN(L.sinks, host_f32_values(sinks));
      // a config whose expert count disagrees with the file: say so rather than only report a shape
      const std::string router = p + "mlp.router.weight";
      if (w.has(router)) {
        PIPIT_ASSIGN_OR_RETURN(Tensor r, w.find(router));
        if (r.ndim() == 2 && r.dim(0) != E)
          return Error::invalid_argument("[gpt_oss] num_local_experts is {} but {} has {} experts (shape {})", E,
                                         router, r.dim(0), r.shape_str());
      }
      PIPIT_ASSIGN_OR_RETURN(L.router, w.get(router, {E, n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.router_bias, w.get(p + "mlp.router.bias", {E}));
      const std::string ex = p + "mlp.experts.";
      if (!w.has(ex + "gate_up_proj.weight") && w.has(ex + "gate_up_proj_scales"))
        return Error::not_found("[load] missing tensor '{}gate_up_proj_blocks' (MXFP4 experts)", ex);
      PIPIT_ASSIGN_OR_RETURN(L.gate_up, w.get(ex + "gate_up_proj.weight", {E, 2 * n_ff_, n_embd}));
      PIPIT_ASSIGN_OR_RETURN(L.gate_up_bias, w.get(ex + "gate_up_proj_bias", {E, 2 * n_ff_}));
      PIPIT_ASSIGN_OR_RETURN(L.down, w.get(ex + "down_proj.weight", {E, n_embd, n_ff_}));
      PIPIT_ASSIGN_OR_RETURN(L.down_bias, w.get(ex + "down_proj_bias", {E, n_embd}));
      if (dtype_is_quantized(L.gate_up.dtype()) && (n_embd % kQBlock || n_ff_ % kQBlock))
        return Error::invalid_argument("[gpt_oss] quantized experts need hidden_size {} and intermediate_size {} to "
                                       "be multiples of {}", n_embd, n_ff_, kQBlock);
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
    PIPIT_TRY(check_batch_fits("gpt_oss", batch, kv));
    Tensor x = ctx.name(input_embeddings(ctx, tok_embd_, batch), "embd");
    for (int il = 0; il < int(layers_.size()); ++il) {
      ArenaScope scope(*ctx.arena);  // the layer's activations are dead once x is updated
      const GptOssLayer& L = layers_[size_t(il)];
      AttnConfig ac = L.sliding ? local_ : full_;
      ac.sinks = L.sinks.data();
      Tensor h = ctx.name(rms_norm(ctx, x, L.attn_norm, eps_), "attn_norm", il);
      Tensor a = ctx.name(self_attention(ctx, h, L.attn, ac, &rope_, batch, kv, il), "attn_proj", il);
      add_(ctx, x, a);
      h = ctx.name(rms_norm(ctx, x, L.ffn_norm, eps_), "ffn_norm", il);
      Tensor m = ctx.name(moe(ctx, h, L, il), "ffn_out", il);
      add_(ctx, x, m);
      ctx.name(x, "l_out", il);
    }
    *logits = ctx.name(output_logits(ctx, x, out_norm_, eps_, 0.0f, output_, batch), "logits");
    return Status::ok();
  }

  OpSet ops_used() const override {
    return decoder_block_ops() | moe_ops_used() | op_set({Op::kAttentionSinks, Op::kSwigluClamped});
  }

 private:
  // HF GptOssMLP: router logits = x W^T + b; top-k by logit (ties: the lower expert); softmax over the k kept
  // logits; the experts' outputs summed with those weights (the down bias is weighted too).
  Tensor moe(Ctx& ctx, const Tensor& x, const GptOssLayer& L, int il) const {
    Tensor logits = ctx.name(linear(ctx, x, L.router, L.router_bias), "moe_router_logits", il);
    const MoeRoutes r = moe_route(ctx, logits, {.k = n_used_, .order = MoeOrder::kTopKSoftmax});
    return moe_dispatch(ctx, x, r, n_expert_, x.dim(1), [&](Ctx& c, const Tensor& xe, int64_t e) {
      Tensor gu = linear(c, xe, L.gate_up.select(0, e), L.gate_up_bias.select(0, e));
      // HF GptOssExperts: gate = gu[..., ::2].clamp(max=limit), up = gu[..., 1::2].clamp(-limit, limit),
      // (up + 1) * gate * sigmoid(gate * alpha), in f32
      Tensor act = swiglu_clamped(c, gu, alpha_, limit_);
      return linear(c, act, L.down.select(0, e), L.down_bias.select(0, e));
    });
  }

  float eps_ = 1e-5f, alpha_ = 1.702f, limit_ = 7.0f;
  int64_t n_ff_ = 0, n_expert_ = 0, n_used_ = 0;
  AttnConfig full_{}, local_{};
  RopeSpec rope_;
  Tensor tok_embd_, out_norm_, output_;
  std::vector<GptOssLayer> layers_;
};

Result<std::unique_ptr<Model>> make_gpt_oss(const HfConfig& cfg, const WeightSource& w) {
  auto m = std::make_unique<GptOssModel>();
  PIPIT_TRY(m->load(cfg, w));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace

PIPIT_REGISTER_MODEL("gpt_oss", make_gpt_oss);
// The quantization recipe's rules for GPT-OSS (convert/recipe.h rule 4):
//  - under q4 the stacked experts [E, out, in] of a bf16 checkpoint become mxfp4: they are the dequantized MXFP4 the
//    model ships as, which mxfp4 (4.25 bits, ggml's rounding = the Hub packing's exponent rule) gives back exactly,
//    where q4_0 would not (experts shipped as mxfp4 are kept as they are by the general rules);
//  - the MoE rules (models/recipe_rules.h moe_recipe_rules, with their reasons): the router (mlp.router) keeps
//    its source dtype under q8 / q4, the attention is q8_0 under q4.
static FamilyRecipeRegistrar kGptOssRecipe(
    {"gpt_oss"},
    {{.label = "stacked experts under q4 -> mxfp4", .contains = {".mlp.experts."}, .ndim = 3, .quants = {"q4_0"},
      .gives = RuleGives::kMxfp4}},
    moe_recipe_rules(".mlp.router.weight", ".mlp.experts."));

}  // namespace pipit
