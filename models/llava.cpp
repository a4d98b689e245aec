// LLaVA (1.5 layout): a CLIP ViT + 2-layer projector (models/vision/clip_vision) whose features replace the
// <image> tokens of a Llama-family decoder (text_config: llama, mistral or qwen2); plain positions.
// reference: HF modeling_llava.py (LlavaForConditionalGeneration), processing_llava.py (image token count).
#include "models/llama.h"
#include "models/vision/clip_vision.h"
#include "models/vision/vision_model.h"

namespace pipit {

namespace {

class LlavaModel : public Model, public VisionLanguageModel {
 public:
  Status load(const HfConfig& cfg, const WeightSource& base) {
    // llava-hf Hub names, or those of transformers >= 4.52 (model.language_model.*, model.vision_tower.*, ...)
    AliasedWeights w(base, {{"model.", {"language_model.model.", "model.language_model."}},
                            {"lm_head.", {"language_model.lm_head.", "lm_head."}},
                            {"vision_tower.", {"vision_tower.", "model.vision_tower."}},
                            {"multi_modal_projector.", {"multi_modal_projector.", "model.multi_modal_projector."}}});
    // LlamaConfig defaults: llava-hf configs often list only what differs from them
    const nlohmann::json llama_defaults = {{"model_type", "llama"}, {"vocab_size", 32000}, {"hidden_size", 4096},
                                           {"intermediate_size", 11008}, {"num_hidden_layers", 32},
                                           {"num_attention_heads", 32}, {"max_position_embeddings", 2048},
                                           {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}};
    nlohmann::json text = cfg.json().contains("text_config") && cfg.json()["text_config"].is_object()
                              ? cfg.json()["text_config"] : nlohmann::json::object();
    for (auto it = llama_defaults.begin(); it != llama_defaults.end(); ++it)
      if (!text.contains(it.key()) || text[it.key()].is_null()) text[it.key()] = it.value();
    if (!text.contains("tie_word_embeddings")) text["tie_word_embeddings"] = cfg.get_bool_or("tie_word_embeddings", false);
    const HfConfig tc(text);
    const std::string lm_type = tc.model_type();
    if (lm_type != "llama" && lm_type != "mistral" && lm_type != "qwen2")
      return Error::unsupported("[llava] language model '{}' (llama, mistral, qwen2 are supported)", lm_type);
    PIPIT_ASSIGN_OR_RETURN(lm_, make_llama_like(tc, w, LlamaOptions{.qkv_bias = lm_type == "qwen2"}));
    PIPIT_ASSIGN_OR_RETURN(tower_, ClipVisionTower::load(cfg, w.host(), lm_->info().n_embd));
    info_ = lm_->info();
    info_.arch = "llava";
    tokens_.image_token_id = int32_t(cfg.get_int_or("image_token_index", cfg.get_int_or("image_token_id", 32000)));
    if (tokens_.image_token_id < 0 || tokens_.image_token_id >= info_.n_vocab)
      return Error::invalid_argument("[llava] image_token_index {} outside the vocabulary of {}", tokens_.image_token_id,
                                     info_.n_vocab);
    return Status::ok();
  }

  Status forward(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits) override {
    return lm_->forward(ctx, batch, kv, logits);
  }
  const VisionLanguageModel* vision() const override { return this; }

  ImageProcessorConfig default_processor() const override {
    ImageProcessorConfig p;  // CLIPImageProcessor defaults at the tower's resolution
    p.kind = "clip";
    p.shortest_edge = p.crop_height = p.crop_width = tower_.image_size();
    return p;
  }
  Status check_processor(const ImageProcessorConfig& p) const override {
    if (p.kind != "clip" || p.crop_height != tower_.image_size() ||
        p.crop_width != tower_.image_size() || !p.do_center_crop)
      return Error::invalid_argument("[llava] the image processor must center-crop to the tower's {}x{} (crop {}x{})",
                                     tower_.image_size(), tower_.image_size(), p.crop_width, p.crop_height);
    return Status::ok();
  }
  int64_t n_image_tokens(const ProcessedImage&) const override { return tower_.n_tokens(); }
  Result<Tensor> encode_image(Ctx& ctx, const ProcessedImage& img) const override {
    return tower_.encode(ctx, img.pixel_values);
  }

  OpSet ops_used() const override { return lm_->ops_used(); }  // the vision tower runs on the CPU

 private:
  std::unique_ptr<Model> lm_;
  ClipVisionTower tower_;
};

Result<std::unique_ptr<Model>> make_llava(const HfConfig& cfg, const WeightSource& w) {
  auto m = std::make_unique<LlavaModel>();
  PIPIT_TRY(m->load(cfg, w));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace

PIPIT_REGISTER_MODEL("llava", make_llava);

}  // namespace pipit
