// The BPE model (private header): vocab + ranked merges, byte-level (GPT-2, Qwen, Llama-3) or SentencePiece-style
// (byte_fallback, fuse_unk: Llama-2, Mistral, Gemma). Reference: tokenizers/src/models/bpe/{model,word}.rs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Word -> ids memo for one encode call (so encode stays const and thread-safe without locks).
class BpeCache {
 public:
  const int32_t* find(std::string_view word, size_t* n) const;
  void put(std::string_view word, const int32_t* ids, size_t n);

 private:
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, StringHash, std::equal_to<>> map_;
  std::vector<int32_t> pool_;
};

class Bpe {
 public:
  static Result<std::unique_ptr<Bpe>> parse(const nlohmann::json& j, const std::string& where);

  // Appends the ids of one pre-tokenized word (non-empty, valid UTF-8).
  Status tokenize(std::string_view word, std::vector<int32_t>& out, BpeCache* cache) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr when the id is not in the vocab
  size_t vocab_len() const { return vocab_.size(); }  // HF get_vocab_size(): entries, not max id + 1
  int32_t max_id() const { return static_cast<int32_t>(vocab_r_.size()) - 1; }

 private:
  struct MergeSlot {
    uint64_t key;  // (left id << 32) | right id; kEmpty when unused
    uint32_t rank;
    int32_t new_id;
  };
  static constexpr uint64_t kEmpty = ~0ull;
  const MergeSlot* find_merge(int32_t a, int32_t b) const;
  void insert_merge(int32_t a, int32_t b, uint32_t rank, int32_t new_id);
  Status merge_word(std::string_view word, std::vector<int32_t>& ids) const;

  StringMap vocab_;
  std::vector<const std::string*> vocab_r_;  // id -> token (points into vocab_ keys)
  std::vector<MergeSlot> merges_;            // open addressing, power-of-two size
  size_t merges_mask_ = 0;
  std::optional<std::string> unk_token_;  // set when the model has an unk token
  std::optional<int32_t> unk_id_;          // its id, when it is in the vocab
  std::string prefix_, suffix_;  // continuing_subword_prefix / end_of_word_suffix ("" = none)
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];  // id of "<0xNN>", -1 when absent
};

}  // namespace pipit::tok
