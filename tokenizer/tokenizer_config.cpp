// Loading: Tokenizer::load / load_dir, and tokenizer_config.json (chat template(s), bos/eos/pad/unk token strings).
#include <algorithm>
#include <filesystem>
#include <numeric>
#include <optional>
#include <utility>

#include "core/json_depth.h"
#include "core/optional_file.h"
#include "core/storage.h"
#include "core/utf8_check.h"
#include "format/tokenizer_parts.h"
#include "tokenizer/hf_tokenizer.h"

namespace pipit {

using nlohmann::json;

namespace {

Result<json> parse_json(std::string_view text, const char* what) {
  if (json_depth(text) > kMaxJsonDepth)
    return Error::format("[{}] JSON nested deeper than {} levels", what, kMaxJsonDepth);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return Error::format("[{}] not valid JSON: {}", what, e.what());
  }
}

// A special token entry: "<s>", {"content": "<s>", ...} (AddedToken form) or null.
Result<std::string> token_string(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return Error::format("[tokenizer_config.json] field '{}' must be a string or {{\"content\": ...}}, got {}", key,
                       it->dump());
}

}  // namespace

Result<TokenizerConfig> parse_tokenizer_config(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return TokenizerConfig{};
  PIPIT_ASSIGN_OR_RETURN(json raw, parse_json(text, "tokenizer_config.json"));
  return tokenizer_config_from_json(std::move(raw));
}

Result<TokenizerConfig> tokenizer_config_from_json(json raw) {
  TokenizerConfig c;
  c.raw = std::move(raw);
  if (!c.raw.is_object()) return Error::format("[tokenizer_config.json] expected a JSON object at the top level");
  if (auto it = c.raw.find("chat_template"); it != c.raw.end() && !it->is_null()) {
    if (it->is_string()) {
      c.chat_template = it->get<std::string>();
    } else if (it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i) {
        const json& e = (*it)[i];
        if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
            !e["template"].is_string()) {
          return Error::format("[tokenizer_config.json] chat_template[{}] must be {{\"name\": ..., \"template\": ...}}",
                               i);
        }
        c.chat_templates[e["name"].get<std::string>()] = e["template"].get<std::string>();
      }
      if (auto d = c.chat_templates.find("default"); d != c.chat_templates.end()) c.chat_template = d->second;
    } else {
      return Error::format("[tokenizer_config.json] field 'chat_template' must be a string or a list, got {}",
                           it->type_name());
    }
  }
  PIPIT_ASSIGN_OR_RETURN(c.bos_token, token_string(c.raw, "bos_token"));
  PIPIT_ASSIGN_OR_RETURN(c.eos_token, token_string(c.raw, "eos_token"));
  PIPIT_ASSIGN_OR_RETURN(c.pad_token, token_string(c.raw, "pad_token"));
  PIPIT_ASSIGN_OR_RETURN(c.unk_token, token_string(c.raw, "unk_token"));
  return c;
}

namespace {

// SAX events of tokenizer.json: model.vocab's entries and model.merges' go straight into `tables` (the vocab and
// merges of the tree stay empty), everything else into the tree through nlohmann's own DOM builder. A 150k-token
// vocab with 150k merges is nearly all of the file: as JSON values (a parser callback that drops them once built) they
// cost twice the lexing itself (Qwen3's 11 MB: 0.50 -> 0.33 s CPU here).
class TokenizerJsonSax {
 public:
  using Dom = nlohmann::detail::json_sax_dom_parser<json>;
  TokenizerJsonSax(json& root, tok::BpeTables& tables) : dom_(root, /*allow_exceptions=*/true), tables_(tables) {}

