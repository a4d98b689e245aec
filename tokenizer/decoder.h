// Decoders (private header): turn the token strings of an id sequence back into text, as HF `tokenizers` does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // HF decode_chain: rewrites the token list (the final text is the concatenation).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

Result<std::unique_ptr<Decoder>> parse_decoder(const nlohmann::json& j, const std::string& where,
                                               int depth = 0);

}  // namespace pipit::tok
