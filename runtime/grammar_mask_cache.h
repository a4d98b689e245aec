// Grammar::MaskCache (grammar.h): made with the grammar (grammar.cpp), filled by the matchers (grammar_match.cpp).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/grammar.h"

namespace pipit {

struct Grammar::MaskCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const std::vector<uint8_t>>> masks;
};

}  // namespace pipit