  bool null() { return region_ == Region::kNone ? dom_.null() : scalar(nullptr); }
  bool boolean(bool v) { return region_ == Region::kNone ? dom_.boolean(v) : scalar(v); }
  bool number_integer(json::number_integer_t v) { return region_ == Region::kNone ? dom_.number_integer(v) : scalar(v); }
  bool number_unsigned(json::number_unsigned_t v) {
    return region_ == Region::kNone ? dom_.number_unsigned(v) : scalar(v);
  }
  bool number_float(json::number_float_t v, const std::string& s) {
    if (region_ == Region::kNone) return dom_.number_float(v, s);
    return scalar(v);
  }
  bool string(std::string& v) {
    if (region_ == Region::kMerges && depth_ == 3) {  // legacy "a b"
      tables_.merges.push_back({std::move(v), {}, tok::BpeMerge::kString});
      return true;
    }
    if (region_ == Region::kMerges && depth_ == 4 && skip_ == 0) {  // ["a", "b"]
      auto& m = tables_.merges.back();
      if (n_parts_ == 0) m.a = std::move(v);
      else if (n_parts_ == 1) m.b = std::move(v);
      ++n_parts_;
      return true;
    }
    if (region_ == Region::kNone) return dom_.string(v);
    return scalar(std::move(v));
  }
  bool binary(json::binary_t& v) { return region_ == Region::kNone ? dom_.binary(v) : scalar(json::binary(v)); }
  bool key(std::string& k) {
    if (depth_ == 1) {
      top_key_ = k;
      model_key_.clear();  // a second "model" (a duplicate key) starts with no field seen
    }
    if (depth_ == 2 && top_key_ == "model") model_key_ = k;
    if (region_ == Region::kVocab && depth_ == 3) {
      vocab_key_ = std::move(k);
      return true;
    }
    if (region_ == Region::kNone) return dom_.key(k);
    if (sub_) return sub_->key(k);
    return true;
  }
  bool start_object(std::size_t n) { return open(false, n); }
  bool start_array(std::size_t n) { return open(true, n); }
  bool end_object() { return close(false); }
  bool end_array() { return close(true); }
  template <class Exception>
  bool parse_error(std::size_t pos, const std::string& token, const Exception& ex) {
    return dom_.parse_error(pos, token, ex);  // throws ex, as json::parse does
  }

 private:
  enum class Region { kNone, kVocab, kMerges };

  // A value inside the vocab (an id, or anything the BPE parser will refuse with the token's name) or inside the
  // merges (not a string: refused with its index).
  template <class T>
  bool scalar(T&& v) {
    if (sub_) return sub_value(std::forward<T>(v));
    if (region_ == Region::kVocab && depth_ == 3) {
      tables_.vocab.emplace_back(std::move(vocab_key_), json(std::forward<T>(v)));
    } else if (region_ == Region::kMerges && depth_ == 3) {
      tables_.merges.push_back({{}, {}, tok::BpeMerge::kOther});
    } else if (region_ == Region::kMerges && depth_ == 4) {
      tables_.merges.back().form = tok::BpeMerge::kOther;
    }
    return true;
  }
  template <class T>
  bool sub_value(T&& v) {
    json j(std::forward<T>(v));
    if (j.is_null()) return sub_->null();
    if (j.is_boolean()) return sub_->boolean(j.get<bool>());
    if (j.is_number_unsigned()) return sub_->number_unsigned(j.get<json::number_unsigned_t>());
    if (j.is_number_integer()) return sub_->number_integer(j.get<json::number_integer_t>());
    if (j.is_number_float()) return sub_->number_float(j.get<json::number_float_t>(), "");
    if (j.is_string()) return sub_->string(j.get_ref<std::string&>());
    return sub_->binary(j.get_binary());
  }

  bool open(bool array, std::size_t n) {
    bool ok = true;
    if (region_ == Region::kNone) {
      ok = array ? dom_.start_array(n) : dom_.start_object(n);
      if (depth_ == 2 && top_key_ == "model" && !array && model_key_ == "vocab") {
        region_ = Region::kVocab;
        tables_.has_vocab = true;
      } else if (depth_ == 2 && top_key_ == "model" && array && model_key_ == "merges") {
        region_ = Region::kMerges;
        tables_.has_merges = true;
      }
    } else if (region_ == Region::kVocab && depth_ >= 3) {  // a vocab value that is an object or a list: kept whole
      if (depth_ == 3) sub_.emplace(sub_root_);
      ok = array ? sub_->start_array(n) : sub_->start_object(n);
    } else if (region_ == Region::kMerges && depth_ == 3) {
      tables_.merges.push_back({{}, {}, array ? tok::BpeMerge::kPair : tok::BpeMerge::kOther});
      n_parts_ = 0;
      skip_ = 0;
    } else if (region_ == Region::kMerges && depth_ >= 4) {  // nested inside a merge: not a merge
      tables_.merges.back().form = tok::BpeMerge::kOther;
      ++skip_;
    }
    ++depth_;
    return ok;
  }

