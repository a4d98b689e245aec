// JSON Schema -> GBNF (see json_schema.h).
#include "runtime/json_schema.h"

#include "runtime/grammar.h"
#include "runtime/json_schema_values.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace pipit {

using ojson = nlohmann::ordered_json;

namespace {

constexpr int kMaxDepth = 64;

// Primitive rules every grammar gets; `ws` is bounded (see the header).
const char* kPrimitives[][2] = {
    {"ws", "[ \\t\\n]{0,8}"},
    {"json-value", "json-object | json-array | json-string | json-number | json-bool | json-null"},
    {"json-object",
     "\"{\" ws ( json-string ws \":\" ws json-value ws ( \",\" ws json-string ws \":\" ws json-value ws )* )? \"}\""},
    {"json-array", "\"[\" ws ( json-value ws ( \",\" ws json-value ws )* )? \"]\""},
    {"json-char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )"},
    {"json-string", "\"\\\"\" json-char* \"\\\"\""},
    {"json-int", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"},
    {"json-number", "json-int ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?"},
    {"json-integer", "json-int"},
    {"json-bool", "\"true\" | \"false\""},
    {"json-null", "\"null\""},
};

const std::set<std::string> kIgnored = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                        "strict", "readOnly", "writeOnly", "deprecated", "$defs", "definitions",
                                        "uniqueItems", "contentMediaType", "contentEncoding", "name"};
const std::set<std::string> kHandled = {"type", "properties", "required", "items", "minItems", "maxItems", "enum",
                                        "const", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength",
                                        "additionalProperties", "nullable", "pattern", "format", "minimum",
                                        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                                        "prefixItems", "propertyNames"};

std::string dump(const ojson& v) { return v.dump(-1, ' ', false, ojson::error_handler_t::replace); }

Status schema_error(const std::string& path, const std::string& what) {
  return Error::invalid_argument("{}: {}", path, what);
}

// Number bounds: minimum / maximum, exclusiveMinimum / exclusiveMaximum as numbers (draft 6 on) or booleans
// (draft 4), narrowed to the integers [L, H] they admit, within what json-int writes.
Status integer_bounds(const ojson& s, const std::string& path, bool& bounded, int64_t& L, int64_t& H) {
  double lo = -INFINITY, hi = INFINITY;
  auto num = [&](const char* k, double& out) -> Status {
    auto it = s.find(k);
    if (it == s.end()) return Status::ok();
    if (!it->is_number()) return schema_error(path + "." + k, "must be a number");
    out = it->get<double>();
    bounded = true;
    return Status::ok();
  };
  double min = -INFINITY, max = INFINITY, xmin = -INFINITY, xmax = INFINITY;
  PIPIT_TRY(num("minimum", min));
  PIPIT_TRY(num("maximum", max));
  for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"}) {
    auto it = s.find(k);
    if (it == s.end()) continue;
    const bool is_min = std::string_view(k) == "exclusiveMinimum";
    if (it->is_boolean()) {  // draft 4: the plain bound is exclusive
      if (it->get<bool>()) std::swap(is_min ? xmin : xmax, is_min ? min : max);
    } else {
      PIPIT_TRY(num(k, is_min ? xmin : xmax));
    }
  }
  // the smallest integer above both lower bounds, the largest below both upper ones
  lo = std::max(std::ceil(min), std::floor(xmin) + 1);
  hi = std::min(std::floor(max), std::ceil(xmax) - 1);
  const double cap = double(json_schema::kMaxInt);
  L = int64_t(std::clamp(lo, -cap, cap));
  H = int64_t(std::clamp(hi, -cap, cap));
  return Status::ok();
}

// integer / number with bounds: the values in range a grammar can write (json_schema_values.h).
Result<std::string> numeric_rule(const ojson& s, const std::string& path, bool integer) {
  if (auto m = s.find("multipleOf"); m != s.end() && !(integer && m->is_number() && m->get<double>() == 1.0))
    return schema_error(path + ".multipleOf", "is not supported (a grammar does not follow divisibility); use an "
                                              "enum or an integer range");
  bool bounded = false;
  int64_t L = 0, H = 0;
  PIPIT_TRY(integer_bounds(s, path, bounded, L, H));
  if (!bounded) return std::string(integer ? "json-integer" : "json-number");
  if (L > H)
    return schema_error(path + ".minimum", integer ? "the bounds admit no integer"
                                                   : "bounds with no integer between them are not supported");
  return integer ? json_schema::integer_range(L, H) : json_schema::number_range(L, H);
}

