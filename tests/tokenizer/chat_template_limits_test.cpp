// Hostile and broken input must give an error, never a crash, a hang, a stack overflow or unbounded memory:
// huge loops, deep nesting (template, expressions, data), unbounded recursion, exploding strings and lists, reference
// cycles, and fuzz-ish random templates (token soup, random bytes, mutated real templates).
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace pipit {
namespace {

using ojson = nlohmann::ordered_json;

// Renders; returns "" on success or the error message.
std::string error_of(const std::string& src, const ojson& ctx = ojson::object()) {
  Result<ChatTemplate> t = ChatTemplate::parse(src);
  if (!t.is_ok()) return t.status().message();
  Result<std::string> r = t.value().render(ctx);
  return r.is_ok() ? "" : r.status().message();
}

std::string repeat(const std::string& s, int n) {
  std::string r;
  for (int i = 0; i < n; ++i) r += s;
  return r;
}

TEST(ChatTemplateLimits, HugeLoopsStop) {
  EXPECT_NE(error_of("{% for i in range(1000000000) %}{% endfor %}"), "");
  EXPECT_NE(error_of("{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}x"
                     "{% endfor %}{% endfor %}{% endfor %}"),
            "");
  EXPECT_NE(error_of("{{ 'ab' * 1000000000000 }}"), "");
  EXPECT_NE(error_of("{{ [1, 2] * 1000000000000 }}"), "");
  EXPECT_NE(error_of("{{ 'x' * 9223372036854775807 }}"), "");
}

TEST(ChatTemplateLimits, ExplodingValuesStop) {
  EXPECT_NE(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"), "");
  EXPECT_NE(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"), "");
  EXPECT_NE(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"), "");
  EXPECT_NE(error_of("{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"), "");
  EXPECT_NE(error_of("{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}{% endfor %}"), "");
  EXPECT_NE(error_of("{% macro m() %}{{ caller() }}{% endmacro %}{% for i in range(10) %}{{ 'x' * 10000000 }}{% endfor %}"
                     "{% set ns = namespace(s='') %}{% for i in range(100) %}{{ 'y' * 1000000 }}{% endfor %}"),
            "");
}

TEST(ChatTemplateLimits, UnboundedRecursionStops) {
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "");
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "");
  EXPECT_NE(error_of("{% for x in l recursive %}{{ loop(l) }}{% endfor %}", {{"l", ojson::array({1})}}), "");
}

TEST(ChatTemplateLimits, DeepNestingIsAnErrorNotAStackOverflow) {
  for (int depth : {250, 1000, 100000}) {
    EXPECT_NE(error_of("{{ " + repeat("(", depth) + "1" + repeat(")", depth) + " }}"), "") << depth;
    EXPECT_NE(error_of("{{ " + repeat("[", depth) + "1" + repeat("]", depth) + " }}"), "") << depth;
    EXPECT_NE(error_of("{{ " + repeat("not ", depth) + "1 }}"), "") << depth;
    EXPECT_NE(error_of("{{ " + repeat("-", depth) + "1 }}"), "") << depth;
    EXPECT_NE(error_of("{{ 1" + repeat(" if 1 else 1", depth) + " }}"), "") << depth;
    EXPECT_NE(error_of(repeat("{% if true %}", depth) + repeat("{% endif %}", depth)), "") << depth;
    EXPECT_NE(error_of(repeat("{% for x in [1] %}", depth) + repeat("{% endfor %}", depth)), "") << depth;
  }
  // Chains nest the tree one level per link: fine when long-ish, an error (not a crash) when absurd.
  for (const char* link : {" + 1", "|trim", " and 1", " * 1"})
    EXPECT_EQ(error_of("{{ 1" + repeat(link, 150) + " }}"), "") << link;
  EXPECT_EQ(error_of("{{ 1" + repeat(" if 1 else 1", 40) + " }}"), "");
  EXPECT_EQ(error_of(repeat("{% if true %}", 40) + "x" + repeat("{% endif %}", 40)), "");
  EXPECT_EQ(error_of("{{ " + repeat("(", 40) + "1" + repeat(")", 40) + " }}"), "");
  for (const char* link : {" + 1", "|trim", " and 1", " * 1", ".x", "[0]", "(1)", " is defined", " if 1 else 1"})
    EXPECT_NE(error_of("{{ 1" + repeat(link, 100000) + " }}"), "") << link;
  EXPECT_EQ(error_of("{{ 1" + repeat(" ~ 1", 100000) + " }}"), "");  // `~` chains are flat
}

TEST(ChatTemplateLimits, DeepDataIsAnError) {
  // (Parsed in place: copying a nlohmann::json recurses per level, so the test must not copy these.)
  ojson deep_list = ojson::parse("{\"messages\": " + repeat("[", 100000) + repeat("]", 100000) + "}");
  EXPECT_NE(error_of("{{ messages }}", deep_list), "");
  ojson deep_obj = ojson::parse("{\"x\": " + repeat("{\"a\":", 5000) + "1" + repeat("}", 5000) + "}");
  EXPECT_NE(error_of("{{ x }}", deep_obj), "");
  TokenizerConfig cfg;
  cfg.chat_template = "{{ messages }}";
  ojson deep_messages = ojson::parse(repeat("[", 100000) + repeat("]", 100000));
  EXPECT_FALSE(apply_chat_template(cfg, deep_messages, true).is_ok());
}

TEST(ChatTemplateLimits, CyclesDoNotHangOrCrash) {
  // A namespace that contains itself prints (elided) and is freed.
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}{{ ns == ns }}"), "");
  EXPECT_EQ(error_of("{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}{{ a }}"), "");
  // A long namespace chain built by mutation is freed without deep recursion.
  EXPECT_EQ(error_of("{% set ns = namespace(head=namespace(next=none)) %}{% set ns.tail = ns.head %}"
                     "{% for i in range(200000) %}{% set n = namespace(next=none) %}{% set t = ns.tail %}"
                     "{% set t.next = n %}{% set ns.tail = n %}{% endfor %}ok"),
            "");
}

// Deterministic token soup: every outcome is fine except a crash.
TEST(ChatTemplateLimits, RandomTokenSoup) {
  static const char* kPieces[] = {
      "{%", "%}", "{{", "}}", "{#", "#}", "-", "+", " ", "\n", "for", "in", "if", "elif", "else", "endif", "endfor",
      "set", "=", "x", "messages", "m", "loop", ".", "index", "(", ")", "[", "]", "{", "}", ",", ":", "|", "trim",
      "tojson", "length", "'s'", "\"q\"", "1", "0", "2.5", "none", "true", "macro", "endmacro", "call", "endcall",
      "namespace", "ns", "*", "**", "/", "//", "%", "~", "is", "not", "defined", "and", "or", "recursive", "raw",
      "endraw", "filter", "endfilter", "with", "endwith", "break", "continue", "range", "items", "map", "select",
      "attribute=", "'role'", "content", "caller", "generation", "endgeneration", "\\", "'", "\"", "#", "!"};
  std::mt19937 rng(1234);
  ojson ctx = {{"messages", ojson::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", "yo"}}})},
               {"x", ojson::array({1, "a", nullptr})}};
  int rendered = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string src;
    int n = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) src += kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
    rendered += error_of(src, ctx).empty();
  }
  EXPECT_GT(rendered, 0);
}

TEST(ChatTemplateLimits, RandomBytesAndMutations) {
  std::mt19937 rng(99);
  for (int iter = 0; iter < 1000; ++iter) {
    std::string src;
    int n = static_cast<int>(rng() % 64);
    for (int k = 0; k < n; ++k) src += static_cast<char>(rng() % 256);
    if (iter % 2) src = "{{ " + src + " }}";
    (void)error_of(src);
  }
  std::ifstream in(std::string(PIPIT_SOURCE_DIR) + "/tests/data/chat_templates/qwen3.jinja");
  std::string base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(base.empty());
  ojson ctx = {{"messages", ojson::array({{{"role", "user"}, {"content", "hi"}},
                                          {{"role", "assistant"}, {"content", "<think>a</think>b"}}})},
               {"add_generation_prompt", true}};
  for (int iter = 0; iter < 1500; ++iter) {
    std::string src = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % src.size();
      switch (rng() % 3) {
        case 0: src.erase(pos, 1 + rng() % 8); break;
        case 1: src.insert(pos, src.substr(rng() % src.size(), 1 + rng() % 8)); break;
        default: src[pos] = "{}%#()[]|.'\"-+ \n"[rng() % 16]; break;
      }
      if (src.empty()) src = "x";
    }
    (void)error_of(src, ctx);
  }
}

}  // namespace
}  // namespace pipit
