// What a vision-language model adds to Model (Model::vision() returns it): its image processor defaults, how many
// language-model tokens an image becomes, which token ids mark images, and the vision tower + projector.
// The runtime (runtime/multimodal.h) uses it to turn images and a prompt into a Batch with image features
// spliced in (the positions of such a prompt are the model's: Model::media_positions). Also: AliasedWeights, which lets one model read both the Hub tensor names and
// the names newer transformers versions write.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"
#include "models/vision/image_processor.h"
#include "models/vision/video_processor.h"

namespace pipit {

struct VisionTokens {
  int32_t image_token_id = -1;   // the placeholder the processor repeats once per image token (<|image_pad|>, <image>)
  int32_t vision_start_id = -1;  // Qwen: <|vision_start|> before each image (-1: none)
  int32_t vision_end_id = -1;    // Qwen: <|vision_end|> after it
  // Gemma 4: <|image> / <image|>, which the processor (not the chat template) puts around each image's expanded run
  // of image tokens (-1: none)
  int32_t image_begin_id = -1, image_end_id = -1;
  int32_t video_token_id = -1;   // Qwen3.5: <|video_pad|>, repeated per video token (-1: the model takes no video)
  int merge_size = 1;            // Qwen: spatial merge; the LM sees an image as a (t, h/m, w/m) grid
  // Qwen3-VL: DeepStack feature blocks after the n_embd image features of each row encode_image returns; block k
  // is added to the image token's hidden state after decoder layer k (the runtime splits them into Batch::deepstack)
  int deepstack = 0;
};

class VisionLanguageModel {
 public:
  virtual ~VisionLanguageModel() = default;
  const VisionTokens& vision_tokens() const { return tokens_; }
  // The processor settings of the model family with its config's sizes; preprocessor_config.json is read over it.
  virtual ImageProcessorConfig default_processor() const = 0;
  // Errors when a processor config does not fit the tower (patch, merge, crop sizes).
  virtual Status check_processor(const ImageProcessorConfig& p) const = 0;
  // The video processor of the family (a registered VideoProcessorKind) with the tower's sizes, for a model that
  // takes video (vision_tokens().video_token_id >= 0); video_preprocessor_config.json is read over it. None: no video.
  virtual std::optional<VideoProcessorConfig> default_video_processor() const { return std::nullopt; }
  // Language-model tokens the image becomes.
  virtual int64_t n_image_tokens(const ProcessedImage& img) const = 0;
  // Image features [n_image_tokens, n_embd * (1 + vision_tokens().deepstack)] f32 on the heap. Resets ctx.arena
  // between blocks (pass one that holds nothing else). Intermediates are named through ctx.name
  // ("vision.patch_embed", "vision.block" + layer, ...).
  virtual Result<Tensor> encode_image(Ctx& ctx, const ProcessedImage& img) const = 0;

 protected:
  VisionTokens tokens_;
};

// A WeightSource view that finds a tensor under any of several prefixes: get("model.norm.weight") on
// {"model." -> {"model.", "model.language_model.", "language_model.model."}} looks for each in turn.
class AliasedWeights : public WeightSource {
 public:
  using Rule = std::pair<std::string, std::vector<std::string>>;  // prefix -> candidate prefixes, in order
  AliasedWeights(const WeightSource& base, std::vector<Rule> rules) : base_(base), rules_(std::move(rules)) {}
  bool has(const std::string& name) const override { return !resolve(name).empty(); }
  Result<Tensor> find(const std::string& name) const override {
    const std::string n = resolve(name);
    if (n.empty()) return Error::not_found("[load] missing tensor '{}'", name);
    return base_.find(n);
  }
  // placed where the base places it (uploaded on a device: Qwen3.5-VL's decoder makes its conv filters at load)
  Result<Tensor> constant(const Tensor& host) const override { return base_.constant(host); }
  // the same aliases over the wrapped source's host weights
  const WeightSource& host() const override {
    if (&base_.host() == &base_) return *this;
    if (!host_) host_ = std::make_unique<AliasedWeights>(base_.host(), rules_);
    return *host_;
  }

 private:
  std::string resolve(const std::string& name) const {
    for (const auto& [prefix, candidates] : rules_) {
      if (name.rfind(prefix, 0) != 0) continue;
      for (const auto& c : candidates) {
        std::string n = c + name.substr(prefix.size());
        if (base_.has(n)) return n;
      }
      return "";
    }
    return base_.has(name) ? name : "";
  }
  const WeightSource& base_;
  std::vector<Rule> rules_;
  mutable std::unique_ptr<AliasedWeights> host_;  // made on the first host() that differs from *this
};

// The language-model part of a VLM config: "text_config" when present (newer transformers), else the top level
// (the original Hub files), with the keys of `defaults` (HF config class defaults) filled in where missing.
HfConfig text_config_of(const HfConfig& cfg, const nlohmann::json& defaults = nlohmann::json::object());

}  // namespace pipit
