// Qwen3's GGUF record (models/gguf_traits.h), read by convert/gguf_import.cpp. Kept out of
// models/qwen3.cpp so that GGUF import links without the model's code (scripts/fuzz.sh links the parsers alone).
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// llama.cpp's arch qwen3, unpermuted (NEOX-style RoPE).
const GgufArchRegistrar kQwen3Gguf({.gguf = "qwen3", .model_type = "qwen3", .hf_class = "Qwen3ForCausalLM"});

}  // namespace

}  // namespace pipit