// A string with a pattern (an ECMAScript regex) or a format. With both, the pattern decides: SDKs (zod 4) send
// the format's own regex beside it.
Result<std::string> string_shape_rule(const ojson& s, const std::string& path) {
  const bool has_pattern = s.contains("pattern");
  if (s.contains("minLength") || s.contains("maxLength"))
    return schema_error(path + (has_pattern ? ".pattern" : ".format"),
                        "together with minLength / maxLength is not supported");
  std::string body;
  if (has_pattern) {
    const ojson& p = s["pattern"];
    if (!p.is_string()) return schema_error(path + ".pattern", "must be a string");
    auto b = json_schema::pattern_body(p.get<std::string>());
    if (!b.is_ok()) return schema_error(path, b.status().message());
    body = std::move(b).value();
  } else {
    const ojson& f = s["format"];
    if (!f.is_string()) return schema_error(path + ".format", "must be a string");
    auto b = json_schema::format_body(f.get<std::string>());
    if (!b) return std::string("json-string");  // other formats are annotations (JSON Schema 2020-12), not enforced
    body = std::move(*b);
  }
  return "\"\\\"\" " + body + " \"\\\"\"";
}

}  // namespace

JsonGrammarBuilder::JsonGrammarBuilder() {
  for (auto& p : kPrimitives) rules_[p[0]] = p[1];
}

std::string JsonGrammarBuilder::literal(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20) {
      static const char* kHex = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    else out += char(c);
  }
  return out + "\"";
}

std::string JsonGrammarBuilder::fresh(const std::string& base) {
  std::string b;
  for (char c : base) b += (std::isalnum(uint8_t(c)) || c == '-') ? c : '-';
  if (b.size() > 40) b.resize(40);
  return b + "-" + std::to_string(counter_++);
}

