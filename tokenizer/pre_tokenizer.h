// Pre-tokenizers (private header): split each normalized segment into the words the model sees, and map bytes
// to the byte-level alphabet where the tokenizer asks for it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit::tok {

struct Piece {
  std::string text;
  // True when the piece starts at original offset 0 (HF offsets_original().0 == 0); only Metaspace's
  // prepend_scheme "first" reads it. Pieces cut at a later position of a normalized segment are treated as not
  // starting at 0 even when every normalized byte before the cut was inserted by a normalizer (a HF corner case).
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their splits; empty splits are dropped.
  virtual Status pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

Result<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const nlohmann::json& j, const std::string& where,
                                                          int depth = 0);

}  // namespace pipit::tok
