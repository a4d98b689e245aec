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

class JsonFields;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Token -> id for a vocab: open addressing over 64-bit slots that hold each token's hash beside its index, so a probe
// reads only the slot until the hashes match. A repeated token keeps its last id (as reading the JSON object into a
// map does).
class TokenIndex {
 public:
  void reserve(size_t n);
  void set(std::string token, int32_t id);
  // The whole vocabulary at once, token i with id i (a GGUF's list of tokens), into an empty index: moves `tokens` in
  // without a copy of each. False, and nothing taken, when a token repeats (set() then decides which id it keeps).
  bool adopt(std::vector<std::string>& tokens);
  std::optional<int32_t> find(std::string_view token) const { return find(token, hash(token)); }
  // find() in two steps, for many lookups at once: fetch() the slot a hash probes first, find() once it has arrived
  static uint32_t hash(std::string_view s) { return static_cast<uint32_t>(std::hash<std::string_view>{}(s)); }
  void fetch(uint32_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
  }

  std::optional<int32_t> find(std::string_view token, uint32_t h) const;
  size_t size() const { return tokens_.size(); }
  const std::string& token(size_t i) const { return tokens_[i]; }
  int32_t id(size_t i) const { return ids_[i]; }

 private:
  static uint64_t slot(uint32_t h, size_t i) { return uint64_t(h) << 32 | uint64_t(i + 1); }
  void rehash(size_t n_slots);
  std::vector<std::string> tokens_;
  std::vector<int32_t> ids_;
  std::vector<uint64_t> slots_;  // hash << 32 | (1 + index into tokens_), 0 when empty
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
// The vocabulary and merges as Bpe::parse resolved them, in the compiled form a .pipit stores beside tokenizer.json
// (tokenizer/compiled_tokenizer.h): every token with its id in the order they were added (a repeated token once, with
// the id it kept), every merge as the ids of its pair, its rank and the id of the merged token. Read in place from the
// file, this skips the JSON lexing and the token lookups of each merge that are most of a 150k-vocab load.
// Little-endian records: vocab n_vocab x {u32 offset, u32 length, i32 id} into `strings`; merges n_merges x
// {i32 left, i32 right, u32 rank, i32 merged}.
// The records' integers (and the compiled tokenizer's header, tokenizer/compiled_tokenizer.cpp).
inline uint32_t load_le32(const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}
inline void append_le32(std::string& out, uint32_t v) {
  const char b[4] = {char(v), char(v >> 8), char(v >> 16), char(v >> 24)};
  out.append(b, 4);
}
struct BpeResolved {
  static constexpr size_t kVocabRecord = 12, kMergeRecord = 16;
  const uint8_t* vocab = nullptr;
  const uint8_t* merges = nullptr;
  uint32_t n_vocab = 0, n_merges = 0;
  std::string_view strings;
};
struct BpeTables {
  bool has_vocab = false, has_merges = false;
  std::vector<std::pair<std::string, nlohmann::json>> vocab;  // in file order
  std::vector<BpeMerge> merges;                                // in file order
  // A vocabulary held as its tokens in id order and merges all "a b" (a GGUF's, TokenizerParts), used instead of
  // `vocab` / `merges` when set: taken whole, without a pair or a BpeMerge made for each of 150k entries.
  bool vocab_by_id = false, merges_as_text = false;
  std::vector<std::string> tokens_by_id, merge_texts;
  std::optional<BpeResolved> resolved;  // when set, the tables come from here (the tree's are not read)
};

class Bpe {
 public:
  // `tables`, when given, holds the vocab and merges that were lifted out of `j`.
  static Result<std::unique_ptr<Bpe>> parse(const nlohmann::json& j, const std::string& where,
                                            BpeTables* tables = nullptr);

  // Appends the ids of one pre-tokenized word (non-empty, valid UTF-8).
  Status tokenize(std::string_view word, std::vector<int32_t>& out, BpeCache* cache) const;

  // The resolved tables (BpeResolved's records), to be read back through BpeTables::resolved.
  void export_resolved(std::string& vocab, std::string& merges, std::string& strings) const;

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
  void fetch_merge(int32_t a, int32_t b) const;  // the slot insert_merge(a, b, ...) probes first, into the cache
  Status merge_word(std::string_view word, std::vector<int32_t>& ids) const;
  void size_merges(size_t n);  // an empty merge table for n merges
  // BpeResolved's records: the vocabulary (returns the highest id), then, once vocab_r_ is built, the merges
  Result<int32_t> read_resolved_vocab(const BpeResolved& r, JsonFields& f);
  Status read_resolved_merges(const BpeResolved& r, JsonFields& f);

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