std::string JsonGrammarBuilder::gbnf() const {
  std::string out;
  for (auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  return out;
}

Status JsonGrammarBuilder::add_schema(const std::string& name, const ojson& schema, const std::string& path) {
  root_schema_ = schema;
  PIPIT_ASSIGN_OR_RETURN(std::string body, visit(schema, path, 0));
  rules_[name] = body;
  return Status::ok();
}

Result<std::string> JsonGrammarBuilder::visit(const ojson& s, const std::string& path, int depth) {
  if (depth > kMaxDepth) return schema_error(path, fmt("nested deeper than {} levels", kMaxDepth));
  if (s.is_boolean()) {
    if (!s.get<bool>()) return schema_error(path, "the schema `false` admits no value");
    return std::string("json-value");
  }
  if (!s.is_object()) return schema_error(path, fmt("a schema must be an object, got {}", s.type_name()));
  for (auto it = s.begin(); it != s.end(); ++it)
    if (!kHandled.count(it.key()) && !kIgnored.count(it.key()))
      return schema_error(path + "." + it.key(), "this keyword is not supported");

  if (auto r = s.find("$ref"); r != s.end()) {
    if (!r->is_string()) return schema_error(path + ".$ref", "must be a string");
    const std::string ref = r->get<std::string>();
    auto known = refs_.find(ref);
    if (known != refs_.end()) return known->second;
    std::string key;
    const ojson* defs = nullptr;
    for (const char* prefix : {"#/$defs/", "#/definitions/"})
      if (ref.rfind(prefix, 0) == 0) {
        key = ref.substr(std::string(prefix).size());
        const char* field = prefix[2] == '$' ? "$defs" : "definitions";
        if (root_schema_.contains(field)) defs = &root_schema_[field];
      }
    if (!defs || !defs->is_object() || !defs->contains(key))
      return schema_error(path + ".$ref", fmt("'{}' does not point into this schema's $defs", ref.substr(0, 80)));
    const std::string rule = fresh("ref-" + key);
    refs_[ref] = rule;  // before visiting: the definition may refer to itself
    PIPIT_ASSIGN_OR_RETURN(std::string body, visit((*defs)[key], path + ".$ref", depth + 1));
    rules_[rule] = body;
    return rule;
  }
  if (auto c = s.find("const"); c != s.end()) return literal(dump(*c));
  if (auto e = s.find("enum"); e != s.end()) {
    if (!e->is_array() || e->empty()) return schema_error(path + ".enum", "must be a non-empty list");
    std::string alts;
    for (const auto& v : *e) alts += (alts.empty() ? "" : " | ") + literal(dump(v));
    return "( " + alts + " )";
  }
  for (const char* k : {"anyOf", "oneOf"})
    if (auto a = s.find(k); a != s.end()) {
      if (!a->is_array() || a->empty()) return schema_error(path + "." + k, "must be a non-empty list of schemas");
      std::string alts;
      for (size_t i = 0; i < a->size(); ++i) {
        // the sibling keywords (e.g. a shared "type") apply to each branch
        ojson branch = (*a)[i];
        if (branch.is_object())
          for (auto it = s.begin(); it != s.end(); ++it)
            if (it.key() != k && !branch.contains(it.key())) branch[it.key()] = it.value();
        PIPIT_ASSIGN_OR_RETURN(std::string r, visit(branch, fmt("{}.{}[{}]", path, k, i), depth + 1));
        alts += (alts.empty() ? "" : " | ") + r;
      }
      return "( " + alts + " )";
    }
  if (auto a = s.find("allOf"); a != s.end()) {
    if (!a->is_array() || a->size() != 1) return schema_error(path + ".allOf", "only an allOf of one schema is supported");
    return visit((*a)[0], path + ".allOf[0]", depth + 1);
  }

  std::vector<std::string> types;
  if (auto t = s.find("type"); t != s.end()) {
    if (t->is_string()) types.push_back(t->get<std::string>());
    else if (t->is_array())
      for (const auto& x : *t) {
        if (!x.is_string()) return schema_error(path + ".type", "must be a string or a list of strings");
        types.push_back(x.get<std::string>());
      }
    else return schema_error(path + ".type", "must be a string or a list of strings");
    if (types.empty()) return schema_error(path + ".type", "is an empty list");
  } else if (s.contains("properties")) {
    types.push_back("object");
  } else if (s.contains("items") || s.contains("prefixItems")) {
    types.push_back("array");
  } else if (s.contains("pattern") || s.contains("format")) {
    types.push_back("string");
  } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
             s.contains("exclusiveMaximum")) {
    types.push_back("number");
  } else if (s.contains("propertyNames") || (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean())) {
    types.push_back("object");
  } else {
    return std::string("json-value");
  }
  if (auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>()) types.push_back("null");
  std::string alts;
  for (const std::string& t : types) {
    std::string r;
    if (t == "object") {
      PIPIT_ASSIGN_OR_RETURN(r, object_rule(s, path, depth));
    } else if (t == "array") {
      PIPIT_ASSIGN_OR_RETURN(r, array_rule(s, path, depth));
    } else if (t == "string" && (s.contains("pattern") || s.contains("format"))) {
      PIPIT_ASSIGN_OR_RETURN(r, string_shape_rule(s, path));
    } else if (t == "string") {
      int64_t lo = 0, hi = -1;
      if (auto m = s.find("minLength"); m != s.end()) {
        if (!m->is_number_integer() || m->get<int64_t>() < 0 || m->get<int64_t>() > 10000)
          return schema_error(path + ".minLength", "must be an integer in [0, 10000]");
        lo = m->get<int64_t>();
      }
      if (auto m = s.find("maxLength"); m != s.end()) {
        if (!m->is_number_integer() || m->get<int64_t>() < lo || m->get<int64_t>() > 10000)
          return schema_error(path + ".maxLength", "must be an integer in [minLength, 10000]");
        hi = m->get<int64_t>();
      }
      if (lo == 0 && hi < 0) r = "json-string";
      else r = "\"\\\"\" json-char{" + std::to_string(lo) + "," + (hi < 0 ? std::string() : std::to_string(hi)) +
                "} \"\\\"\"";
    } else if (t == "number" || t == "integer") {
      PIPIT_ASSIGN_OR_RETURN(r, numeric_rule(s, path, t == "integer"));
    } else if (t == "boolean") {
      r = "json-bool";
    } else if (t == "null") {
      r = "json-null";
    } else {
      return schema_error(path + ".type", fmt("unknown type '{}'", t.substr(0, 40)));
    }
    alts += (alts.empty() ? "" : " | ") + r;
  }
  return types.size() == 1 ? alts : "( " + alts + " )";
}

