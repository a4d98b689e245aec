// Grammars over tokens (runtime/grammar.h) and the JSON-schema compiler (runtime/json_schema.h): GBNF parsing
// and its errors, matching, the vocabulary mask against a token-by-token check on the real Qwen3 vocabulary, and
// 50 random walks through a schema's grammar over that vocabulary whose every output parses and validates.
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/grammar.h"
#include "runtime/json_schema.h"
#include "tests/test_util.h"
#include "tokenizer/tokenizer.h"

namespace pipit {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const Grammar> must(std::string_view gbnf) {
  auto g = Grammar::parse(gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? *g : nullptr;
}

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept(text) && m.can_end();
}

std::string error_of(std::string_view gbnf) {
  auto g = Grammar::parse(gbnf);
  return g.is_ok() ? "" : g.status().message();
}

TEST(Grammar, ParsesAndMatches) {
  auto g = must(R"(
    # a comment
    root ::= greeting " " name ("!" | "?")?   # trailing comment
    greeting ::= "hi" | "hello"
    name ::= [A-Z] [a-z]{1,5}
  )");
  EXPECT_TRUE(matches(g, "hi Bob"));
  EXPECT_TRUE(matches(g, "hello Alice!"));
  EXPECT_FALSE(matches(g, "hello alice"));
  EXPECT_FALSE(matches(g, "hi B"));
  EXPECT_FALSE(matches(g, "hi Bobbbbbb"));
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept("hel"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept("x"));  // refused, state kept
  EXPECT_TRUE(m.accept("lo Zed?"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.finished());
}

TEST(Grammar, RepetitionClassesAndUnicode) {
  auto g = must(R"(root ::= [^"\\]* "\"" "é"+ [α-ω]? . )");
  EXPECT_TRUE(matches(g, "abc\"ééx"));
  EXPECT_TRUE(matches(g, "\"éβ🙂"));
  EXPECT_FALSE(matches(g, "a\\b\"éx"));
  EXPECT_FALSE(matches(g, "\"x"));
  // a token may end inside a UTF-8 sequence: allowed when some code point that starts with it fits
  GrammarMatcher m(must(R"(root ::= [α-ω]+)"));
  EXPECT_TRUE(m.allows("\xCE"));    // α..ο start with CE
  EXPECT_FALSE(m.allows("\xD0"));   // Cyrillic
  EXPECT_TRUE(m.accept("\xCE"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept("\xB1"));    // α
  EXPECT_TRUE(m.can_end());
  // overlong and invalid sequences are not code points: E0 80..9F, C0, C1, F0 80..8F
  GrammarMatcher digit(must(R"(root ::= [0-9] .)"));
  for (const char* bad : {"\xE0", "\xC0", "\xC1", "\xF0", "\xF8", "\x80"}) EXPECT_FALSE(digit.allows(bad)) << bad;
  EXPECT_TRUE(digit.accept("1"));
  EXPECT_FALSE(digit.allows("\xE0\x80\xB1"));  // overlong '1'
  EXPECT_FALSE(digit.allows("\xED\xA0\x80"));  // a surrogate
  EXPECT_TRUE(digit.allows("\xE0\xA0\x80"));
  auto counted = must(R"(root ::= "a"{2} "b"{1,} "c"{0,2})");
  EXPECT_TRUE(matches(counted, "aab"));
  EXPECT_TRUE(matches(counted, "aabbbcc"));
  EXPECT_FALSE(matches(counted, "abcc"));
  EXPECT_FALSE(matches(counted, "aabccc"));
}

TEST(Grammar, ErrorsNameTheProblem) {
  EXPECT_NE(error_of("root ::= foo").find("'foo' is used but never defined"), std::string::npos);
  EXPECT_NE(error_of("start ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= \"a\" x").find("cannot match any text"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("line 1: unterminated string"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\n\nroot ::= \"b\"").find("line 3"), std::string::npos);
  EXPECT_NE(error_of("root ::= [b-a]").find("out of order"), std::string::npos);
  EXPECT_NE(error_of("root = \"a\"").find("'::='"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
}

// mask() must say exactly what allows() says, token by token.
void expect_mask_exact(const GrammarMatcher& m, const TokenTable& table, const char* where) {
  std::vector<uint8_t> allowed;
  m.mask(table, allowed);
  size_t n_allowed = 0;
  for (size_t id = 0; id < table.size(); ++id) {
    const bool want = !table.bytes(int32_t(id)).empty() && m.allows(table.bytes(int32_t(id)));
    ASSERT_EQ(bool(allowed[id]), want) << where << ": token " << id << " '" << table.bytes(int32_t(id)) << "'";
    n_allowed += want;
  }
  EXPECT_GT(n_allowed, 0u) << where;
}

std::shared_ptr<Tokenizer> qwen3() {
  auto t = Tokenizer::load_dir(test::testdata() + "/tokenizers/qwen3");
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? *t : nullptr;
}

TEST(Grammar, MaskEqualsTokenByTokenCheckOnQwen3Vocabulary) {
  auto tok = qwen3();
  ASSERT_TRUE(tok);
  auto table = TokenTable::get(*tok);
  ASSERT_EQ(table->size(), size_t(tok->vocab_size()));
  EXPECT_EQ(table->bytes(*tok->token_to_id("Hello")), "Hello");
  EXPECT_TRUE(table->bytes(*tok->token_to_id("<|im_end|>")).empty());  // special: never grammar text
  auto g = Grammar::parse(json_object_grammar());
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  GrammarMatcher m(*g);
  expect_mask_exact(m, *table, "start");
  for (const char* step : {"{", " \"na", "me\": \"caf\xC3", "\xA9 \\u00e9\"", ", \"n\": -12.5e3", "}"}) {
    ASSERT_TRUE(m.accept(step)) << step;
    if (!m.finished()) expect_mask_exact(m, *table, step);
  }
  EXPECT_TRUE(m.can_end());
}

// A small validator for the schema below (the test must not trust the grammar it checks).
bool valid_person(const nlohmann::json& j, std::string& why) {
  auto fail = [&](const std::string& w) {
    why = w;
    return false;
  };
  if (!j.is_object()) return fail("not an object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "name" && it.key() != "age" && it.key() != "tags" && it.key() != "role" && it.key() != "pet")
      return fail("extra key " + it.key());
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().size() > 4 * 40)
    return fail("name");
  if (!j.contains("age") || !j["age"].is_number_integer() || j["age"].get<int64_t>() < 0) return fail("age");
  if (j.contains("tags")) {
    if (!j["tags"].is_array() || j["tags"].size() > 3) return fail("tags");
    for (auto& t : j["tags"])
      if (!t.is_string() || t.get<std::string>().size() > 4 * 12) return fail("tag");
  }
  if (!j.contains("role") || !(j["role"] == "admin" || j["role"] == "user")) return fail("role");
  if (j.contains("pet") && !j["pet"].is_null() &&
      !(j["pet"].is_object() && j["pet"].size() == 1 && j["pet"].contains("kind") && j["pet"]["kind"].is_string()))
    return fail("pet");
  return true;
}

const char* kPersonSchema = R"({
  "type": "object",
  "title": "Person",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
    "role": {"enum": ["admin", "user"]},
    "pet": {"anyOf": [{"$ref": "#/$defs/pet"}, {"type": "null"}]}
  },
  "required": ["name", "age", "role"],
  "$defs": {"pet": {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}}
})";

TEST(JsonSchema, CompiledGrammarAcceptsValidAndRejectsInvalid) {
  auto src = json_schema_grammar(ojson::parse(kPersonSchema));
  ASSERT_TRUE(src.is_ok()) << src.status().message();
  auto g = must(*src);
  EXPECT_TRUE(matches(g, R"({"name": "Ann", "age": 31, "role": "user"})"));
  EXPECT_TRUE(matches(g, R"({"name":"Bo","age":2,"tags":["a","b"],"role":"admin","pet":{"kind":"cat"}})"));
  EXPECT_FALSE(matches(g, R"({"name":"Bo","age":-2,"role":"admin"})"));           // minimum 0
  EXPECT_TRUE(matches(g, "{\n  \"name\": \"x\",\n  \"age\": 0,\n  \"role\": \"user\",\n  \"pet\": null\n}"));
  EXPECT_FALSE(matches(g, R"({"age": 31, "name": "Ann", "role": "user"})"));      // schema order
  EXPECT_FALSE(matches(g, R"({"name": "Ann", "role": "user"})"));                  // age required
  EXPECT_FALSE(matches(g, R"({"name": "Ann", "age": 3.5, "role": "user"})"));     // integer
  EXPECT_FALSE(matches(g, R"({"name": "Ann", "age": 3, "role": "root"})"));       // enum
  EXPECT_FALSE(matches(g, R"({"name": "Ann", "age": 3, "tags": ["a","b","c","d"], "role": "user"})"));
  EXPECT_FALSE(matches(g, R"({"name": "Ann", "age": 3, "role": "user", "x": 1})"));
  EXPECT_FALSE(matches(g, R"( {"name": "Ann", "age": 3, "role": "user"})"));      // no leading space
}

TEST(JsonSchema, UnsupportedOrMalformedSchemasNameThePath) {
  auto err = [](const char* s) {
    auto r = json_schema_grammar(ojson::parse(s), "response_format.json_schema.schema");
    return r.is_ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(err(R"({"type": "string", "not": {"const": "a"}})").find("schema.not: this keyword is not supported"),
            std::string::npos);
  EXPECT_NE(err(R"x({"type": "string", "pattern": "^(?!a)"})x").find("schema: pattern: lookaround"), std::string::npos);
  EXPECT_NE(err(R"({"type": "object", "properties": {"a": {"type": "strin"}}})").find("properties.a.type: unknown type"),
            std::string::npos);
  EXPECT_NE(err(R"({"enum": []})").find("enum: must be a non-empty list"), std::string::npos);
  EXPECT_NE(err(R"({"$ref": "#/$defs/missing"})").find("$ref"), std::string::npos);
  EXPECT_NE(err(R"({"type": "object", "properties": {}, "required": ["a"]})").find("required"), std::string::npos);
  EXPECT_NE(err(R"(false)").find("admits no value"), std::string::npos);
  EXPECT_NE(err(R"(5)").find("must be an object"), std::string::npos);
  // recursion through $ref is fine
  auto tree = json_schema_grammar(ojson::parse(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"]}}})"));
  ASSERT_TRUE(tree.is_ok()) << tree.status().message();
  EXPECT_TRUE(matches(must(*tree), R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]})"));
}

// Random walks over the real vocabulary: at each step a token is drawn uniformly among the allowed ones (with
// a bias toward closing, so walks end); every finished walk parses as JSON and validates.
TEST(JsonSchema, FiftyRandomAnswersOverQwen3VocabularyAllValidate) {
  auto tok = qwen3();
  ASSERT_TRUE(tok);
  auto table = TokenTable::get(*tok);
  auto src = json_schema_grammar(ojson::parse(kPersonSchema));
  ASSERT_TRUE(src.is_ok());
  auto g = must(*src);
  std::mt19937 rng(1234);
  int finished = 0;
  std::vector<uint8_t> allowed;
  for (int walk = 0; walk < 50; ++walk) {
    GrammarMatcher m(g);
    std::string text;
    for (int step = 0; step < 400 && !m.finished(); ++step) {
      m.mask(*table, allowed);
      std::vector<int32_t> ids;
      for (size_t i = 0; i < allowed.size(); ++i)
        if (allowed[i]) ids.push_back(int32_t(i));
      if (m.can_end() && rng() % 2 == 0) break;
      ASSERT_FALSE(ids.empty()) << text;
      // half the time a token that closes something (a quote, a brace, a bracket), so walks reach the end
      std::vector<int32_t> closing;
      for (int32_t id : ids)
        if (table->bytes(id).find_first_of("\"}]") != std::string::npos) closing.push_back(id);
      const int32_t best = !closing.empty() && rng() % 2 ? closing[rng() % closing.size()] : ids[rng() % ids.size()];
      ASSERT_TRUE(m.accept(table->bytes(best)));
      text += table->bytes(best);
    }
    if (!m.can_end()) continue;  // ran out of steps mid-document
    ++finished;
    auto j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "walk " << walk << ": not JSON: " << text;
    std::string why;
    EXPECT_TRUE(valid_person(j, why)) << "walk " << walk << ": " << why << ": " << text;
  }
  EXPECT_GE(finished, 40);
}

}  // namespace
}  // namespace pipit
