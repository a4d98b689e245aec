// Reading llama.cpp's metadata the way its loader does, for the GGUF import of any family (convert/gguf_import.cpp
// for the shared llama-family layout, a family's own import registered in models/gguf_traits.h): `{arch}.*` keys
// with checked types, the sliding-window pattern, per-layer values, an mmproj's `clip.*` keys, token ids by text.
// Every error names the file and the key. Nothing here knows a model family.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "format/gguf.h"

namespace pipit {

// The `{arch}.*` keys of a GGUF file (arch: general.architecture, e.g. "llama").
class GgufMeta {
 public:
  GgufMeta(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}
  const GgufFile& file() const { return f_; }
  const std::string& arch() const { return arch_; }
  const GgufValue* find(const std::string& key) const { return f_.find(arch_ + "." + key); }
  // A non-negative integer (an array is an error naming per-layer values).
  Result<int64_t> get_int(const std::string& key) const;
  Result<int64_t> get_int_or(const std::string& key, int64_t def) const;
  Result<double> get_float_or(const std::string& key, double def) const;
  // A per-layer integer key: an array of n_layer values, or one value for every layer (`def` when absent; without
  // `def` the key is required).
  Result<std::vector<int64_t>> per_layer_ints(const std::string& key, int64_t n_layer,
                                              std::optional<int64_t> def = std::nullopt) const;
  // A layer's sliding-window kind as llama.cpp's load_swa_pattern reads it: one bool per layer
  // (attention.sliding_window_pattern as an array), or an int n (layer il slides when il % n < n - 1), else the
  // arch's default n (0: every layer slides).
  Result<std::vector<bool>> sliding_layers(int64_t n_layer, int64_t default_pattern) const;
  // rope.dimension_sections' first three values (M-RoPE's t, h, w), required.
  Result<nlohmann::json> rope_sections() const;

 private:
  const GgufFile& f_;
  std::string arch_;
};

// Every tensor the layers need, checked by its GGUF name ("blk.N.<name>") before any is mapped (the model would
// otherwise report the HF name it misses, which the file's owner cannot find in it).
Status gguf_check_layer_tensors(const GgufFile& f, int64_t n_layer,
                                const std::function<std::vector<const char*>(int64_t)>& need);
// The layer of a "blk.N.<rest>" name (N as written: 1 to 6 digits) and its rest; nullopt for any other name.
std::optional<std::pair<std::string, std::string>> gguf_layer_name(const std::string& name);

// An mmproj file's `clip.<key>` (null when absent), as a bounded non-negative integer (`def` when absent; without
// `def` the key is required) and as an array of n numbers.
const GgufValue* gguf_clip_key(const GgufFile& f, const std::string& key);
Result<int64_t> gguf_clip_int(const GgufFile& f, const std::string& key, std::optional<int64_t> def = std::nullopt);
Result<nlohmann::json> gguf_clip_floats(const GgufFile& f, const std::string& key, size_t n);
// An array-of-strings key (tokenizer.ggml.tokens, .merges); empty when absent and not required.
Result<std::vector<std::string>> gguf_string_array(const GgufFile& f, const char* key, bool required);
// A token's id in a text GGUF's vocabulary (tokenizer.ggml.tokens); the error says images need it.
Result<int64_t> gguf_token_id(const GgufFile& text, const std::string& token);

}  // namespace pipit
