// Loading: Tokenizer::load / load_dir, and tokenizer_config.json (chat template(s), bos/eos/pad/unk token strings).
#include <filesystem>

#include "core/json_depth.h"
#include "core/optional_file.h"
#include "core/storage.h"
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
  TokenizerConfig c;
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return c;
  PIPIT_ASSIGN_OR_RETURN(c.raw, parse_json(text, "tokenizer_config.json"));
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

// Parses tokenizer.json, moving the entries of model.vocab and model.merges into `tables` instead of the tree.
Result<json> parse_tokenizer_json(std::string_view text, tok::BpeTables& tables) {
  if (json_depth(text) > kMaxJsonDepth)
    return Error::format("[tokenizer.json] JSON nested deeper than {} levels", kMaxJsonDepth);
  std::string top_key, model_key;
  bool in_vocab = false, in_merges = false;
  std::string vocab_key;
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) -> bool {
    using E = json::parse_event_t;
    if (ev == E::key && depth == 1) top_key = parsed.get<std::string>();
    if (top_key != "model") return true;
    if (ev == E::key && depth == 2) model_key = parsed.get<std::string>();
    if (depth == 2 && ev == E::object_start && model_key == "vocab") in_vocab = tables.has_vocab = true;
    if (depth == 2 && ev == E::array_start && model_key == "merges") in_merges = tables.has_merges = true;
    if (depth == 2 && (ev == E::object_end || ev == E::array_end)) in_vocab = in_merges = false;
    if (depth != 3) return true;
    if (in_vocab) {
      if (ev == E::key) {
        vocab_key = parsed.get<std::string>();
        return true;
      }
      if (ev == E::value || ev == E::object_end || ev == E::array_end) {
        tables.vocab.emplace_back(std::move(vocab_key), std::move(parsed));
        return false;
      }
    }
    if (in_merges && (ev == E::value || ev == E::object_end || ev == E::array_end)) {
      tables.merges.push_back(std::move(parsed));
      return false;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    return Error::format("[tokenizer.json] not valid JSON: {}", e.what());
  }
}

Result<std::shared_ptr<HfTokenizer>> load_hf(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
  tok::BpeTables tables;
  PIPIT_ASSIGN_OR_RETURN(json j, parse_tokenizer_json(tokenizer_json, tables));
  PIPIT_ASSIGN_OR_RETURN(std::shared_ptr<HfTokenizer> t, HfTokenizer::create(j, &tables));
  PIPIT_ASSIGN_OR_RETURN(TokenizerConfig cfg, parse_tokenizer_config(tokenizer_config_json));
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
