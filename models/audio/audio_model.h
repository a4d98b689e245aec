// The audio side of a model that takes audio (Gemma 4): a feature extractor + encoder + projector built from the
// loaded checkpoint, found by model_type in a registry (so models/model.h, included everywhere, needs no new
// virtual; the decoder only sees embedding rows, as for images). runtime/audio_input.h turns clips and a prompt
// into a MultimodalPrompt with it.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/ops.h"
#include "models/hf_config.h"
#include "models/model.h"

namespace pipit {

struct AudioTokens {
  int32_t audio_token_id = -1;  // the placeholder repeated once per audio soft token (<|audio|>)
  int32_t boa_id = -1;          // before the run (<|audio>)
  int32_t eoa_id = -1;          // after it (<audio|>)
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

// cfg: the top config.json; processor: processor_config.json (may be null: the Hub defaults). Null when the
// model_type takes no audio.
using AudioEncoderFactory = std::function<Result<std::unique_ptr<AudioEncoder>>(
    const HfConfig& cfg, const WeightSource& w, const nlohmann::json& processor)>;
void register_audio_encoder(const char* model_type, AudioEncoderFactory f);
bool takes_audio(const std::string& model_type);
Result<std::unique_ptr<AudioEncoder>> make_audio_encoder(const HfConfig& cfg, const WeightSource& w,
                                                         const nlohmann::json& processor);

struct AudioEncoderRegistrar {
  AudioEncoderRegistrar(const char* model_type, AudioEncoderFactory f) { register_audio_encoder(model_type, f); }
};

}  // namespace pipit
