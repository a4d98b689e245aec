// Opening a model checkpoint (the Checkpoint record: format/checkpoint.h) from an HF directory, a .gguf or a .pipit
// file.
#pragma once

#include <string>

#include "core/status.h"
#include "format/checkpoint.h"

namespace pipit {

// Opens a directory, .gguf, .pipit, or a single .safetensors / .bin / .pt file (config.json next to it).
Result<Checkpoint> open_checkpoint(const std::string& path);

// Writes a tokenizer held as parts (a GGUF vocabulary) into c.texts as "tokenizer" and "tokenizer_config", the files
// an HF checkpoint would have, for what stores or shows the texts (pipit convert, inspect); the loader reads the parts.
void with_tokenizer_texts(Checkpoint& c);

// Reads the optional HF side files of a directory (generation_config.json, tokenizer.json, ...) into `c`.
Status read_hf_side_files(const std::string& dir, Checkpoint& c);

}  // namespace pipit
