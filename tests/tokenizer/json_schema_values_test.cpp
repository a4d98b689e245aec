// JSON-schema value keywords (runtime/json_schema_values.h): integer and number bounds, string formats and
// patterns. Ranges: every integer near the bounds is accepted exactly when it is in range. Formats and patterns:
// random answers over the real Qwen3 vocabulary, each checked by std::regex (ECMAScript, the flavour JSON Schema
// names) against the pattern itself, or against zod's own regexes for the formats.
#include <random>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/grammar.h"
#include "runtime/json_schema.h"
#include "runtime/json_schema_values.h"
#include "tests/test_util.h"
#include "tokenizer/tokenizer.h"

namespace pipit {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const Grammar> schema_grammar(const std::string& schema) {
  auto src = json_schema_grammar(ojson::parse(schema));
  EXPECT_TRUE(src.is_ok()) << schema << ": " << src.status().message();
  if (!src.is_ok()) return nullptr;
  auto g = Grammar::parse(*src);
  EXPECT_TRUE(g.is_ok()) << schema << ": " << g.status().message() << "\n" << *src;
  return g.is_ok() ? *g : nullptr;
}

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept(text) && m.can_end();
}

std::string schema_error(const std::string& schema) {
  auto r = json_schema_grammar(ojson::parse(schema), "schema");
  return r.is_ok() ? "" : r.status().message();
}

TEST(JsonSchemaValues, IntegerBoundsAreExact) {
  struct Case {
    const char* bounds;
    int64_t lo, hi;  // the integers the bounds admit
  };
  const Case cases[] = {
      {R"("minimum": 0, "maximum": 100)", 0, 100},
      {R"("minimum": 18, "maximum": 120)", 18, 120},
      {R"("minimum": -37, "maximum": 1205)", -37, 1205},
      {R"("minimum": -999, "maximum": -10)", -999, -10},
      {R"("exclusiveMinimum": 0, "exclusiveMaximum": 1000)", 1, 999},
      {R"("minimum": 1.5, "maximum": 7.9)", 2, 7},
      {R"("minimum": 5, "exclusiveMinimum": true, "maximum": 9, "exclusiveMaximum": true)", 6, 8},  // draft 4
      {R"("minimum": 99990)", 99990, json_schema::kMaxInt},
      {R"("maximum": -3)", -json_schema::kMaxInt, -3},
      {R"("minimum": 7, "maximum": 7)", 7, 7},
  };
  for (const Case& c : cases) {
    auto g = schema_grammar(std::string(R"({"type": "integer", )") + c.bounds + "}");
    ASSERT_TRUE(g) << c.bounds;
    auto check = [&](int64_t n) {
      const bool in = n >= c.lo && n <= c.hi;
      EXPECT_EQ(matches(g, std::to_string(n)), in) << c.bounds << ": " << n;
    };
    for (int64_t edge : {c.lo, c.hi, int64_t(0)})
      for (int64_t d = -130; d <= 130; ++d)
        if (std::abs(edge) < json_schema::kMaxInt - 200) check(edge + d);
    for (int64_t n : {int64_t(1000000), int64_t(-1000000), int64_t(123456789012)}) check(n);
    EXPECT_FALSE(matches(g, "007")) << c.bounds;   // no leading zeros
    EXPECT_FALSE(matches(g, "-0")) << c.bounds;
    EXPECT_FALSE(matches(g, "5.0")) << c.bounds;
  }
  EXPECT_NE(schema_error(R"({"type": "integer", "minimum": 5, "maximum": 4})").find("schema.minimum"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "integer", "multipleOf": 3})").find("schema.multipleOf"), std::string::npos);
  EXPECT_EQ(schema_error(R"({"type": "integer", "multipleOf": 1})"), "");
}

