// JSON Schema -> GBNF (runtime/grammar.h), for response_format json_schema and forced tool calls.
//
// Supported: type (one or a list), properties (kept in the schema's order; required ones always written, the
// others optional, no properties beyond those listed), required, items, prefixItems (tuples: every listed item,
// then `items` if a schema), minItems/maxItems, enum, const, anyOf/oneOf, allOf of one schema, $ref into #/$defs or
// #/definitions (recursion allowed), minLength/maxLength, records (no properties, additionalProperties a schema,
// keys under propertyNames), integer and number bounds (minimum, maximum, exclusive*), string pattern (an
// ECMAScript regex, json_schema_values.h) and format (email, uuid, date-time, date, time, ipv4; other formats are
// annotations, not enforced), an object or {} / true schema (any value). Annotations (title, description, default,
// examples, $schema, $id, strict) are accepted. Anything that would change which documents are valid and is not
// implemented (patternProperties, not, if/then/else, multipleOf, additionalProperties as a schema beside
// properties, a regex with lookaround, ...) is refused with an error naming its path, rather than silently ignored.
//
// Numbers with bounds are written as integers or plain decimals whose whole unit interval is in range (a
// minimum of 0.5 admits 1, 1.25, ... but never 0.75); integers are exact. The JSON it admits: no whitespace before
// the value, at most kMaxSpace spaces/newlines between tokens (a model that starts to ramble in whitespace cannot
// go on forever), numbers with at most 16 digits before and after the point.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit {

class JsonGrammarBuilder {
 public:
  static constexpr int kMaxSpace = 8;

  JsonGrammarBuilder();
  // Defines rule `name` (a GBNF identifier) as the JSON values the schema allows. Errors name the schema path
  // under `path` ("schema.properties.age.type: ...").
  Status add_schema(const std::string& name, const nlohmann::ordered_json& schema, const std::string& path = "schema");
  void add_rule(const std::string& name, const std::string& body) { rules_[name] = body; }
  std::string gbnf() const;  // every rule, one per line

  // A GBNF string literal for the text.
  static std::string literal(std::string_view s);

 private:
  Result<std::string> visit(const nlohmann::ordered_json& s, const std::string& path, int depth);
  Result<std::string> object_rule(const nlohmann::ordered_json& s, const std::string& path, int depth);
  Result<std::string> array_rule(const nlohmann::ordered_json& s, const std::string& path, int depth);
  Result<std::string> tuple_rule(const nlohmann::ordered_json& s, const nlohmann::ordered_json& prefix,
                                 const std::string& path, int depth, int64_t lo, int64_t hi);
  Result<std::string> record_rule(const nlohmann::ordered_json& s, const std::string& path, int depth);
  std::string fresh(const std::string& base);

  std::map<std::string, std::string> rules_;
  nlohmann::ordered_json root_schema_;
  std::map<std::string, std::string> refs_;  // "#/$defs/x" -> rule
  int counter_ = 0;
};

// A grammar whose root is one value valid under the schema.
Result<std::string> json_schema_grammar(const nlohmann::ordered_json& schema, const std::string& path = "schema");
// A grammar whose root is any JSON object (response_format json_object).
std::string json_object_grammar();

class Grammar;
// Structured output for the front ends that take a schema as text (CLI --json-schema, the C API, Python): the
// schema parsed, compiled to GBNF and the GBNF parsed into the matcher's grammar. `what` names the setting in errors.
Result<std::shared_ptr<const Grammar>> grammar_from_json_schema(std::string_view schema_text, const std::string& what);

}  // namespace pipit
