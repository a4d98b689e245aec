// Strict reading of one tokenizer.json component object (private header): each field is type-checked, a missing
// required field or a key the component does not define is an error that names the component path and the key,
// e.g. "[tokenizer.json] pre_tokenizer.pretokenizers[0] (Split): missing field 'behavior'".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit::tok {

using nlohmann::json;

// A Sequence component inside a Sequence inside ...: HF's own files nest one level. Each level is a parse call and
// a call per token at run time, so a file nesting thousands would overflow the stack (kMaxJsonDepth bounds the
// JSON first; this names the component).
constexpr int kMaxSequenceDepth = 8;

class JsonFields {
 public:
  // `where` names the object, e.g. "normalizer.normalizers[1] (Replace)".
  JsonFields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  Status error(const std::string& msg) const { return Error::format("[tokenizer.json] {}: {}", where_, msg); }

  // The raw value of `key`; nullptr when absent (or null, unless keep_null).
  const json* find(const char* key, bool keep_null = false) {
    used_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end() || (it->is_null() && !keep_null)) return nullptr;
    return &*it;
  }
  Result<const json*> required(const char* key) {
    const json* v = find(key);
    if (!v) return error(fmt("missing field '{}'", key));
    return v;
  }
  Result<std::string> str(const char* key) {
    PIPIT_ASSIGN_OR_RETURN(const json* v, required(key));
    if (!v->is_string()) return error(fmt("field '{}' must be a string", key));
    return v->get<std::string>();
  }
  Result<std::optional<std::string>> opt_str(const char* key) {
    const json* v = find(key);
    if (!v) return std::optional<std::string>();
    if (!v->is_string()) return error(fmt("field '{}' must be a string or null", key));
    return std::optional<std::string>(v->get<std::string>());
  }
  Result<bool> boolean(const char* key, std::optional<bool> def = {}) {
    const json* v = find(key);
    if (!v) {
      if (def) return *def;
      return error(fmt("missing field '{}'", key));
    }
    if (!v->is_boolean()) return error(fmt("field '{}' must be true or false", key));
    return v->get<bool>();
  }
  Result<int64_t> integer(const char* key, std::optional<int64_t> def = {}) {
    const json* v = find(key);
    if (!v) {
      if (def) return *def;
      return error(fmt("missing field '{}'", key));
    }
    if (!v->is_number_integer()) return error(fmt("field '{}' must be an integer", key));
    return v->get<int64_t>();
  }
  Result<const json*> array(const char* key) {
    PIPIT_ASSIGN_OR_RETURN(const json* v, required(key));
    if (!v->is_array()) return error(fmt("field '{}' must be a list", key));
    return v;
  }
  // A single character field (Metaspace replacement, Strip content): a string of exactly one code point.
  Result<std::string> one_char(const char* key);

  // Errors on the first key that was neither read nor listed in `ignored`.
  Status finish(std::initializer_list<const char*> ignored = {}) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (used_.count(it.key())) continue;
      bool ok = false;
      for (const char* k : ignored) ok = ok || it.key() == k;
      if (!ok) return error(fmt("unknown field '{}'", it.key()));
    }
    return Status::ok();
  }

 private:
  const json& j_;
  std::string where_;
  std::set<std::string> used_{"type"};
};

// The "type" of a component object, or an error naming `where`.
Result<std::string> component_type(const json& j, const std::string& where);

// {"String": "..."} or {"Regex": "..."} (Split / Replace patterns). Sets is_regex.
Result<std::string> parse_pattern_json(const json& j, const std::string& where, bool* is_regex);

}  // namespace pipit::tok
