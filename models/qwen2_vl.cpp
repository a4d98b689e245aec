// Qwen2-VL (and, with the other towers, Qwen2.5-VL and Qwen3-VL; with a decoder of its own, Qwen3.5): the Qwen2
// decoder from models/llama.cpp (Qwen3's for Qwen3-VL), fed token embeddings with image features spliced in at the
// <|image_pad|> tokens and rotated with M-RoPE positions (rope_scaling mrope_section splits the frequencies into
// t/h/w sections). The positions are the model's own (media_positions: get_rope_index, models/qwen_rope_index.h);
// the runtime carries them, and the image features (and Qwen3-VL's DeepStack features), into the Batch.
// reference: HF modeling_qwen2_vl.py (Qwen2VLForConditionalGeneration), modeling_qwen3_vl.py.
#include "models/qwen2_vl.h"

#include "models/llama.h"
#include "models/mtp.h"
#include "models/qwen_rope_index.h"
#include "models/rope.h"
#include "models/vision/vision_model.h"

namespace pipit {

namespace {

// HF's Qwen3VLTextRotaryEmbedding always interleaves the M-RoPE streams (apply_interleaved_mrope) and takes
// mrope_section [24, 20, 20] when the config names none: say so in the rope object rope_from_config reads.
HfConfig qwen3_vl_rope(const HfConfig& tc) {
  nlohmann::json j = tc.json();
  nlohmann::json* rs = nullptr;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) rs = &j["rope_parameters"];
  else if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) rs = &j["rope_scaling"];
  else rs = &(j["rope_scaling"] = {{"rope_type", "default"}});
  if (!rs->contains("mrope_section")) (*rs)["mrope_section"] = {24, 20, 20};
  (*rs)["mrope_interleaved"] = true;
  return HfConfig(std::move(j));
}

// MtpModel: the decoder's multi-token-prediction head, when it has one (Qwen3.5), passed through.
class Qwen2VLModel : public Model, public VisionLanguageModel, public MtpModel {
 public:
  // decoder: null for the Llama-family decoder (Qwen2's, Qwen3's for Qwen3-VL) built here from text_config.
  Status load(const HfConfig& cfg, const WeightSource& base, QwenVisionTower::Kind kind,
              const QwenVlDecoder* decoder) {
    const bool v3 = kind == QwenVisionTower::Kind::kQwen3;
    const char* arch = decoder                                    ? decoder->arch
                       : kind == QwenVisionTower::Kind::kQwen2_5 ? "qwen2_5_vl"
                       : v3                                      ? "qwen3_vl"
                                                                 : "qwen2_vl";
    // Hub names (model.*, visual.*) or those of transformers >= 4.52 (model.language_model.*, model.visual.*);
    // Qwen3-VL's Hub files use the latter
    AliasedWeights w(base, {{"model.", {"model.", "model.language_model."}}, {"visual.", {"visual.", "model.visual."}}});
    if (decoder) {
      PIPIT_ASSIGN_OR_RETURN(lm_, decoder->make(cfg, w));
    } else {
      HfConfig tc = text_config_of(cfg, v3 ? nlohmann::json{{"rope_theta", 5000000.0}} : nlohmann::json::object());
      if (v3) tc = qwen3_vl_rope(tc);
      const nlohmann::json params = rope_parameters_of(tc);
      const nlohmann::json rs = params.is_object() ? params
                                : tc.json().contains("rope_scaling") ? tc.json()["rope_scaling"] : nlohmann::json();
      if (!rs.is_object() || !rs.contains("mrope_section"))
        return Error::invalid_argument("[{}] config has no rope_scaling.mrope_section", arch);
      PIPIT_ASSIGN_OR_RETURN(lm_, make_llama_like(tc, w, v3 ? LlamaOptions{.qk_norm = true, .deepstack = true}
                                                            : LlamaOptions{.qkv_bias = true}));
    }
    PIPIT_ASSIGN_OR_RETURN(tower_,
                           QwenVisionTower::load(cfg.sub("vision_config"), w.host(), kind, lm_->info().n_embd));
    if (tower_.n_deepstack() > lm_->info().n_layer)
      return Error::invalid_argument("[{}] {} DeepStack features for a decoder of {} layers", arch,
                                     tower_.n_deepstack(), lm_->info().n_layer);
    info_ = lm_->info();
    info_.arch = arch;
    const std::array<int32_t, 4> ids = decoder ? decoder->default_ids
                                               : std::array<int32_t, 4>{151655, 151652, 151653, -1};
    tokens_.image_token_id = int32_t(cfg.get_int_or("image_token_id", ids[0]));
    tokens_.vision_start_id = int32_t(cfg.get_int_or("vision_start_token_id", ids[1]));
    tokens_.vision_end_id = int32_t(cfg.get_int_or("vision_end_token_id", ids[2]));
    if (decoder) {  // video input: Qwen3.5 (Qwen3-VL's video path is the same but not golden-tested here)
      tokens_.video_token_id = int32_t(cfg.get_int_or("video_token_id", ids[3]));
      if (tokens_.video_token_id < 0 || tokens_.video_token_id >= lm_->info().n_vocab)
        return Error::invalid_argument("[{}] video token id {} outside the vocabulary of {}", arch,
                                       tokens_.video_token_id, lm_->info().n_vocab);
    }
    tokens_.merge_size = tower_.merge_size();
    tokens_.deepstack = tower_.n_deepstack();
    for (int32_t id : {tokens_.image_token_id, tokens_.vision_start_id})
      if (id < 0 || id >= info_.n_vocab)
        return Error::invalid_argument("[{}] image token id {} outside the vocabulary of {}", arch, id, info_.n_vocab);
    return Status::ok();
  }

