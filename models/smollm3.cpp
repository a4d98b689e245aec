// SmolLM3: the Llama graph (GQA, SwiGLU, tied embeddings) where some layers apply no RoPE at all (NoPE):
// no_rope_layers[i] == 0, by default every no_rope_layer_interval-th layer.
// reference: HF modeling_smollm3.py (SmolLM3Attention: use_rope = config.no_rope_layers[layer_idx]) and
// configuration_smollm3.py (defaults: rope_theta 2e6, tie_word_embeddings true, no_rope_layer_interval 4).
#include "models/llama.h"

namespace pipit {

namespace {

Result<std::unique_ptr<Model>> make_smollm3(const HfConfig& cfg, const WeightSource& w) {
  PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
  if (cfg.get_bool_or("use_sliding_window", false))
    return Error::unsupported("[smollm3] use_sliding_window = true is not supported");
  LlamaOptions opt;
  if (cfg.has("no_rope_layers")) {
    const auto& v = cfg.json()["no_rope_layers"];
    if (!v.is_array() || int64_t(v.size()) < n_layer)
      return Error::invalid_argument("[smollm3] config field 'no_rope_layers' must list {} layers (1 = RoPE, 0 = none)",
                                     n_layer);
    for (int64_t il = 0; il < n_layer; ++il) {
      if (!v[size_t(il)].is_number_integer())
        return Error::invalid_argument("[smollm3] no_rope_layers[{}] is {}, expected 0 or 1", il, v[size_t(il)].dump());
      opt.use_rope.push_back(v[size_t(il)].get<int64_t>() != 0);
    }
  } else {
    const int64_t interval = cfg.get_int_or("no_rope_layer_interval", 4);
    if (interval <= 0) return Error::invalid_argument("[smollm3] no_rope_layer_interval {} must be positive", interval);
    for (int64_t il = 0; il < n_layer; ++il) opt.use_rope.push_back((il + 1) % interval != 0);
  }
  // SmolLM3Config's defaults where they differ from Llama's
  nlohmann::json j = cfg.json();
  if (!cfg.has("rope_theta")) j["rope_theta"] = 2e6;
  if (!cfg.has("tie_word_embeddings")) j["tie_word_embeddings"] = true;
  return make_llama_like(HfConfig(j), w, opt);
}

}  // namespace

PIPIT_REGISTER_MODEL("smollm3", make_smollm3);

}  // namespace pipit
