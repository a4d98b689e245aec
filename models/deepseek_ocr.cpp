// DeepSeek-OCR's language decoder ("DeepSeek-3B-MoE"; model_type deepseek_vl_v2, DeepseekOCRForCausalLM, remote
// code modeling_deepseekocr.py + modeling_deepseekv2.py), text-only: DeepSeek-V2's MoE decoder with use_mla = false.
//   * attention: ATTENTION_CLASSES["mha_eager"] = transformers' LlamaAttention (head_dim = hidden / heads, RoPE on
//     halves with rope_theta, scores / sqrt(head_dim)) — not the MLA class and not its interleaved RoPE;
//   * layers < first_k_dense_replace (and those with layer_idx % moe_layer_freq != 0): dense SwiGLU MLP;
//   * the others: DeepseekV2MoE — softmax over all n_routed_experts in f32, greedy top-k, no renormalisation unless
//     norm_topk_prob, weights times routed_scaling_factor, plus shared_experts (one SwiGLU MLP of width
//     moe_intermediate_size * n_shared_experts) on every token;
//   * RMSNorm, untied lm_head.
// So it is the Llama graph with MoE layers: this file parses the config and sets those options.
// reference: ../shared/testdata/reference/deepseek_ocr.py and the README of deepseek_ocr_lm (remote code followed,
// DeepseekV2Config defaults used where the real config is silent: norm_topk_prob false, routed_scaling_factor 1,
// scoring_func softmax, rope_theta 10000, rms_norm_eps 1e-6).
//
// The fields may sit at the top level of config.json (DeepseekOCRConfig inherits DeepseekV2Config) or in its
// "language_config"; as the remote code reads the top level first, a top-level value wins.
//
// With a vision tower (a checkpoint with model.sam_model.* or a config with vision_config), the model is the whole
// DeepseekOCRForCausalLM: the DeepEncoder (models/vision/deepseek_ocr_vision.h) turns each image into rows that
// replace its <image> tokens in the order the remote code's masked_scatter_ gives them (tiles, global view,
// separator; every image token has the same id, so the id layout only fixes their count). Plain positions.
// Without one (a decoder-only checkpoint), token ids only.
#include "models/chat_format.h"
#include "models/llama.h"
#include "models/recipe_rules.h"
#include "models/vision/deepseek_ocr_vision.h"
#include "models/vision/vision_model.h"