  Status forward(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits) override {
    return lm_->forward(ctx, batch, kv, logits);
  }
  const VisionLanguageModel* vision() const override { return this; }
  Result<MediaPositions> media_positions(int64_t n_tokens, std::span<const MediaSpan> media) const override {
    return qwen_rope_index(n_tokens, media, tower_.merge_size());
  }

  std::string mtp_missing() const override {
    const auto* h = dynamic_cast<const MtpModel*>(lm_.get());
    return h ? h->mtp_missing() : fmt("{} has no multi-token-prediction head", info_.arch);
  }
  Status forward_hidden(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits, Tensor* hidden) override {
    return dynamic_cast<MtpModel&>(*lm_).forward_hidden(ctx, batch, kv, logits, hidden);
  }
  KvCacheSpec mtp_kv_spec() const override { return dynamic_cast<const MtpModel&>(*lm_).mtp_kv_spec(); }
  Status forward_mtp(Ctx& ctx, const Batch& batch, const Tensor& hidden, KvCache& kv, Tensor* logits,
                     Tensor* out) override {
    return dynamic_cast<MtpModel&>(*lm_).forward_mtp(ctx, batch, hidden, kv, logits, out);
  }

  ImageProcessorConfig default_processor() const override {
    ImageProcessorConfig p;  // Qwen2VLImageProcessor defaults
    p.kind = "qwen2_vl";
    p.patch_size = tower_.patch_size();
    p.merge_size = tower_.merge_size();
    p.temporal_patch_size = tower_.temporal_patch_size();
    return p;
  }
  Status check_processor(const ImageProcessorConfig& p) const override {
    if (p.kind != "qwen2_vl" || p.patch_size != tower_.patch_size() ||
        p.merge_size != tower_.merge_size() || p.temporal_patch_size != tower_.temporal_patch_size())
      return Error::invalid_argument("[{}] image processor (patch {}, merge {}, temporal {}) does not match the "
                                     "vision tower (patch {}, merge {}, temporal {})", info_.arch, p.patch_size,
                                     p.merge_size, p.temporal_patch_size, tower_.patch_size(), tower_.merge_size(),
                                     tower_.temporal_patch_size());
    return Status::ok();
  }
  // Videos (a model with a video token): Qwen3VLVideoProcessor (models/vision/qwen3_vl_video_processor.cpp) with the
  // tower's patch sizes
  std::optional<VideoProcessorConfig> default_video_processor() const override {
    if (tokens_.video_token_id < 0) return std::nullopt;
    VideoProcessorConfig c;
    c.kind = "qwen3_vl";
    c.patch_size = tower_.patch_size();
    c.merge_size = tower_.merge_size();
    c.temporal_patch_size = tower_.temporal_patch_size();
    return c;
  }
  int64_t n_image_tokens(const ProcessedImage& img) const override {
    const int64_t m = tower_.merge_size();
    return int64_t(img.grid_thw[0]) * img.grid_thw[1] * img.grid_thw[2] / (m * m);
  }
  Result<Tensor> encode_image(Ctx& ctx, const ProcessedImage& img) const override {
    return tower_.encode(ctx, img.pixel_values, img.grid_thw);
  }

  // The decoder's ops (the vision tower runs on the CPU), and DeepStack's row adds.
  OpSet ops_used() const override {
    OpSet s = lm_->ops_used();
    if (tokens_.deepstack > 0) s.set(size_t(Op::kAddRows));
    return s;
  }

 private:
  std::unique_ptr<Model> lm_;
  QwenVisionTower tower_;
};

Result<std::unique_ptr<Model>> make_qwen2_vl(const HfConfig& cfg, const WeightSource& w) {
  return make_qwen_vl_family(cfg, w, QwenVisionTower::Kind::kQwen2);
}

}  // namespace

Result<std::unique_ptr<Model>> make_qwen_vl_family(const HfConfig& cfg, const WeightSource& w,
                                                   QwenVisionTower::Kind kind) {
  auto m = std::make_unique<Qwen2VLModel>();
  PIPIT_TRY(m->load(cfg, w, kind, nullptr));
  return std::unique_ptr<Model>(std::move(m));
}

Result<std::unique_ptr<Model>> make_qwen_vl_family(const HfConfig& cfg, const WeightSource& w,
                                                   QwenVisionTower::Kind kind, const QwenVlDecoder& decoder) {
  auto m = std::make_unique<Qwen2VLModel>();
  PIPIT_TRY(m->load(cfg, w, kind, &decoder));
  return std::unique_ptr<Model>(std::move(m));
}

PIPIT_REGISTER_MODEL("qwen2_vl", make_qwen2_vl);

}  // namespace pipit
