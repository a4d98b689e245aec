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

// Token -> id for a vocab: open addressing over 32-bit slots with the hashes kept, so a lookup touches one or two
// cache lines. A repeated token keeps its last id (as reading the JSON object into a map does).
class TokenIndex {
 public:
  void reserve(size_t n);
  void set(std::string token, int32_t id);
  std::optional<int32_t> find(std::string_view token) const;
  size_t size() const { return tokens_.size(); }
  const std::string& token(size_t i) const { return tokens_[i]; }
  int32_t id(size_t i) const { return ids_[i]; }

 private:
  void rehash(size_t n_slots);
  std::vector<std::string> tokens_;
  std::vector<int32_t> ids_;
  std::vector<uint32_t> hashes_;
  std::vector<uint32_t> slots_;  // 1 + index into tokens_, 0 when empty
  size_t mask_ = 0;
};

// Word -> ids memo for one encode call (so encode stays const and thread-safe without locks).
class BpeCache {
 public:
  const int32_t* find(std::string_view word, size_t* n) const;
  void put(std::string_view word, const int32_t* ids, size_t n);

 private:
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, StringHash, std::equal_to<>> map_;
  std::vector<int32_t> pool_;
};

// model.vocab and model.merges lifted out of tokenizer.json while it is parsed (tokenizer_config.cpp): building a
// JSON tree for a 250k-entry vocab and 500k merges costs more than everything else in loading.
struct BpeMerge {
  // kString: the legacy "a b", whole in `a` (Bpe::parse splits and checks it); kPair: ["a", "b"]; kOther: anything
  // else (refused by Bpe::parse with its index)
  enum Form : uint8_t { kString, kPair, kOther };
  std::string a, b;
  Form form = kOther;
};
struct BpeTables {
  bool has_vocab = false, has_merges = false;
  std::vector<std::pair<std::string, nlohmann::json>> vocab;  // in file order
  std::vector<BpeMerge> merges;                                // in file order
};

class Bpe {
 public:
  // `tables`, when given, holds the vocab and merges that were lifted out of `j`.
  static Result<std::unique_ptr<Bpe>> parse(const nlohmann::json& j, const std::string& where,
                                            BpeTables* tables = nullptr);

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

  TokenIndex vocab_;
  std::vector<const std::string*> vocab_r_;  // id -> token (points into vocab_'s strings)
  std::vector<MergeSlot> merges_;            // open addressing, power-of-two size
  size_t merges_mask_ = 0;
  std::optional<std::string> unk_token_;  // set when the model has an unk token
  std::optional<int32_t> unk_id_;          // its id, when it is in the vocab
  std::string prefix_, suffix_;  // continuing_subword_prefix / end_of_word_suffix ("" = none)
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];  // id of "<0xNN>", -1 when absent
};

}  // namespace pipit::tok