namespace pipit {

namespace {

// language_config overlaid with the top-level fields (top level wins), minus the other sub-configs.
HfConfig language_config(const HfConfig& cfg) {
  nlohmann::json j = cfg.has("language_config") && cfg.json()["language_config"].is_object()
                         ? cfg.json()["language_config"]
                         : nlohmann::json::object();
  for (const auto& [k, v] : cfg.json().items()) {
    if (k == "language_config" || k == "vision_config" || k == "projector_config" || v.is_null()) continue;
    j[k] = v;
  }
  return HfConfig(j);
}

Result<std::unique_ptr<Model>> make_deepseek_ocr_lm(const HfConfig& full, const WeightSource& w) {
  const char* arch = "deepseek_vl_v2";
  const HfConfig cfg = language_config(full);
  // DeepseekV2Config's default is use_mla = true (DeepSeek-VL2's decoders); only DeepSeek-OCR's MHA decoder is here
  if (cfg.get_bool_or("use_mla", true))
    return Error::unsupported("[{}] use_mla = true (multi-head latent attention, DeepSeek-VL2) is not supported: "
                              "only DeepSeek-OCR's decoder with use_mla = false is", arch);
  if (cfg.has("rope_scaling"))
    return Error::unsupported("[{}] rope_scaling is not supported (DeepSeek-OCR's decoder has none)", arch);
  if (cfg.get_bool_or("attention_bias", false))
    return Error::unsupported("[{}] attention_bias = true is not supported", arch);
  const std::string act = cfg.get_string_or("hidden_act", "silu");
  if (act != "silu") return Error::unsupported("[{}] hidden_act '{}' (only silu is supported)", arch, act);
  PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, cfg.get_int("hidden_size"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, cfg.get_int("num_attention_heads"));
  if (n_embd <= 0 || n_head <= 0 || n_embd % n_head)
    return Error::invalid_argument("[{}] hidden_size {} must be a positive multiple of num_attention_heads {}", arch,
                                   n_embd, n_head);

  LlamaOptions opt;
  if (cfg.has("n_routed_experts")) {  // DeepseekV2Config: n_routed_experts None -> no MoE layer at all
    PIPIT_ASSIGN_OR_RETURN(opt.moe.n_expert, cfg.get_int("n_routed_experts"));
    PIPIT_ASSIGN_OR_RETURN(opt.moe.n_expert_used, cfg.get_int("num_experts_per_tok"));
    PIPIT_ASSIGN_OR_RETURN(opt.n_ff_exp, cfg.get_int("moe_intermediate_size"));
    if (opt.moe.n_expert <= 0 || opt.moe.n_expert_used <= 0 || opt.moe.n_expert_used > opt.moe.n_expert)
      return Error::invalid_argument("[{}] num_experts_per_tok {} must be in [1, n_routed_experts {}]", arch,
                                     opt.moe.n_expert_used, opt.moe.n_expert);
    if (opt.n_ff_exp <= 0)
      return Error::invalid_argument("[{}] moe_intermediate_size {} must be positive", arch, opt.n_ff_exp);
    const int64_t n_shared = cfg.get_int_or("n_shared_experts", 0);
    if (n_shared < 0) return Error::invalid_argument("[{}] n_shared_experts {} must be >= 0", arch, n_shared);
    opt.n_ff_shared = opt.n_ff_exp * n_shared;
    const std::string scoring = cfg.get_string_or("scoring_func", "softmax");
    if (scoring != "softmax")
      return Error::unsupported("[{}] scoring_func '{}' is not supported (softmax is)", arch, scoring);
    const std::string topk = cfg.get_string_or("topk_method", "greedy");
    if (topk != "greedy")
      return Error::unsupported("[{}] topk_method '{}' is not supported (greedy is)", arch, topk);
    // DeepseekV2MoE renormalises only when top_k > 1 (one expert's weight stays its probability)
    opt.moe.norm_topk_prob = cfg.get_bool_or("norm_topk_prob", false) && opt.moe.n_expert_used > 1;
    opt.moe.routed_scaling_factor = float(cfg.get_float_or("routed_scaling_factor", 1.0));
    const int64_t first_dense = cfg.get_int_or("first_k_dense_replace", 0);
    const int64_t freq = cfg.get_int_or("moe_layer_freq", 1);
    if (first_dense < 0 || freq <= 0)
      return Error::invalid_argument("[{}] first_k_dense_replace {} must be >= 0 and moe_layer_freq {} > 0", arch,
                                     first_dense, freq);
    for (int64_t il = 0; il < n_layer; ++il) opt.moe_layers.push_back(il >= first_dense && il % freq == 0);
  }

  nlohmann::json j = cfg.json();
  j["model_type"] = arch;
  j["head_dim"] = n_embd / n_head;  // LlamaAttention of transformers 4.46: hidden_size // num_heads
  if (!cfg.has("rope_theta")) j["rope_theta"] = 10000.0;
  if (!cfg.has("tie_word_embeddings")) j["tie_word_embeddings"] = false;
  if (!cfg.has("max_position_embeddings")) j["max_position_embeddings"] = 2048;  // DeepseekV2Config default
  return make_llama_like(HfConfig(j), w, opt);
}

// The remote code's constant: the <image> id of DeepSeek-OCR's tokenizer (infer(): image_token_id = 128815).
constexpr int64_t kImageTokenId = 128815;

class DeepseekOcrModel : public Model, public VisionLanguageModel {
 public:
  Status load(const HfConfig& cfg, const WeightSource& w) {
    PIPIT_ASSIGN_OR_RETURN(lm_, make_deepseek_ocr_lm(cfg, w));
    info_ = lm_->info();
    // infer() generates with no_repeat_ngram_size=20: long greedy OCR output (tables) drifts without it
    info_.no_repeat_ngram_size = 20;
    auto enc = DeepEncoder::load(cfg, w.host(), info_.n_embd);
    if (!enc.is_ok()) return enc.status().with_context("[deepseek_vl_v2] vision tower");
    encoder_ = std::move(enc).value();
    // image_token_id is not in the real config.json (the remote code hard-codes it); a checkpoint with a smaller
    // vocabulary (the tiny test model) names its own
    tokens_.image_token_id = int32_t(cfg.get_int_or("image_token_id", kImageTokenId));
    if (tokens_.image_token_id < 0 || tokens_.image_token_id >= info_.n_vocab)
      return Error::invalid_argument("[deepseek_vl_v2] image_token_id {} outside the vocabulary of {}",
                                     tokens_.image_token_id, info_.n_vocab);
    return Status::ok();
  }

