// A tokenizer held as the parts of an HF tokenizer.json rather than as its text: what a GGUF vocabulary becomes
// (convert/gguf_tokenizer.cpp). Written out, a 150k-token vocabulary with its merges is ~11 MB of JSON that the loader
// would parse straight back; the loader builds the tokenizer from the parts instead (Tokenizer::load_parts), and
// whatever needs the files themselves (pipit convert writing a .pipit, inspect) asks for tokenizer_parts_texts.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipit {

struct TokenizerParts {
  // tokenizer.json with model.vocab an empty object and model.merges an empty array (unless merges_in_tree)
  nlohmann::json tokenizer;
  nlohmann::json config;  // tokenizer_config.json
  // model.vocab: the token of each id, the id being its index; a token that repeats keeps its first id
  std::vector<std::string> tokens;
  std::vector<std::string> merges;  // model.merges, each "a b"
  // true when the merges were not all "a b" strings and stay in the tree (model.merges), `merges` unused
  bool merges_in_tree = false;
};

struct TokenizerTexts {
  std::string tokenizer_json, tokenizer_config_json;
};

// The tokenizer.json and tokenizer_config.json texts of `p` (consumed): the vocabulary as an object keyed by token
// (sorted, as nlohmann writes objects), invalid UTF-8 in any string replaced by U+FFFD as nlohmann's dump does.
TokenizerTexts tokenizer_parts_texts(TokenizerParts p);

// About the size of tokenizer_parts_texts(p).tokenizer_json, without writing it (string escapes not counted): what the
// memory estimate scales the tokenizer's tables from.
size_t tokenizer_parts_text_bytes(const TokenizerParts& p);

}  // namespace pipit
