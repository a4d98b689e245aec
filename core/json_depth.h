// How deeply a JSON text nests, found by one pass over its bytes before it is parsed. nlohmann's parser keeps its
// own stack, but copying, comparing and dumping a parsed value recurse once per level, and so do the readers that
// walk what a file describes: a file nested 20,000 deep would overflow the stack there. Every JSON file pipit
// reads (config.json, tokenizer.json, tokenizer_config.json, .pipit and safetensors headers, recipes) is refused
// past kMaxJsonDepth; real files nest fewer than 10 levels.
#pragma once

#include <string_view>

namespace pipit {

constexpr int kMaxJsonDepth = 128;

// The deepest nesting of [ and { outside strings (scanning stops once past `limit`, returning limit + 1).
inline int json_depth(std::string_view text, int limit = kMaxJsonDepth) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace pipit
