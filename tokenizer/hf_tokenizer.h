// HfTokenizer (private header): the Tokenizer built from a HuggingFace tokenizer.json. Pipeline per encode:
// added tokens matched in the raw text -> normalizer per remaining segment -> added tokens matched in the
// normalized text -> pre-tokenizer -> BPE per piece -> truncation -> post-processor -> padding.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pipit {

// Parses tokenizer_config.json (see TokenizerConfig); an empty string gives an empty config.
Result<TokenizerConfig> parse_tokenizer_config(std::string_view text);
// The same from its tree (kept as the config's raw JSON).
Result<TokenizerConfig> tokenizer_config_from_json(nlohmann::json raw);

// Parses tokenizer.json, moving the entries of model.vocab and model.merges into `tables` instead of the tree (which
// keeps them empty).
Result<nlohmann::json> parse_tokenizer_json(std::string_view text, tok::BpeTables& tables);

class HfTokenizer final : public Tokenizer {
 public:
  // `tables`: model.vocab / model.merges already lifted out of `j` (see BpeTables), or nullptr.
  static Result<std::shared_ptr<HfTokenizer>> create(const nlohmann::json& j, tok::BpeTables* tables = nullptr);
  void set_config(TokenizerConfig c) { config_ = std::move(c); }
  const tok::Bpe& model() const { return *model_; }

  // Invalid UTF-8 in `text` is first repaired like Rust's String::from_utf8_lossy (each maximal invalid subpart
  // becomes U+FFFD), which is what HF receives when a binding converts bytes to a string.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  int32_t vocab_size() const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  bool is_special(int32_t id) const override;

 private:
  struct Truncation {
    size_t max_length = 0;
    bool left = false;  // direction "Left": keep the end
  };
  struct Padding {
    size_t fixed = 0;  // 0: BatchLongest (a single sequence is never padded)
    size_t multiple = 0;
    bool left = false;
    int32_t pad_id = 0;
  };
  Status parse(const nlohmann::json& j, tok::BpeTables* tables);
  Status encode_text(std::string_view text, std::vector<int32_t>& ids) const;
  const std::string* token_of(int32_t id) const;

  std::unique_ptr<tok::Normalizer> normalizer_;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<tok::Bpe> model_;
  std::unique_ptr<tok::PostProcessor> post_processor_;
  std::unique_ptr<tok::Decoder> decoder_;
  tok::AddedVocabulary added_;
  std::optional<Truncation> truncation_;
  std::optional<Padding> padding_;
  int32_t vocab_size_ = 0;
};

}  // namespace pipit