  bool close(bool array) {
    --depth_;
    if (region_ == Region::kNone) return array ? dom_.end_array() : dom_.end_object();
    if (depth_ == 2) {  // the vocab or the merges end
      region_ = Region::kNone;
      return array ? dom_.end_array() : dom_.end_object();
    }
    if (region_ == Region::kVocab) {
      const bool ok = array ? sub_->end_array() : sub_->end_object();
      if (depth_ == 3) {
        tables_.vocab.emplace_back(std::move(vocab_key_), std::move(sub_root_));
        sub_.reset();
        sub_root_ = json();
      }
      return ok;
    }
    if (depth_ >= 4) {
      --skip_;
    } else if (depth_ == 3 && n_parts_ != 2) {
      tables_.merges.back().form = tok::BpeMerge::kOther;
    }
    return true;
  }

  Dom dom_;
  tok::BpeTables& tables_;
  Region region_ = Region::kNone;
  int depth_ = 0, n_parts_ = 0, skip_ = 0;
  std::string top_key_, model_key_, vocab_key_;
  json sub_root_;
  std::optional<Dom> sub_;
};

}  // namespace

Result<json> parse_tokenizer_json(std::string_view text, tok::BpeTables& tables) {
  if (json_depth(text) > kMaxJsonDepth)
    return Error::format("[tokenizer.json] JSON nested deeper than {} levels", kMaxJsonDepth);
  json root;
  // Every entry of model.vocab and model.merges but the last is followed by a comma, so the text's commas bound
  // both tables: reserved up front, the vectors are filled without the reallocations (and their moves of 150k
  // strings, and page faults on each new buffer) that were ~20% of a Qwen3 .pipit's tokenizer load.
  const size_t commas = size_t(std::count(text.begin(), text.end(), ',')) + 1;
  tables.vocab.reserve(commas);
  tables.merges.reserve(commas);
  TokenizerJsonSax sax(root, tables);
  try {
    json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const json::exception& e) {
    return Error::format("[tokenizer.json] not valid JSON: {}", e.what());
  }
  return root;
}

