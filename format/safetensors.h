// safetensors reader (HF's weight format): u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32"|"F16"|"BF16"|"I32"|..., "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then raw little-endian row-major data (offsets relative to the end of the header).
// Files are memory-mapped; tensors are views into the mapping (no copy). Every offset and shape is checked
// against the file size before any byte is touched, so a truncated or lying file gives an error, never a crash.
// Also a writer (used by `pipit logits`/`pipit vision` and tests) for small F32/I32 outputs.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace pipit {

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses from bytes already in memory (`owner` keeps them alive); used by open() and by the fuzzer.
  static Result<SafetensorsFile> parse(const uint8_t* data, size_t size, std::shared_ptr<Storage> owner,
                                       const std::string& name);

  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  Result<Tensor> get(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory: model.safetensors, or the shards listed in model.safetensors.index.json.
class SafetensorsSet {
 public:
  static Result<SafetensorsSet> open_dir(const std::string& dir);
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, Tensor> tensors_;
};

// Writes named tensors (contiguous F32/F16/BF16/I32/I8) to a .safetensors file.
Status write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// "F32" <-> DType; false for types pipit does not read.
bool safetensors_dtype(const std::string& s, DType* out);
const char* safetensors_dtype_name(DType t);

}  // namespace pipit
