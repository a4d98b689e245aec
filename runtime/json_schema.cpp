// JSON Schema -> GBNF (see json_schema.h).
#include "runtime/json_schema.h"

#include "runtime/grammar.h"

#include <algorithm>
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
                                        "format", "strict", "minimum", "maximum", "exclusiveMinimum",
                                        "exclusiveMaximum", "multipleOf", "readOnly", "writeOnly", "deprecated",
                                        "$defs", "definitions", "uniqueItems", "contentMediaType", "contentEncoding",
                                        "name"};
const std::set<std::string> kHandled = {"type", "properties", "required", "items", "minItems", "maxItems", "enum",
                                        "const", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength",
                                        "additionalProperties", "nullable"};

std::string dump(const ojson& v) { return v.dump(-1, ' ', false, ojson::error_handler_t::replace); }

Status schema_error(const std::string& path, const std::string& what) {
  return Error::invalid_argument("{}: {}", path, what);
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
  } else if (s.contains("items")) {
    types.push_back("array");
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
    } else if (t == "number") {
      r = "json-number";
    } else if (t == "integer") {
      r = "json-integer";
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
  if (auto ap = s.find("additionalProperties"); ap != s.end() && !ap->is_boolean())
    return schema_error(path + ".additionalProperties", "only true or false is supported");
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

Result<std::string> JsonGrammarBuilder::array_rule(const ojson& s, const std::string& path, int depth) {
  std::string item = "json-value";
  if (auto it = s.find("items"); it != s.end()) {
    PIPIT_ASSIGN_OR_RETURN(item, visit(*it, path + ".items", depth + 1));
  }
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
