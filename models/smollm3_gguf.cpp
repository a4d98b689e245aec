// SmolLM3's GGUF record (models/gguf_traits.h), read by convert/gguf_import.cpp. Kept out of
// models/smollm3.cpp so that GGUF import links without the model's code (scripts/fuzz.sh links the parsers alone).
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// llama.cpp's arch smollm3, q/k rows permuted (its converter is LlamaModel's); the
// NoPE layers are fixed in llama.cpp's graph, not the metadata.
Status smollm3_gguf_config(const GgufArchInput& in, nlohmann::json& cfg, std::vector<std::string>&) {
  const int64_t n_layer = in.n_layer;
  // llama.cpp's smollm3 graph: layer il has no RoPE when (il + 1) % 4 == 0 (HF's no_rope_layer_interval 4)
  nlohmann::json nope = nlohmann::json::array();
  for (int64_t il = 0; il < n_layer; ++il) nope.push_back((il + 1) % 4 != 0 ? 1 : 0);
  cfg["no_rope_layers"] = nope;
  return Status::ok();
}
const GgufArchRegistrar kSmolLM3Gguf({.gguf = "smollm3", .model_type = "smollm3", .hf_class = "SmolLM3ForCausalLM",
                                      .permuted_qk = true, .config = smollm3_gguf_config});

}  // namespace

}  // namespace pipit
