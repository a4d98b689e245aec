// Chat templates: the public API over the Jinja interpreter, and the context that transformers' apply_chat_template
// builds (reference: transformers tokenization_utils_base.apply_chat_template and chat_template_utils
// render_jinja_template). See chat_template.h.
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "tokenizer/jinja_interp.h"
#include "tokenizer/jinja_parser.h"
#include "tokenizer/jinja_text.h"

namespace pipit {

namespace {

using Vars = std::vector<std::pair<std::string, jinja::Value>>;

void put(Vars& vars, const std::string& name, jinja::Value v) {
  for (auto& [k, x] : vars) {
    if (k == name) {
      x = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

Status with_prefix(const Status& st) { return Status(st.code(), "[chat_template] " + st.message()); }

template <class Json>
Result<std::string> render_program(const jinja::Program& program, const Json& context) {
  if (!context.is_object()) return Error::invalid_argument("[chat_template] the context must be a JSON object");
  Vars vars;
  for (auto it = context.begin(); it != context.end(); ++it) {
    Result<jinja::Value> v = jinja::from_json(it.value());
    if (!v.is_ok()) return with_prefix(v.status().with_context(it.key()));
    put(vars, it.key(), std::move(v).value());
  }
  jinja::Interp interp(program, jinja::RenderLimits{});
  Result<std::string> out = interp.render(std::move(vars));
  if (!out.is_ok()) return with_prefix(out.status());
  return out;
}

// Parsed templates by source. Models have one or two templates; a small cache keeps the server from re-parsing per
// request without growing without bound.
Result<std::shared_ptr<const jinja::Program>> cached_program(const std::string& source) {
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<const jinja::Program>>> cache;  // most recent first
  constexpr size_t kCapacity = 8;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (it->first == source) {
        cache.splice(cache.begin(), cache, it);
        return cache.front().second;
      }
    }
  }
  Result<std::shared_ptr<const jinja::Program>> parsed = jinja::parse_template(source);
  if (!parsed.is_ok()) return with_prefix(parsed.status());
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace_front(source, parsed.value());
  if (cache.size() > kCapacity) cache.pop_back();
  return parsed;
}

// A special token from tokenizer_config.json: a string, or an AddedToken object {"content": ...}.
const nlohmann::json* token_content(const nlohmann::json& v) {
  if (v.is_string()) return &v;
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return &v["content"];
  return nullptr;
}

// transformers' special_tokens_map: the standard special-token attributes that are set, plus the model-specific
// extra_special_tokens (which recent transformers versions add to the same map).
void add_special_tokens(const TokenizerConfig& cfg, Vars& vars) {
  static const char* kNames[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
  const nlohmann::json& raw = cfg.raw;
  for (const char* name : kNames) {
    std::string value;
    if (raw.is_object() && raw.contains(name)) {
      if (const nlohmann::json* c = token_content(raw[name])) value = c->get<std::string>();
    }
    if (value.empty()) {
      std::string_view n = name;
      value = n == "bos_token" ? cfg.bos_token : n == "eos_token" ? cfg.eos_token : n == "pad_token" ? cfg.pad_token
              : n == "unk_token" ? cfg.unk_token : "";
    }
    if (!value.empty()) put(vars, name, jinja::Value::string(value));
  }
  if (!raw.is_object()) return;
  if (raw.contains("additional_special_tokens") && raw["additional_special_tokens"].is_array()) {
    jinja::ValueList list;
    for (const auto& t : raw["additional_special_tokens"])
      if (const nlohmann::json* c = token_content(t)) list.push_back(jinja::Value::string(c->get<std::string>()));
    put(vars, "additional_special_tokens", jinja::Value::list(std::move(list)));
  }
  if (raw.contains("extra_special_tokens") && raw["extra_special_tokens"].is_object()) {
    for (auto it = raw["extra_special_tokens"].begin(); it != raw["extra_special_tokens"].end(); ++it)
      if (const nlohmann::json* c = token_content(it.value())) put(vars, it.key(), jinja::Value::string(c->get<std::string>()));
  }
}

// The text the model should continue: the last message's content (or its last text part).
template <class Json>
Result<std::string> final_message_text(const Json& messages) {
  if (messages.empty() || !messages.back().is_object() || !messages.back().contains("content"))
    return Error::invalid_argument("[chat_template] continue_final_message needs a final message with content");
  const Json& content = messages.back()["content"];
  if (content.is_string()) return content.template get<std::string>();
  if (content.is_array()) {
    for (auto it = content.rbegin(); it != content.rend(); ++it)
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) return (*it)["text"].template get<std::string>();
  }
  return Error::invalid_argument(
      "[chat_template] continue_final_message is set but we could not find any text to continue in the final message!");
}

// transformers: cut the rendered chat right after the final message, so the model continues it.
Result<std::string> cut_after_final(std::string rendered, const std::string& final_message) {
  std::string stripped = jinja::py_strip(final_message, nullptr, true, true);
  size_t loc = rendered.rfind(stripped);
  if (loc == std::string::npos)
    return Error::invalid_argument(
        "[chat_template] continue_final_message is set but the final message does not appear in the chat after "
        "applying the chat template! This can happen if the chat template deletes portions of the final message.");
  std::string lstripped = jinja::py_strip(final_message, nullptr, true, false);
  if (rendered.compare(loc, lstripped.size(), final_message) == 0 && lstripped.size() == final_message.size())
    rendered.resize(std::min(rendered.size(), loc + final_message.size()));
  else
    rendered.resize(loc + stripped.size());
  return rendered;
}

template <class Json>
Result<std::string> apply_impl(const TokenizerConfig& cfg, const Json& messages, bool add_generation_prompt,
                               const Json& extra, size_t max_output_bytes = 0) {
  if (!messages.is_array()) return Error::invalid_argument("[chat_template] messages must be a JSON array");
  if (!extra.is_null() && !extra.is_object())
    return Error::invalid_argument("[chat_template] the extra context must be a JSON object");
  auto get = [&](const char* key) -> const Json* {
    if (!extra.is_object()) return nullptr;
    auto it = extra.find(key);
    return it == extra.end() || it->is_null() ? nullptr : &*it;
  };
  const Json* tools = get("tools");
  const Json* documents = get("documents");
  if (tools) {
    if (!tools->is_array()) return Error::invalid_argument("[chat_template] tools must be a JSON array");
    for (const auto& t : *tools)
      if (!t.is_object())
        return Error::invalid_argument("[chat_template] each tool must be a JSON schema object, got {}", t.type_name());
  }
  if (documents) {
    if (!documents->is_array()) return Error::invalid_argument("[chat_template] documents must be a JSON array");
    for (const auto& d : *documents)
      if (!d.is_object())
        return Error::invalid_argument("[chat_template] Documents should be a list of dicts with 'title' and 'text' keys!");
  }
  bool continue_final = false;
  if (const Json* c = get("continue_final_message")) continue_final = c->is_boolean() && c->template get<bool>();
  if (continue_final && add_generation_prompt)
    return Error::invalid_argument(
        "[chat_template] continue_final_message and add_generation_prompt are not compatible. Use "
        "continue_final_message when you want the model to continue the final message, and add_generation_prompt "
        "when you want to add a header that will prompt it to start a new assistant message instead.");

  // Which template: a named or literal one from the caller, "tool_use" with tools, else the default.
  std::string source = cfg.chat_template;
  if (const Json* name = get("chat_template"); name && name->is_string()) {
    std::string n = name->template get<std::string>();
    auto it = cfg.chat_templates.find(n);
    source = it != cfg.chat_templates.end() ? it->second : n;
  } else if (tools && cfg.chat_templates.count("tool_use")) {
    source = cfg.chat_templates.at("tool_use");
  } else if (source.empty() && cfg.chat_templates.count("default")) {
    source = cfg.chat_templates.at("default");
  }
  if (source.empty())
    return Error::not_found(
        "[chat_template] the model has no chat template (no \"chat_template\" in tokenizer_config.json); "
        "pass the prompt as raw text instead (--no-template)");
  PIPIT_ASSIGN_OR_RETURN(std::shared_ptr<const jinja::Program> program, cached_program(source));

  Vars vars;
  add_special_tokens(cfg, vars);
  static const char* kNotTemplateVars[] = {"tools", "documents", "chat_template", "continue_final_message", "tokenize",
                                           "padding", "truncation", "max_length", "return_tensors", "return_dict",
                                           "return_assistant_tokens_mask", "tokenizer_kwargs", "messages",
                                           "add_generation_prompt"};
  if (extra.is_object()) {
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      if (std::find(std::begin(kNotTemplateVars), std::end(kNotTemplateVars), it.key()) != std::end(kNotTemplateVars))
        continue;
      Result<jinja::Value> v = jinja::from_json(it.value());
      if (!v.is_ok()) return with_prefix(v.status().with_context(it.key()));
      put(vars, it.key(), std::move(v).value());
    }
  }
  auto convert = [&](const char* name, const Json* j) -> Status {
    if (!j) {
      put(vars, name, jinja::Value::none());
      return Status::ok();
    }
    Result<jinja::Value> v = jinja::from_json(*j);
    if (!v.is_ok()) return with_prefix(v.status().with_context(name));
    put(vars, name, std::move(v).value());
    return Status::ok();
  };
  PIPIT_TRY(convert("messages", &messages));
  PIPIT_TRY(convert("tools", tools));
  PIPIT_TRY(convert("documents", documents));
  put(vars, "add_generation_prompt", jinja::Value::boolean(add_generation_prompt));

  jinja::RenderLimits limits;
  if (max_output_bytes > 0) limits.max_output_bytes = std::min(limits.max_output_bytes, max_output_bytes);
  jinja::Interp interp(*program, limits);
  Result<std::string> out = interp.render(std::move(vars));
  if (!out.is_ok()) return with_prefix(out.status());
  if (!continue_final) return out;
  PIPIT_ASSIGN_OR_RETURN(std::string final_text, final_message_text(messages));
  return cut_after_final(std::move(out).value(), final_text);
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  Result<std::shared_ptr<const jinja::Program>> p = jinja::parse_template(source);
  if (!p.is_ok()) return with_prefix(p.status());
  ChatTemplate t;
  t.program_ = std::move(p).value();
  return t;
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render_program(*program_, context);
}

Result<std::string> ChatTemplate::render(const nlohmann::json& context) const {
  return render_program(*program_, context);
}

Result<std::string> apply_chat_template(const Tokenizer& tok, const nlohmann::json& messages, bool add_generation_prompt,
                                        const nlohmann::json& extra_context) {
  return apply_impl(tok.config(), messages, add_generation_prompt, extra_context);
}

Result<std::string> apply_chat_template(const Tokenizer& tok, const nlohmann::ordered_json& messages,
                                        bool add_generation_prompt, const nlohmann::ordered_json& extra_context,
                                        size_t max_output_bytes) {
  return apply_impl(tok.config(), messages, add_generation_prompt, extra_context, max_output_bytes);
}

Result<std::string> apply_chat_template(const TokenizerConfig& config, const nlohmann::ordered_json& messages,
                                        bool add_generation_prompt, const nlohmann::ordered_json& extra_context) {
  return apply_impl(config, messages, add_generation_prompt, extra_context);
}

}  // namespace pipit
