// A model checkpoint opened for reading, whatever it came as: an HF directory (safetensors, single or sharded, or
// PyTorch pytorch_model.bin / *.pt), a .gguf file or a .pipit file. Everything is presented the HF way — tensors
// under HF names in HF layout, the HF config.json, tokenizer files as text — so the converter and the loader have
// one code path. Tensor bytes stay in the file mappings wherever the layout allows (views, no copies).
// The record alone lives here, below models/, so that a family's GGUF import (models/gguf_traits.h) can fill one;
// opening a checkpoint is convert/checkpoint.h.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <memory>
#include <string_view>
#include "core/tensor.h"
#include "format/tokenizer_parts.h"

namespace pipit {

struct Checkpoint {
  std::string path;
  std::string format;  // "safetensors", "pytorch", "gguf", "pipit"
  nlohmann::json config = nlohmann::json::object();             // HF config.json
  nlohmann::json generation_config = nlohmann::json::object();  // may be empty
  // HF files kept as text: "tokenizer" (tokenizer.json), "tokenizer_config", "preprocessor_config",
  // "processor_config", "chat_template" (chat_template.jinja / .json).
  std::map<std::string, std::string> texts;
  // A .pipit's tokenizer.json as a view of the file's mapping (kept alive by `text_mapping`) instead of a copy in
  // texts["tokenizer"]: copying its ~11 MB (Qwen3's vocabulary) into fresh memory was ~15% of the file's tokenizer
  // load here, first touches of new pages being slow (on this VM as on phones). tokenizer_json() gives either.
  std::string_view tokenizer_json_view;
  // A .pipit's compiled tokenizer (format/pipit_format.h "blobs"), empty when it has none; kept alive the same way.
  std::string_view tokenizer_compiled_view;
  std::shared_ptr<const void> text_mapping;
  std::optional<std::string_view> tokenizer_json() const {
    if (auto t = texts.find("tokenizer"); t != texts.end()) return std::string_view(t->second);
    if (text_mapping) return tokenizer_json_view;
    return std::nullopt;
  }
  // A GGUF vocabulary: the tokenizer as parts instead of texts["tokenizer"] / ["tokenizer_config"]
  // (format/tokenizer_parts.h; with_tokenizer_texts, convert/checkpoint.h, writes them as those texts).
  std::optional<TokenizerParts> tokenizer_parts;
  std::string tokenizer_error;  // why there is no tokenizer when the source had one we could not translate
  std::map<std::string, Tensor> tensors;  // HF names, contiguous
  nlohmann::json quantization;            // .pipit: the recipe it was converted with (null otherwise)
  std::vector<std::string> notes;         // what the import did (skipped tensors, un-permuted rows, ...)
};

}  // namespace pipit
