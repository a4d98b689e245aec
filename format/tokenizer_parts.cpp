// TokenizerParts written out as the HF tokenizer.json / tokenizer_config.json texts (format/tokenizer_parts.h).
#include "format/tokenizer_parts.h"

#include <iterator>
#include <utility>

namespace pipit {

using nlohmann::json;

TokenizerTexts tokenizer_parts_texts(TokenizerParts p) {
  json vocab = json::object();
  // emplace keeps the first id of a token that repeats
  for (size_t id = 0; id < p.tokens.size(); ++id) vocab.emplace(p.tokens[id], int64_t(id));
  json& model = p.tokenizer["model"];
  model["vocab"] = std::move(vocab);
  if (!p.merges_in_tree)
    model["merges"] = json::array_t(std::make_move_iterator(p.merges.begin()), std::make_move_iterator(p.merges.end()));
  TokenizerTexts out;
  // invalid UTF-8 in a token must not throw out of dump(): replace it (HF files are valid UTF-8 by construction)
  out.tokenizer_json = p.tokenizer.dump(-1, ' ', false, json::error_handler_t::replace);
  out.tokenizer_config_json = p.config.dump(2, ' ', false, json::error_handler_t::replace);
  return out;
}

size_t tokenizer_parts_text_bytes(const TokenizerParts& p) {
  size_t n = p.tokenizer.dump(-1, ' ', false, json::error_handler_t::replace).size();
  for (size_t id = 0; id < p.tokens.size(); ++id) n += p.tokens[id].size() + 4 + std::to_string(id).size();  // "t":id,
  if (!p.merges_in_tree)
    for (const auto& m : p.merges) n += m.size() + 3;  // "a b",
  return n;
}

}  // namespace pipit
