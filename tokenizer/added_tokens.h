// Added tokens (private header): the special and normal tokens listed in tokenizer.json's "added_tokens", matched
// in the input before the model runs. Tokens with normalized=false are matched in the raw text, the others in each
// normalized segment. Matching is leftmost-longest, then the single_word / lstrip / rstrip rules apply, exactly as
// in HF tokenizers/src/tokenizer/added_vocabulary.rs (v0.22).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"

namespace pipit::tok {

struct AddedToken {
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
  bool operator==(const AddedToken&) const = default;
};

// A slice of the text: either plain text (id < 0) or an added token.
struct Segment {
  size_t start, end;
  int32_t id;
};

// A byte trie answering leftmost-longest, non-overlapping matches of a fixed set of strings.
class TokenTrie {
 public:
  void build(const std::vector<std::string>& patterns, const std::vector<int32_t>& ids);
  // Appends {start, end, id} of each match.
  void find_all(std::string_view text, std::vector<Segment>& out) const;
  bool empty() const { return n_patterns_ == 0; }

 private:
  struct Edge { uint8_t byte; int32_t child; };
  struct Node { uint32_t edge_begin = 0, edge_end = 0; int32_t id = -1; };
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;  // per node, sorted by byte
  int32_t root_child_[256];
  bool first_byte_[256] = {};
  size_t n_patterns_ = 0;
};

class AddedVocabulary {
 public:
  // Registers `tokens` in order, as HF add_tokens does: a content already in the model vocab keeps the model's
  // id; the others get ids from the model's vocab size upwards (the "id" field of tokenizer.json is not used).
  Status build(const std::vector<AddedToken>& tokens, const Bpe& model, const Normalizer* normalizer);

  // Splits `text` around added tokens; `normalized_pass` picks the tokens matched after normalization.
  void split(std::string_view text, bool normalized_pass, std::vector<Segment>& out) const;

  std::optional<int32_t> token_to_id(std::string_view content) const;
  const std::string* id_to_token(int32_t id) const;
  bool is_special_content(std::string_view content) const { return special_set_.count(std::string(content)) > 0; }
  int32_t max_id() const;

 private:
  std::unordered_map<std::string, int32_t> by_content_;
  std::unordered_map<int32_t, AddedToken> by_id_;
  std::set<std::string> special_set_;
  TokenTrie raw_trie_, normalized_trie_;
};

// Parses one entry of "added_tokens".
Result<AddedToken> parse_added_token(const nlohmann::json& j, const std::string& where);

}  // namespace pipit::tok
