// The audio encoder registry (audio_model.h).
#include "models/audio/audio_model.h"

#include <map>

namespace pipit {

namespace {
std::map<std::string, AudioEncoderFactory>& registry() {
  static std::map<std::string, AudioEncoderFactory> r;
  return r;
}
}  // namespace

void register_audio_encoder(const char* model_type, AudioEncoderFactory f) { registry()[model_type] = std::move(f); }

bool takes_audio(const std::string& model_type) { return registry().count(model_type) != 0; }

Result<std::unique_ptr<AudioEncoder>> make_audio_encoder(const HfConfig& cfg, const WeightSource& w,
                                                         const nlohmann::json& processor) {
  auto it = registry().find(cfg.model_type());
  if (it == registry().end())
    return Error::invalid_argument("[audio] model type '{}' does not take audio", cfg.model_type());
  return it->second(cfg, w, processor);
}

}  // namespace pipit