  Status forward(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits) override {
    return lm_->forward(ctx, batch, kv, logits);
  }
  const VisionLanguageModel* vision() const override { return this; }

  ImageProcessorConfig default_processor() const override {
    ImageProcessorConfig p;  // infer()'s defaults: Gundam (base 1024, tiles 640, crop mode), mean = std = 0.5
    p.kind = "deepseek_ocr";
    p.mean = {0.5f, 0.5f, 0.5f};
    p.std = {0.5f, 0.5f, 0.5f};
    p.resample = ResampleFilter::kBicubic;  // PIL's default for Image.resize and ImageOps.pad
    return p;
  }
  Status check_processor(const ImageProcessorConfig& p) const override {
    if (p.kind != "deepseek_ocr")
      return Error::invalid_argument("[deepseek_vl_v2] needs DeepSeek-OCR's image preprocessing");
    for (int s : {p.base_size, p.image_size})
      if (s < 64 || s % 64)  // 16 px patches, then two stride-2 convs: whole tokens only
        return Error::invalid_argument("[deepseek_vl_v2] view size {} must be a positive multiple of 64", s);
    if (p.crop_mode && p.image_size != 640)  // infer() always cuts 640 px tiles but counts tokens by image_size
      return Error::invalid_argument("[deepseek_vl_v2] crop mode needs image_size 640 (the remote code's tile size), "
                                     "not {}", p.image_size);
    return Status::ok();
  }
  int64_t n_image_tokens(const ProcessedImage& img) const override { return DeepEncoder::n_tokens(img); }
  Result<Tensor> encode_image(Ctx& ctx, const ProcessedImage& img) const override {
    return encoder_.encode(ctx, img);
  }

  OpSet ops_used() const override { return lm_->ops_used(); }  // the vision tower runs on the CPU

 private:
  std::unique_ptr<Model> lm_;
  DeepEncoder encoder_;
};

Result<std::unique_ptr<Model>> make_deepseek_ocr(const HfConfig& cfg, const WeightSource& w) {
  if (!cfg.has("vision_config") && !w.has("model.sam_model.patch_embed.proj.weight"))
    return make_deepseek_ocr_lm(cfg, w);  // the decoder alone
  auto m = std::make_unique<DeepseekOcrModel>();
  PIPIT_TRY(m->load(cfg, w));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace

PIPIT_REGISTER_MODEL("deepseek_vl_v2", make_deepseek_ocr);
// The decoder's MoE layers take the quantization recipe's MoE rules (models/recipe_rules.h moe_recipe_rules): the
// router (mlp.gate) keeps its source dtype under q8 / q4, the attention is q8_0 under q4, in a checkpoint with routed
// experts.
static FamilyRecipeRegistrar kDeepseekOcrRecipe({"deepseek_vl_v2"}, {},
                                                moe_recipe_rules(".mlp.gate.weight", ".mlp.experts."));

// infer()'s prompt format for a conversation: format_messages(sft_format='plain') joins the messages' contents with
// empty separators and no role names, strips the whole, and the text is encoded without special tokens after BOS 0.
// The real tokenizer ships no chat template, so this is the chat format of `pipit chat` / the server. An image part
// becomes "<image>\n": every prompt the model card documents starts that way ("<image>\nFree OCR.").
static ::pipit::ChatTemplateRegistrar kPlainFormat(
    "deepseek_vl_v2",
    "{%- set ns = namespace(text='') -%}"
    "{%- for m in messages -%}"
    "{%- if m['content'] is string -%}{%- set ns.text = ns.text + m['content'] -%}"
    "{%- else -%}{%- for p in m['content'] -%}"
    "{%- if p['type'] == 'image' -%}{%- set ns.text = ns.text + '<image>\n' -%}"
    "{%- elif p['type'] == 'text' -%}{%- set ns.text = ns.text + p['text'] -%}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endfor -%}"
    "{{- bos_token + (ns.text | trim) -}}");

}  // namespace pipit
