// Tokenizer: reads a HuggingFace tokenizer.json (+ tokenizer_config.json) and encodes/decodes exactly as the
// HF `tokenizers` Rust crate does. Pipeline: added tokens split out -> normalizer -> pre-tokenizer -> model (BPE)
// -> post-processor (BOS/EOS); decode: id -> token -> decoders chain.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit {

struct TokenizerParts;

// What pipit needs from tokenizer_config.json (the raw JSON is kept for the chat template's context).
struct TokenizerConfig {
  std::string chat_template;                           // default template ("" when the model has none)
  std::map<std::string, std::string> chat_templates;   // named templates when the config holds a list
  std::string bos_token, eos_token, pad_token, unk_token;  // token *strings* ("" when unset)
  nlohmann::json raw = nlohmann::json::object();
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // tokenizer_config_json may be empty.
  static Result<std::shared_ptr<Tokenizer>> load(std::string_view tokenizer_json, std::string_view tokenizer_config_json);
  // A tokenizer held as parts (format/tokenizer_parts.h: a GGUF vocabulary), consumed: the tokenizer that
  // load() gives for the texts of those parts (tokenizer_parts_texts), built without writing and parsing them.
  static Result<std::shared_ptr<Tokenizer>> load_parts(TokenizerParts&& parts);
  // The compiled form of a tokenizer.json (tokenizer/compiled_tokenizer.cpp): its vocabulary and merges resolved to
  // ids, the rest of it as JSON, in one byte string that a .pipit stores beside the text. load_compiled() reads it
  // back (in place: `compiled` need not outlive the tokenizer) to the tokenizer load() gives for the text, without
  // lexing the text's vocabulary or looking up the tokens of every merge. compile() fails for what load() refuses.
  static Result<std::string> compile(std::string_view tokenizer_json);
  static Result<std::shared_ptr<Tokenizer>> load_compiled(std::string_view compiled,
                                                          std::string_view tokenizer_config_json);
  // A directory holding tokenizer.json and optionally tokenizer_config.json.
  static Result<std::shared_ptr<Tokenizer>> load_dir(const std::string& dir);

  // Special/added token strings in `text` are matched (split_special_tokens = false, as HF does by default).
  virtual Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens) const = 0;
  // Invalid UTF-8 produced by byte tokens is replaced by U+FFFD exactly as HF does.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const = 0;

  virtual int32_t vocab_size() const = 0;  // highest id + 1, added tokens included
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::string id_to_token(int32_t id) const = 0;  // "" when out of range
  virtual bool is_special(int32_t id) const = 0;

  const TokenizerConfig& config() const { return config_; }

 protected:
  TokenizerConfig config_;
};

// Incremental detokenizer: feeding ids one by one yields, concatenated, exactly decode(all ids), and every
// returned piece is valid UTF-8 (bytes of an unfinished character are held back until it completes).
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tok, bool skip_special_tokens);
  std::string push(int32_t id);  // text that became final with this id (may be "")
  std::string flush();           // whatever is held back at the end of the stream
  void reset();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t emitted_ = 0;  // bytes of decode(ids_) already returned
};

}  // namespace pipit