// Numbers: every text the grammar admits is in range (checked over a grid of integers and decimals); every
// integer in range is admitted.
TEST(JsonSchemaValues, NumberBoundsAreNeverBroken) {
  struct Case {
    const char* bounds;
    double lo, hi;
    bool lo_ex, hi_ex;
  };
  const Case cases[] = {
      {R"("minimum": 0, "maximum": 1)", 0, 1, false, false},
      {R"("minimum": -2.5, "maximum": 3.25)", -2.5, 3.25, false, false},
      {R"("exclusiveMinimum": 0, "maximum": 10)", 0, 10, true, false},
      {R"("minimum": -10, "exclusiveMaximum": -1)", -10, -1, false, true},
      {R"("minimum": 0)", 0, 1e300, false, false},
  };
  for (const Case& c : cases) {
    auto g = schema_grammar(std::string(R"({"type": "number", )") + c.bounds + "}");
    ASSERT_TRUE(g);
    int admitted = 0;
    for (int i = -1200; i <= 1200; ++i) {
      for (const std::string& t : {std::to_string(i / 100) , fmt("{}{}.{}", i < 0 ? "-" : "", std::abs(i) / 100, std::abs(i) % 100)}) {
        const double v = std::stod(t);
        const bool in = (c.lo_ex ? v > c.lo : v >= c.lo) && (c.hi_ex ? v < c.hi : v <= c.hi);
        const bool ok = matches(g, t);
        admitted += ok;
        if (ok) EXPECT_TRUE(in) << c.bounds << ": admitted " << t;
        if (in && t.find('.') == std::string::npos) EXPECT_TRUE(ok) << c.bounds << ": refused integer " << t;
      }
    }
    EXPECT_GT(admitted, 0) << c.bounds;
  }
  EXPECT_NE(schema_error(R"({"type": "number", "minimum": 0.2, "maximum": 0.8})").find("schema.minimum"),
            std::string::npos);
}

std::shared_ptr<Tokenizer> qwen3() {
  auto t = Tokenizer::load_dir(test::testdata() + "/tokenizers/qwen3");
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? *t : nullptr;
}

// Random answers: at each step a token drawn uniformly among the allowed ones (half the time one that closes the
// string, so walks end). Returns the finished documents.
std::vector<std::string> random_answers(const std::shared_ptr<const Grammar>& g, const TokenTable& table, int n,
                                        uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  std::vector<uint8_t> allowed;
  for (int walk = 0; walk < n; ++walk) {
    GrammarMatcher m(g);
    std::string text;
    for (int step = 0; step < 200 && !m.finished(); ++step) {
      if (m.can_end() && rng() % 2 == 0) break;
      m.mask(table, allowed);
      std::vector<int32_t> ids, closing;
      for (size_t i = 0; i < allowed.size(); ++i)
        if (allowed[i]) {
          ids.push_back(int32_t(i));
          if (table.bytes(int32_t(i)).find('"') != std::string::npos) closing.push_back(int32_t(i));
        }
      if (ids.empty()) break;
      const int32_t t = !closing.empty() && rng() % 2 ? closing[rng() % closing.size()] : ids[rng() % ids.size()];
      EXPECT_TRUE(m.accept(table.bytes(t)));
      text += table.bytes(t);
    }
    if (m.can_end()) out.push_back(text);
  }
  return out;
}

// UTF-8 -> code points (one wchar_t each on Linux): the regex sees characters, as JSON Schema validators with
// Unicode regexes (ajv, Python's jsonschema) do, not bytes.
std::wstring code_points(const std::string& s) {
  std::wstring out;
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = uint8_t(s[i]);
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n && i + size_t(k) < s.size(); ++k) cp = (cp << 6) | (uint8_t(s[i + size_t(k)]) & 0x3F);
    out += wchar_t(cp);
    i += size_t(n);
  }
  return out;
}

// Each answer is a JSON string whose value the regex finds (regex_search: JSON Schema patterns are unanchored).
void expect_answers_match(const std::string& schema, const std::string& regex, const TokenTable& table) {
  auto g = schema_grammar(schema);
  ASSERT_TRUE(g) << schema;
  const std::wregex re(code_points(regex), std::regex::ECMAScript);
  auto answers = random_answers(g, table, 30, 77);
  EXPECT_GE(answers.size(), 20u) << schema;
  for (const std::string& a : answers) {
    auto j = nlohmann::json::parse(a, nullptr, false);
    ASSERT_TRUE(!j.is_discarded() && j.is_string()) << schema << ": not a JSON string: " << a;
    EXPECT_TRUE(std::regex_search(code_points(j.get<std::string>()), re)) << schema << ": " << a << " does not match " << regex;
  }
}

TEST(JsonSchemaValues, PatternAnswersMatchThePattern) {
  auto tok = qwen3();
  ASSERT_TRUE(tok);
  auto table = TokenTable::get(*tok);
  const char* patterns[] = {
      R"(^[a-z]+$)", R"(^\d{3}-\d{4}$)", R"(^(foo|bar)+baz?$)", R"([A-Z]{2})", R"(^\w{1,3}@\w{1,3}\.com$)",
      R"(^#[0-9a-fA-F]{6}$)", R"(^.{2,5}$)", R"(^[^\s,]+$)", R"(^a\.b\/c$)", R"x(^say "(hi|yo)"\\$)x",
      R"(^(?:[A-Z][a-z]*)(?: [A-Z][a-z]*){0,2}$)", R"(^\+?[1-9]\d{1,14}$)", R"(^[\w.-]+$)",
      // zod 4's uuid pattern
      R"(^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$)",
  };
  for (const char* p : patterns)
    expect_answers_match(ojson({{"type", "string"}, {"pattern", p}}).dump(), p, *table);
  // a named group is a plain group (std::regex has no names: checked without it)
  expect_answers_match(R"({"type": "string", "pattern": "^(?<year>\\d{4})-\\d\\d$"})", R"(^(\d{4})-\d\d$)", *table);
}

