// The audio record registry (audio_model.h).
#include "models/audio/audio_model.h"

#include <map>

namespace pipit {

namespace {

struct AudioRecord {
  AudioEncoderFactory make;
  AudioEncodeBound bound;
};

std::map<std::string, AudioRecord>& registry() {
  static std::map<std::string, AudioRecord> r;
  return r;
}

Result<const AudioRecord*> record_of(const HfConfig& cfg) {
  auto it = registry().find(cfg.model_type());
  if (it == registry().end())
    return Error::invalid_argument("[audio] model type '{}' does not take audio", cfg.model_type());
  return &it->second;
}

}  // namespace

void register_audio_encoder(const char* model_type, AudioEncoderFactory f, AudioEncodeBound bound) {
  registry()[model_type] = {std::move(f), std::move(bound)};
}

bool takes_audio(const std::string& model_type) { return registry().count(model_type) != 0; }

std::vector<std::string> audio_model_types() {
  std::vector<std::string> out;
  for (const auto& [k, _] : registry()) out.push_back(k);
  return out;
}

Result<std::unique_ptr<AudioEncoder>> make_audio_encoder(const HfConfig& cfg, const WeightSource& w,
                                                         const nlohmann::json& processor) {
  PIPIT_ASSIGN_OR_RETURN(const AudioRecord* r, record_of(cfg));
  return r->make(cfg, w, processor);
}

Result<double> audio_encode_bytes(const HfConfig& cfg, const nlohmann::json& processor) {
  PIPIT_ASSIGN_OR_RETURN(const AudioRecord* r, record_of(cfg));
  return r->bound(cfg, processor);
}

}  // namespace pipit