namespace {

Result<std::shared_ptr<HfTokenizer>> load_hf(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
  tok::BpeTables tables;
  PIPIT_ASSIGN_OR_RETURN(json j, parse_tokenizer_json(tokenizer_json, tables));
  PIPIT_ASSIGN_OR_RETURN(std::shared_ptr<HfTokenizer> t, HfTokenizer::create(j, &tables));
  PIPIT_ASSIGN_OR_RETURN(TokenizerConfig cfg, parse_tokenizer_config(tokenizer_config_json));
  t->set_config(std::move(cfg));
  return t;
}

// A token as tokenizer.json holds it once written (tokenizer_parts_texts) and read back: invalid UTF-8 replaced by
// U+FFFD, by the very writer that replaces it there (nlohmann's dump). Tokens are valid UTF-8 but in odd files.
std::string as_written(std::string s) {
  if (utf8_error_offset(s) == std::string::npos) return s;
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

// The tokenizer from its parts, as load_hf builds it from their texts: the vocabulary and merges go straight into
// the tables the SAX parser would have filled (BpeTables), the rest of the tree as read back from its text.
Result<std::shared_ptr<HfTokenizer>> load_hf_parts(TokenizerParts&& p) {
  // The tree and the config hold no vocabulary or merges (a few kB): written and read back, so that every string and
  // number in them is what the text would give (invalid UTF-8 replaced; ids as JSON reads them, unsigned).
  PIPIT_ASSIGN_OR_RETURN(json j, parse_json(p.tokenizer.dump(-1, ' ', false, json::error_handler_t::replace),
                                            "tokenizer.json"));
  PIPIT_ASSIGN_OR_RETURN(json cfg_raw, parse_json(p.config.dump(-1, ' ', false, json::error_handler_t::replace),
                                                  "tokenizer_config.json"));
  tok::BpeTables tables;
  tables.has_vocab = true;
  std::vector<std::string>& tokens = p.tokens;
  auto valid = [](const std::vector<std::string>& v) {
    return std::all_of(v.begin(), v.end(), [](const std::string& t) { return utf8_error_offset(t) == std::string::npos; });
  };
  if (valid(tokens)) {
    // Taken whole, token i with id i; a token that repeats keeps its first id, the one tokenizer.json's object keeps
    // (Bpe::parse sees to it)
    tables.vocab_by_id = true;
    tables.tokens_by_id = std::move(tokens);
  } else {
    // Replacing invalid UTF-8 can make two tokens one: the text has them in the order of its keys (the raw tokens,
    // sorted, each once with its first id) and the one read last wins; so here.
    tables.vocab.reserve(tokens.size());
    std::vector<uint32_t> order(tokens.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return tokens[a] < tokens[b]; });
    for (size_t k = 0; k < order.size(); ++k)
      if (k == 0 || tokens[order[k - 1]] != tokens[order[k]])
        tables.vocab.emplace_back(as_written(tokens[order[k]]), json(uint64_t(order[k])));
  }
  tokens = {};
  if (!p.merges_in_tree) {
    tables.has_merges = true;
    if (valid(p.merges)) {
      tables.merges_as_text = true;
      tables.merge_texts = std::move(p.merges);
    } else {
      tables.merges.reserve(p.merges.size());
      for (std::string& m : p.merges) tables.merges.push_back({as_written(std::move(m)), {}, tok::BpeMerge::kString});
    }
    p.merges = {};
  }
  PIPIT_ASSIGN_OR_RETURN(std::shared_ptr<HfTokenizer> t, HfTokenizer::create(j, &tables));
  PIPIT_ASSIGN_OR_RETURN(TokenizerConfig cfg, tokenizer_config_from_json(std::move(cfg_raw)));
  t->set_config(std::move(cfg));
  return t;
}

// Newer checkpoints keep the template in chat_template.jinja (or a processor's chat_template.json).
Status read_template_file(const std::string& dir, TokenizerConfig& cfg) {
  namespace fs = std::filesystem;
  std::string jinja = (fs::path(dir) / "chat_template.jinja").string();
  std::string cjson = (fs::path(dir) / "chat_template.json").string();
  PIPIT_ASSIGN_OR_RETURN(bool has_jinja, optional_file(jinja));
  PIPIT_ASSIGN_OR_RETURN(bool has_cjson, optional_file(cjson));
  if (has_jinja) {
    PIPIT_ASSIGN_OR_RETURN(cfg.chat_template, read_file(jinja));
  } else if (has_cjson) {
    PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(cjson));
    PIPIT_ASSIGN_OR_RETURN(json j, parse_json(text, "chat_template.json"));
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
      cfg.chat_template = j["chat_template"].get<std::string>();
  }
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<Tokenizer>> Tokenizer::load(std::string_view tokenizer_json,
                                                   std::string_view tokenizer_config_json) {
  PIPIT_ASSIGN_OR_RETURN(std::shared_ptr<HfTokenizer> t, load_hf(tokenizer_json, tokenizer_config_json));
  return std::shared_ptr<Tokenizer>(std::move(t));
}

Result<std::shared_ptr<Tokenizer>> Tokenizer::load_parts(TokenizerParts&& parts) {
  PIPIT_ASSIGN_OR_RETURN(std::shared_ptr<HfTokenizer> t, load_hf_parts(std::move(parts)));
  return std::shared_ptr<Tokenizer>(std::move(t));
}

Result<std::shared_ptr<Tokenizer>> Tokenizer::load_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::string tj = (fs::path(dir) / "tokenizer.json").string();
  if (!file_exists(tj)) return Error::not_found("[tokenizer] {}: no tokenizer.json in this folder", dir);
  PIPIT_ASSIGN_OR_RETURN(std::string tok_text, read_file(tj));
  std::string cfg_text;
  std::string cj = (fs::path(dir) / "tokenizer_config.json").string();
  PIPIT_ASSIGN_OR_RETURN(bool has_config, optional_file(cj));
  if (has_config) {
    PIPIT_ASSIGN_OR_RETURN(cfg_text, read_file(cj));
  }
  auto r = load_hf(tok_text, cfg_text);
  if (!r) return r.status().with_context(fmt("[tokenizer] {}", dir));
  std::shared_ptr<HfTokenizer> t = std::move(r).value();
  if (t->config().chat_template.empty() && t->config().chat_templates.empty()) {
    TokenizerConfig cfg = t->config();
    PIPIT_TRY(read_template_file(dir, cfg).with_context(fmt("[tokenizer] {}", dir)));
    t->set_config(std::move(cfg));
  }
  return std::shared_ptr<Tokenizer>(std::move(t));
}

}  // namespace pipit
