// The audio side of a model that takes audio: one record per model_type, registered in the family's own file
// (models/audio/gemma4_audio.cpp): its processor (feature extractor and processor_config.json fields, the soft-token
// count, the placeholder and how the processor expands it), its encoder + projector built from the loaded
// checkpoint, and the memory one clip's encode takes at the longest (the memory estimate). The runtime
// (runtime/audio_input.h) reaches it by model_type only, so models/model.h, included everywhere, needs no new
// virtual; the decoder only sees embedding rows, as for images.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ops.h"
#include "models/hf_config.h"
#include "models/model.h"

namespace pipit {

// How a clip sits in the prompt, as the family's HF processor writes it: the placeholder a chat template writes for
// one clip, repeated once per soft token, with the processor's tokens before and after each clip's run.
struct AudioTokens {
  int32_t audio_token_id = -1;
  std::vector<int32_t> before, after;
};

class AudioEncoder {
 public:
  virtual ~AudioEncoder() = default;
  const AudioTokens& tokens() const { return tokens_; }
  // The longest clip taken, in seconds (the processor's cap on audio soft tokens).
  double max_seconds() const { return max_seconds_; }
  // Soft tokens a clip of n_samples (16 kHz) becomes, as the processor counts them; an error when it becomes none.
  virtual Result<int64_t> n_audio_tokens(int64_t n_samples) const = 0;
  // Soft tokens [n_audio_tokens, n_embd] f32 on the heap for 16 kHz mono samples. Intermediates are named through
  // ctx.name ("audio.input_features", "audio.subsample", "audio.layer" + layer, "audio.encoder_out").
  virtual Result<Tensor> encode(Ctx& ctx, std::span<const float> samples) const = 0;

 protected:
  AudioTokens tokens_;
  double max_seconds_ = 30.0;
};

// cfg: the top config.json; processor: processor_config.json (may be null: the Hub defaults).
using AudioEncoderFactory = std::function<Result<std::unique_ptr<AudioEncoder>>(
    const HfConfig& cfg, const WeightSource& w, const nlohmann::json& processor)>;
// Bytes one clip of max_seconds() takes through the processor and the tower (features and activations, not the
// weights), from the configs alone: no weight is read (runtime/memory_estimate.h).
using AudioEncodeBound = std::function<Result<double>(const HfConfig& cfg, const nlohmann::json& processor)>;
void register_audio_encoder(const char* model_type, AudioEncoderFactory f, AudioEncodeBound bound);
bool takes_audio(const std::string& model_type);
// The registered model types, for messages and help.
std::vector<std::string> audio_model_types();
Result<std::unique_ptr<AudioEncoder>> make_audio_encoder(const HfConfig& cfg, const WeightSource& w,
                                                         const nlohmann::json& processor);
// The record's bound for cfg.model_type(); an error for a model type that takes no audio.
Result<double> audio_encode_bytes(const HfConfig& cfg, const nlohmann::json& processor);

struct AudioEncoderRegistrar {
  AudioEncoderRegistrar(const char* model_type, AudioEncoderFactory f, AudioEncodeBound bound) {
    register_audio_encoder(model_type, std::move(f), std::move(bound));
  }
};

}  // namespace pipit
