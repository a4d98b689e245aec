// Hand-written equivalents of the common pre-tokenizer regexes (private header); see regex_fast.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace pipit::tok {

enum class FastPattern { kNone, kGpt2, kLlama3, kQwen2 };

// The matcher for an Oniguruma pattern string, when it is one of the known ones (compared byte for byte).
FastPattern fast_pattern_for(std::string_view pattern);

// Appends the matches of `kind` in `text` (valid UTF-8), as Regex::find_all does.
void fast_find_all(FastPattern kind, std::string_view text, std::vector<std::pair<size_t, size_t>>& out);

}  // namespace pipit::tok