Result<std::string> JsonGrammarBuilder::object_rule(const ojson& s, const std::string& path, int depth) {
  auto props = s.find("properties");
  const bool listed = props != s.end() && !(props->is_object() && props->empty());
  auto ap = s.find("additionalProperties");
  if (!listed && (s.contains("propertyNames") || (ap != s.end() && !ap->is_boolean())))
    return record_rule(s, path, depth);
  if (s.contains("propertyNames"))
    return schema_error(path + ".propertyNames", "is supported only without 'properties'");
  if (ap != s.end() && !ap->is_boolean())
    return schema_error(path + ".additionalProperties", "a schema next to 'properties' is not supported");
  const bool extra = s.contains("additionalProperties") && s["additionalProperties"].get<bool>();
  if (auto r = s.find("required"); r != s.end() && r->is_array() && !r->empty() &&
                                   (props == s.end() || !props->is_object() || props->empty()))
    return schema_error(path + ".required", "names properties but the schema lists none");
  if (props == s.end() || (props->is_object() && props->empty())) {
    if (props == s.end() || extra) return std::string("json-object");
    return std::string("\"{\" ws \"}\"");
  }
  if (!props->is_object()) return schema_error(path + ".properties", "must be an object");
  if (extra) return schema_error(path + ".additionalProperties", "true next to properties is not supported");
  std::set<std::string> required;
  if (auto r = s.find("required"); r != s.end()) {
    if (!r->is_array()) return schema_error(path + ".required", "must be a list of names");
    for (const auto& x : *r) {
      if (!x.is_string()) return schema_error(path + ".required", "must be a list of names");
      if (!props->contains(x.get<std::string>()))
        return schema_error(path + ".required", fmt("'{}' is not one of the properties", x.get<std::string>().substr(0, 40)));
      required.insert(x.get<std::string>());
    }
  }
  // kv_i: "name" ws ":" ws value
  std::vector<std::string> kv;
  std::vector<bool> req;
  for (auto it = props->begin(); it != props->end(); ++it) {
    PIPIT_ASSIGN_OR_RETURN(std::string v, visit(it.value(), path + ".properties." + it.key(), depth + 1));
    kv.push_back(literal(dump(ojson(it.key()))) + " ws \":\" ws " + v);
    req.push_back(required.count(it.key()) > 0);
  }
  // S_i: properties i.. with none written yet; T_i: the same after at least one (each prefixed by ",")
  const size_t n = kv.size();
  const std::string base = fresh("obj");
  std::vector<std::string> S(n + 1), T(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    S[i] = base + "-s" + std::to_string(i);
    T[i] = base + "-t" + std::to_string(i);
  }
  rules_[S[n]] = "";
  rules_[T[n]] = "";
  for (size_t i = n; i-- > 0;) {
    const std::string take_t = "\",\" ws " + kv[i] + " ws " + T[i + 1];
    const std::string take_s = kv[i] + " ws " + T[i + 1];
    rules_[T[i]] = req[i] ? take_t : take_t + " | " + T[i + 1];
    rules_[S[i]] = req[i] ? take_s : take_s + " | " + S[i + 1];
  }
  return "\"{\" ws " + S[0] + " \"}\"";
}

// A record (zod's z.record): keys under propertyNames (a string schema), values under additionalProperties.
Result<std::string> JsonGrammarBuilder::record_rule(const ojson& s, const std::string& path, int depth) {
  if (s.contains("required") && !s["required"].empty())
    return schema_error(path + ".required", "names properties but the schema lists none");
  std::string key = "json-string", value = "json-value";
  if (auto pn = s.find("propertyNames"); pn != s.end()) {
    ojson ks = *pn;
    if (ks.is_object() && !ks.contains("type")) ks["type"] = "string";  // keys are strings
    if (!ks.is_object() || ks["type"] != "string")
      return schema_error(path + ".propertyNames", "must be a string schema");
    PIPIT_ASSIGN_OR_RETURN(key, visit(ks, path + ".propertyNames", depth + 1));
  }
  if (auto ap = s.find("additionalProperties"); ap != s.end()) {
    if (ap->is_boolean() && !ap->get<bool>()) return std::string("\"{\" ws \"}\"");
    PIPIT_ASSIGN_OR_RETURN(value, visit(*ap, path + ".additionalProperties", depth + 1));
  }
  const std::string kv = fresh("entry");
  rules_[kv] = key + " ws \":\" ws " + value;
  return "\"{\" ws ( " + kv + " ws ( \",\" ws " + kv + " ws )* )? \"}\"";
}