TEST(JsonSchemaValues, FormatAnswersPassZodsRegexes) {
  auto tok = qwen3();
  ASSERT_TRUE(tok);
  auto table = TokenTable::get(*tok);
  // zod 3's regexes for .email(), .uuid(), .datetime() (no offset, any precision), .date()
  const std::pair<const char*, const char*> formats[] = {
      {"email", R"(^(?!\.)(?!.*\.\.)([A-Z0-9_'+\-\.]*)[A-Z0-9_+-]@([A-Z0-9][A-Z0-9\-]*\.)+[A-Z]{2,}$)"},
      {"uuid", R"(^[0-9a-fA-F]{8}\b-[0-9a-fA-F]{4}\b-[0-9a-fA-F]{4}\b-[0-9a-fA-F]{4}\b-[0-9a-fA-F]{12}$)"},
      {"date-time", R"(^\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?Z$)"},
      {"date", R"(^\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))$)"},
  };
  for (const auto& [f, re] : formats) {
    auto g = schema_grammar(ojson({{"type", "string"}, {"format", f}}).dump());
    ASSERT_TRUE(g);
    const std::regex zod(re, std::regex::ECMAScript | std::regex::icase);
    auto answers = random_answers(g, *table, 30, 5);
    EXPECT_GE(answers.size(), 20u) << f;
    for (const std::string& a : answers)
      EXPECT_TRUE(std::regex_search(nlohmann::json::parse(a).get<std::string>(), zod)) << f << ": " << a;
  }
  auto date = schema_grammar(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(matches(date, R"("2024-02-28")"));
  EXPECT_FALSE(matches(date, R"("2024-02-30")"));
  EXPECT_FALSE(matches(date, R"("2024-13-01")"));
  EXPECT_TRUE(matches(schema_grammar(R"({"type": "string", "format": "uri"})"), R"("anything")"));  // annotation
}

TEST(JsonSchemaValues, TuplesAndRecords) {
  auto tuple = schema_grammar(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer",
      "minimum": 0, "maximum": 9}], "minItems": 2, "maxItems": 2, "items": false})");
  EXPECT_TRUE(matches(tuple, R"(["a", 3])"));
  EXPECT_FALSE(matches(tuple, R"(["a", 30])"));
  EXPECT_FALSE(matches(tuple, R"([3, "a"])"));
  EXPECT_FALSE(matches(tuple, R"(["a", 3, 4])"));
  auto rest = schema_grammar(R"({"type": "array", "prefixItems": [{"type": "boolean"}], "items": {"type": "null"}})");
  EXPECT_TRUE(matches(rest, R"([true, null, null])"));
  EXPECT_FALSE(matches(rest, R"([true, 1])"));
  auto record = schema_grammar(R"({"type": "object", "additionalProperties": {"type": "integer"},
      "propertyNames": {"pattern": "^[a-z]+$"}})");
  EXPECT_TRUE(matches(record, R"({"ab": 1, "c": -2})"));
  EXPECT_TRUE(matches(record, R"({})"));
  EXPECT_FALSE(matches(record, R"({"Ab": 1})"));
  EXPECT_FALSE(matches(record, R"({"ab": "x"})"));
  EXPECT_NE(schema_error(R"({"type": "object", "properties": {"a": {}}, "propertyNames": {"maxLength": 3}})")
                .find("schema.propertyNames"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "array", "prefixItems": [{}], "minItems": 3, "items": false})").find("minItems"),
            std::string::npos);
}

TEST(JsonSchemaValues, UntranslatablePatternsAreRefusedByName) {
  for (const char* p : {"(?=a)b", "(?!x).*", "(a)\\1", "\\bword", "a^b", "a$b", "\\p{L}+", "[a", "(a", "a{2,1}"}) {
    const std::string e = schema_error(ojson({{"type", "string"}, {"pattern", p}}).dump());
    EXPECT_NE(e.find("schema: pattern:"), std::string::npos) << p << ": " << e;
  }
  EXPECT_NE(schema_error(R"({"type": "string", "pattern": "^a+$", "maxLength": 3})").find("schema.pattern"),
            std::string::npos);
}

}  // namespace
}  // namespace pipit
