// Config helpers shared by the vision-language models.
#include "models/vision/vision_model.h"

namespace pipit {

HfConfig text_config_of(const HfConfig& cfg, const nlohmann::json& defaults) {
  nlohmann::json merged = nlohmann::json::object();
  for (auto it = cfg.json().begin(); it != cfg.json().end(); ++it)
    if (it.key() != "text_config" && it.key() != "vision_config") merged[it.key()] = it.value();
  if (cfg.json().contains("text_config") && cfg.json()["text_config"].is_object())
    for (auto it = cfg.json()["text_config"].begin(); it != cfg.json()["text_config"].end(); ++it)
      merged[it.key()] = it.value();
  for (auto it = defaults.begin(); it != defaults.end(); ++it)
    if (!merged.contains(it.key()) || merged[it.key()].is_null()) merged[it.key()] = it.value();
  return HfConfig(std::move(merged));
}

}  // namespace pipit
