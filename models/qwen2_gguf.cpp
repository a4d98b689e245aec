// Qwen2 / Qwen2.5's GGUF record (models/gguf_traits.h), read by convert/gguf_import.cpp. Kept out of
// models/qwen2.cpp so that GGUF import links without the model's code (scripts/fuzz.sh links the parsers alone).
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// llama.cpp's arch qwen2, unpermuted (NEOX-style RoPE); no sliding window.
Status qwen2_gguf_config(const GgufArchInput&, nlohmann::json& cfg, std::vector<std::string>&) {
  cfg["use_sliding_window"] = false;
  return Status::ok();
}
const GgufArchRegistrar kQwen2Gguf({.gguf = "qwen2", .model_type = "qwen2", .hf_class = "Qwen2ForCausalLM",
                                    .config = qwen2_gguf_config});

// Qwen2's byte-level BPE pre-tokenizer (tokenizer.ggml.pre qwen2): its Hub tokenizer.json's Split regex and NFC.
const GgufPreTokenizerRegistrar kQwen2Pre({.names = {"qwen2"},
                                           .regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                                                    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                                                    "\\s+(?!\\S)|\\s+",
                                           .nfc = true});

}  // namespace

}  // namespace pipit
