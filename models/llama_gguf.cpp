// Llama's GGUF record (models/gguf_traits.h), read by convert/gguf_import.cpp. Kept out of
// models/llama.cpp so that GGUF import links without the model's code (scripts/fuzz.sh links the parsers alone).
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// llama.cpp's arch llama, q/k rows permuted by its LlamaModel converter.
const GgufArchRegistrar kLlamaGguf({.gguf = "llama", .model_type = "llama", .hf_class = "LlamaForCausalLM",
                                     .permuted_qk = true});

// Llama 3's byte-level BPE pre-tokenizer (tokenizer.ggml.pre llama-bpe, also written llama3 / llama-v3): its Hub
// tokenizer.json's Split regex; a pre-token found whole in the vocabulary is one token (ignore_merges, as HF's).
const GgufPreTokenizerRegistrar kLlama3Pre({.names = {"llama-bpe", "llama3", "llama-v3"},
                                            .regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                                                     "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                                                     "\\s+(?!\\S)|\\s+",
                                            .ignore_merges = true});

}  // namespace

}  // namespace pipit
