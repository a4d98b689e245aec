// Shared pieces of the strict tokenizer.json reader: component types, one-character fields and split patterns.
#include "tokenizer/json_fields.h"

#include "tokenizer/unicode.h"

namespace pipit::tok {

Result<std::string> JsonFields::one_char(const char* key) {
  Result<std::string> r = str(key);
  if (!r) return r.status();
  const std::string& s = *r;
  size_t n = s.empty() ? 0 : utf8_seq_len(static_cast<unsigned char>(s.front()));
  if (s.empty() || n != s.size()) return error(fmt("field '{}' must be a single character, got '{}'", key, s));
  return s;
}

Result<std::string> component_type(const json& j, const std::string& where) {
  if (!j.is_object()) return Error::format("[tokenizer.json] {}: expected an object", where);
  auto it = j.find("type");
  if (it == j.end()) return Error::format("[tokenizer.json] {}: missing field 'type'", where);
  if (!it->is_string()) return Error::format("[tokenizer.json] {}: field 'type' must be a string", where);
  return it->get<std::string>();
}

Result<std::string> parse_pattern_json(const json& j, const std::string& where, bool* is_regex) {
  if (j.is_object() && j.size() == 1) {
    auto it = j.begin();
    if ((it.key() == "String" || it.key() == "Regex") && it->is_string()) {
      *is_regex = it.key() == "Regex";
      return it->get<std::string>();
    }
  }
  return Error::format("[tokenizer.json] {}: field 'pattern' must be {{\"String\": ...}} or {{\"Regex\": ...}}",
                       where);
}

}  // namespace pipit::tok
