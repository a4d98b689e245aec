// Normalizers (private header): the text transforms HF `tokenizers` applies to each non-added-token segment before
// pre-tokenization. Offsets are not tracked: pipit only needs ids.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `s` is valid UTF-8 and stays valid UTF-8.
  virtual Status normalize(std::string& s) const = 0;
};

// Builds a normalizer from its tokenizer.json object; `where` names it in errors ("normalizer").
Result<std::unique_ptr<Normalizer>> parse_normalizer(const nlohmann::json& j, const std::string& where,
                                                     int depth = 0);

}  // namespace pipit::tok
