// Images in a prompt, from files to a Session::eval: decode (models/vision/image.h), preprocess with the model's HF
// image processor, encode with its vision tower, then expand each image placeholder token into one token per
// image feature, and ask the model for the positions (Model::media_positions: for Qwen's M-RoPE family that is
// get_rope_index, models/qwen_rope_index.h; the positions then fall behind KV rows after an image: rope_delta < 0).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/threads.h"
#include "models/model.h"
#include "models/vision/image.h"
#include "models/vision/image_processor.h"

namespace pipit {

struct LoadedModel;

struct ImageOptions {
  int64_t max_pixels = 0;  // caps the processor's max_pixels (Qwen: fewer image tokens); 0: the config's
  std::string mode;        // DeepSeek-OCR: tiny, small, base, large or gundam ("": the config's, else gundam)
};

// The image processor of a loaded model: the family defaults, preprocessor_config.json over them (may be null),
// then the user's options. Errors for text-only models and for processor settings the tower cannot take.
Result<ImageProcessorConfig> image_processor_for(const Model& m, const nlohmann::json& preprocessor_config,
                                                 const ImageOptions& opt = {});

// The preprocessor_config.json of a loaded model: the loader's copy, else the file next to config.json (null when
// the checkpoint has none: the family defaults apply).
Result<nlohmann::json> preprocessor_config_of(const LoadedModel& lm);

struct EncodedImage {
  ProcessedImage processed;  // pixel_values and grid, as HF's processor returns them
  // [n_image_tokens, n_embd * (1 + K)] f32: vision tower + merger / projector output, then the K DeepStack
  // feature blocks of Qwen3-VL (VisionTokens::deepstack)
  Tensor features;
};

using TensorHook = std::function<void(const std::string& name, int layer, const Tensor& t)>;

// Preprocess and encode one image on `pool` (with a scratch arena of its own). `on_tensor` sees the tower's
// named intermediates.
Result<EncodedImage> encode_image(const Model& m, const ImageProcessorConfig& proc, const Image& img, ThreadPool& pool,
                                  const TensorHook& on_tensor = {});

// A prompt with its images, ready for Session::eval(const MultimodalPrompt&).
struct MultimodalPrompt {
  std::vector<int32_t> tokens;    // placeholders expanded: one image token per feature row
  Tensor embd;                    // [n_image_tokens, n_embd] f32: every image's features, in prompt order
  std::vector<int32_t> embd_row;  // per token: its row of embd, or -1 for text
  // Qwen3-VL: the K DeepStack feature blocks of the same rows ([n_image_tokens, n_embd] each; Batch::deepstack)
  std::vector<Tensor> deepstack;
  // The model's answer (Model::media_positions), carried as it is. M-RoPE models: 3 streams (t, h, w) of
  // tokens.size() positions, counted from 0 at the prompt's first token (Session adds where the context stands).
  // Empty for plain-position models.
  std::vector<int32_t> mrope_pos;
  int32_t rope_delta = 0;  // MediaPositions::delta: the offset of the tokens that follow
  struct Span {
    int64_t begin, end;    // the image's tokens [begin, end)
    int32_t delta_after;   // MediaPositions::delta_after: position - token index for text after it
  };
  std::vector<Span> image_spans;
};

// Expands the image tokens of `tokens`: either one placeholder per image (what chat templates write) or runs
// already expanded to each image's token count (HF's processor output). Errors when the count fits neither, e.g.
// more image tokens than images.
Result<MultimodalPrompt> build_multimodal_prompt(const Model& m, std::span<const int32_t> tokens,
                                                 const std::vector<EncodedImage>& images);

// The whole path for a loaded model: load each image source (path or data URL), preprocess, encode, expand.
Result<MultimodalPrompt> prepare_multimodal_prompt(const LoadedModel& lm, std::span<const int32_t> tokens,
                                                   const std::vector<std::string>& image_sources,
                                                   const ImageOptions& opt, ThreadPool& pool);

// The part of `mm` from token `from` on, to evaluate after a context that holds mm's first `from` tokens (a
// conversation's earlier turns: runtime/conversation.h): M-RoPE positions and the spans' offsets are made relative
// to where that context leaves them. Errors when `from` falls inside an image, video or audio span.
Result<MultimodalPrompt> multimodal_suffix(const MultimodalPrompt& mm, int64_t from);

// The placeholder text a chat template writes for one image, for prompts built without a template
// ("<|vision_start|><|image_pad|><|vision_end|>" for Qwen, "<image>" for LLaVA): token ids.
std::vector<int32_t> image_placeholder_tokens(const Model& m);

}  // namespace pipit
