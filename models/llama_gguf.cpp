// Llama's GGUF record (models/gguf_traits.h), read by convert/gguf_import.cpp. Kept out of
// models/llama.cpp so that GGUF import links without the model's code (scripts/fuzz.sh links the parsers alone).
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// llama.cpp's arch llama, q/k rows permuted by its LlamaModel converter.
const GgufArchRegistrar kLlamaGguf({.gguf = "llama", .model_type = "llama", .hf_class = "LlamaForCausalLM",
                                     .permuted_qk = true});

}  // namespace

}  // namespace pipit