Result<std::string> JsonGrammarBuilder::array_rule(const ojson& s, const std::string& path, int depth) {
  int64_t lo = 0, hi = -1;
  if (auto m = s.find("minItems"); m != s.end()) {
    if (!m->is_number_integer() || m->get<int64_t>() < 0 || m->get<int64_t>() > 1000)
      return schema_error(path + ".minItems", "must be an integer in [0, 1000]");
    lo = m->get<int64_t>();
  }
  if (auto m = s.find("maxItems"); m != s.end()) {
    if (!m->is_number_integer() || m->get<int64_t>() < lo || m->get<int64_t>() > 1000)
      return schema_error(path + ".maxItems", "must be an integer in [minItems, 1000]");
    hi = m->get<int64_t>();
  }
  if (auto pi = s.find("prefixItems"); pi != s.end() && !(pi->is_array() && pi->empty()))
    return tuple_rule(s, *pi, path, depth, lo, hi);
  std::string item = "json-value";
  if (auto it = s.find("items"); it != s.end()) {
    PIPIT_ASSIGN_OR_RETURN(item, visit(*it, path + ".items", depth + 1));
  }
  const std::string it_rule = fresh("item");
  rules_[it_rule] = item;
  if (hi == 0) return std::string("\"[\" ws \"]\"");
  const std::string more = "( \",\" ws " + it_rule + " ws )";
  std::string reps;
  const int64_t more_lo = std::max<int64_t>(lo - 1, 0);
  if (hi < 0) reps = more_lo == 0 ? more + "*" : more + "{" + std::to_string(more_lo) + ",}";
  else reps = more + "{" + std::to_string(more_lo) + "," + std::to_string(hi - 1) + "}";
  const std::string body = it_rule + " ws " + reps;
  return lo == 0 ? "\"[\" ws ( " + body + " )? \"]\"" : "\"[\" ws " + body + " \"]\"";
}

// prefixItems (zod's z.tuple): every listed item is written, in order (an array with all of them satisfies the
// schema whatever minItems says up to their count), then `items` (if a schema) for the rest.
Result<std::string> JsonGrammarBuilder::tuple_rule(const ojson& s, const ojson& prefix, const std::string& path,
                                                   int depth, int64_t lo, int64_t hi) {
  if (!prefix.is_array()) return schema_error(path + ".prefixItems", "must be a list of schemas");
  const int64_t k = int64_t(prefix.size());
  if (hi >= 0 && hi < k) return schema_error(path + ".maxItems", "is below the number of prefixItems");
  std::string body = "\"[\" ws";
  for (int64_t i = 0; i < k; ++i) {
    PIPIT_ASSIGN_OR_RETURN(std::string r, visit(prefix[size_t(i)], fmt("{}.prefixItems[{}]", path, i), depth + 1));
    body += (i ? " \",\" ws " : " ") + r + " ws";
  }
  auto items = s.find("items");
  const bool more = items != s.end() && !(items->is_boolean() && !items->get<bool>()) && hi != k;
  if (!more) {
    if (lo > k) return schema_error(path + ".minItems", "is above the number of prefixItems and no more items are allowed");
    return body + " \"]\"";
  }
  PIPIT_ASSIGN_OR_RETURN(std::string item, visit(*items, path + ".items", depth + 1));
  const std::string it_rule = fresh("item");
  rules_[it_rule] = item;
  const int64_t more_lo = std::max<int64_t>(lo - k, 0);
  const std::string rep = "{" + std::to_string(more_lo) + "," + (hi < 0 ? std::string() : std::to_string(hi - k)) + "}";
  return body + " ( \",\" ws " + it_rule + " ws )" + rep + " \"]\"";
}

Result<std::string> json_schema_grammar(const ojson& schema, const std::string& path) {
  JsonGrammarBuilder b;
  PIPIT_TRY(b.add_schema("root", schema, path));
  return b.gbnf();
}

std::string json_object_grammar() {
  JsonGrammarBuilder b;
  b.add_rule("root", "json-object");
  return b.gbnf();
}

Result<std::shared_ptr<const Grammar>> grammar_from_json_schema(std::string_view schema_text, const std::string& what) {
  const ojson schema = ojson::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return Error::invalid_argument("{}: not valid JSON", what);
  PIPIT_ASSIGN_OR_RETURN(std::string gbnf, json_schema_grammar(schema, what));
  auto g = Grammar::parse(gbnf);
  if (!g) return g.status().with_context(what);
  return g;
}

}  // namespace pipit
