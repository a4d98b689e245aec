// A model checkpoint opened for reading, whatever it came as: an HF directory (safetensors, single or sharded, or
// PyTorch pytorch_model.bin / *.pt), a .gguf file or a .pipit file. Everything is presented the HF way — tensors
// under HF names in HF layout, the HF config.json, tokenizer files as text — so the converter and the loader have
// one code path. Tensor bytes stay in the file mappings wherever the layout allows (views, no copies).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/tensor.h"

namespace pipit {

struct Checkpoint {
  std::string path;
  std::string format;  // "safetensors", "pytorch", "gguf", "pipit"
  nlohmann::json config = nlohmann::json::object();             // HF config.json
  nlohmann::json generation_config = nlohmann::json::object();  // may be empty
  // HF files kept as text: "tokenizer" (tokenizer.json), "tokenizer_config", "preprocessor_config",
  // "processor_config", "chat_template" (chat_template.jinja / .json).
  std::map<std::string, std::string> texts;
  std::string tokenizer_error;  // why there is no tokenizer text when the source had one we could not translate
  std::map<std::string, Tensor> tensors;  // HF names, contiguous
  nlohmann::json quantization;            // .pipit: the recipe it was converted with (null otherwise)
  std::vector<std::string> notes;         // what the import did (skipped tensors, un-permuted rows, ...)
};

// Opens a directory, .gguf, .pipit, or a single .safetensors / .bin / .pt file (config.json next to it).
Result<Checkpoint> open_checkpoint(const std::string& path);

// Reads the optional HF side files of a directory (generation_config.json, tokenizer.json, ...) into `c`.
Status read_hf_side_files(const std::string& dir, Checkpoint& c);

}  // namespace pipit
