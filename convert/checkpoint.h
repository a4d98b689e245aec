// Opening a model checkpoint (the Checkpoint record: format/checkpoint.h) from an HF directory, a .gguf or a .pipit
// file.
#pragma once

#include <string>

#include "core/status.h"
#include "format/checkpoint.h"

namespace pipit {

// Opens a directory, .gguf, .pipit, or a single .safetensors / .bin / .pt file (config.json next to it).
Result<Checkpoint> open_checkpoint(const std::string& path);

// Reads the optional HF side files of a directory (generation_config.json, tokenizer.json, ...) into `c`.
Status read_hf_side_files(const std::string& dir, Checkpoint& c);

}  // namespace pipit
