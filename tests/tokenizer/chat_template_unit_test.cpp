// Chat template unit tests: the apply_chat_template context (special tokens, named templates, tools validation,
// continue_final_message), key order, errors that name the line, concurrent renders of one parsed template, and
// Python printing rules. Expected strings here are what Python Jinja2/transformers produce (checked by hand with
// make_expected.py's environment); the broad comparison lives in chat_template_golden_test.cpp.
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_text.h"

namespace pipit {
namespace {

using ojson = nlohmann::ordered_json;

std::string render(const std::string& src, const ojson& ctx = ojson::object()) {
  Result<ChatTemplate> t = ChatTemplate::parse(src);
  if (!t.is_ok()) return "PARSE ERROR: " + t.status().message();
  Result<std::string> r = t.value().render(ctx);
  return r.is_ok() ? r.value() : "ERROR: " + r.status().message();
}

ojson msgs(std::initializer_list<std::pair<const char*, const char*>> list) {
  ojson m = ojson::array();
  for (auto& [role, content] : list) m.push_back({{"role", role}, {"content", content}});
  return m;
}

const char* kChatML =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

TEST(ChatTemplate, ChatMLBasics) {
  TokenizerConfig cfg;
  cfg.chat_template = kChatML;
  Result<std::string> r = apply_chat_template(cfg, msgs({{"user", "Hi"}}), true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  struct {
    const char* src;
    const char* line;
  } cases[] = {
      {"ok\n\n{% if x %}\nnever closed", "line 4"},
      {"a\nb\n{{ x | }}", "line 3"},
      {"{% for %}", "line 1"},
      {"1\n2\n3\n{% frobnicate %}", "line 4"},
      {"{{ 'unterminated }}", "line 1"},
      {"x\n{% endfor %}", "line 2"},
      {"{% macro m( %}{% endmacro %}", "line 1"},
      {"{{ a[ }}", "line 1"},
      {"{% set = 1 %}", "line 1"},
      {"{% include 'x.html' %}", "line 1"},
  };
  for (auto& c : cases) {
    Result<ChatTemplate> t = ChatTemplate::parse(c.src);
    ASSERT_FALSE(t.is_ok()) << c.src;
    EXPECT_NE(t.status().message().find(c.line), std::string::npos) << c.src << " -> " << t.status().message();
    EXPECT_EQ(t.status().message().rfind("[chat_template] ", 0), 0u) << t.status().message();
  }
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  EXPECT_EQ(render("a\nb\n{{ raise_exception('bad role: ' ~ r) }}", {{"r", "narrator"}}),
            "ERROR: [chat_template] line 3: bad role: narrator");
  EXPECT_EQ(render("\n\n\n{{ 1 + 'a' }}"), "ERROR: [chat_template] line 4: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(render("{% for m in messages %}\n{{ m.content.upper() }}\n{% endfor %}", {{"messages", ojson::array({1})}}),
            "ERROR: [chat_template] line 2: 'int object' has no attribute 'content'");
  EXPECT_EQ(render("x\n{{ 'a' | nofilter }}"), "ERROR: [chat_template] line 2: No filter named 'nofilter'.");
  EXPECT_EQ(render("{% macro f() %}\n\n{{ undefined_fn() }}{% endmacro %}{{ f() }}"),
            "ERROR: [chat_template] line 3: 'undefined_fn' is undefined");
}

TEST(ChatTemplate, UnknownRoleRaises) {
  TokenizerConfig cfg;  // Mistral-7B-Instruct-v0.1's template
  cfg.chat_template =
      "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
      "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
      "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
      "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";
  cfg.raw = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  Result<std::string> ok = apply_chat_template(cfg, msgs({{"user", "a"}, {"assistant", "b"}}), false);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok.value(), "<s>[INST] a [/INST]b</s>");
  Result<std::string> bad = apply_chat_template(cfg, msgs({{"user", "a"}, {"narrator", "b"}}), true);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), "[chat_template] line 1: Only user and assistant roles are supported!");
}

TEST(ChatTemplate, KeyOrderFollowsTheJsonType) {
  const char* src = "{{ d | tojson }} {% for k in d %}{{ k }}{% endfor %}";
  ojson ordered = ojson::parse(R"({"d": {"name": "f", "description": "x", "a": 1}})");
  EXPECT_EQ(render(src, ordered), "{\"name\": \"f\", \"description\": \"x\", \"a\": 1} namedescriptiona");
  nlohmann::json sorted = nlohmann::json::parse(R"({"d": {"name": "f", "description": "x", "a": 1}})");
  Result<ChatTemplate> t = ChatTemplate::parse(src);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t.value().render(sorted).value(), "{\"a\": 1, \"description\": \"x\", \"name\": \"f\"} adescriptionname");
}

TEST(ChatTemplate, NoTemplateIsAnError) {
  TokenizerConfig cfg;
  Result<std::string> r = apply_chat_template(cfg, msgs({{"user", "a"}}), true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("no chat template"), std::string::npos);
}

TEST(ChatTemplate, NamedTemplates) {
  TokenizerConfig cfg;
  cfg.chat_templates = {{"default", "D{{ messages|length }}"}, {"tool_use", "T{{ tools|length }}"}, {"rag", "R"}};
  cfg.chat_template = cfg.chat_templates["default"];
  ojson m = msgs({{"user", "a"}});
  EXPECT_EQ(apply_chat_template(cfg, m, false).value(), "D1");
  ojson tools = {{"tools", ojson::array({{{"type", "function"}}})}};
  EXPECT_EQ(apply_chat_template(cfg, m, false, tools).value(), "T1");
  EXPECT_EQ(apply_chat_template(cfg, m, false, {{"chat_template", "rag"}}).value(), "R");
  EXPECT_EQ(apply_chat_template(cfg, m, false, {{"chat_template", "literal {{ 1 + 1 }}"}}).value(), "literal 2");
}

TEST(ChatTemplate, ContextAsTransformersBuildsIt) {
  TokenizerConfig cfg;
  cfg.chat_template =
      "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ additional_special_tokens }}|{{ image_token }}|"
      "{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|{{ enable_thinking }}|{{ tokenize is defined }}|"
      "{{ messages|length }}";
  cfg.raw = nlohmann::json::parse(R"({
    "bos_token": {"content": "<s>", "lstrip": false, "__type": "AddedToken"}, "eos_token": "</s>", "pad_token": null,
    "additional_special_tokens": ["<a>", {"content": "<b>"}],
    "extra_special_tokens": {"image_token": "<img>"}})");
  Result<std::string> r = apply_chat_template(cfg, msgs({{"user", "x"}}), true, {{"enable_thinking", false}, {"tokenize", true}});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), "<s>|</s>|False|['<a>', '<b>']|<img>|None|None|True|False|False|1");
  // Extra kwargs override special tokens, as in transformers ({**special_tokens_map, **kwargs}).
  EXPECT_EQ(apply_chat_template(cfg, msgs({}), false, {{"eos_token", "E"}}).value().substr(0, 6), "<s>|E|");
}

TEST(ChatTemplate, InputValidation) {
  TokenizerConfig cfg;
  cfg.chat_template = kChatML;
  EXPECT_FALSE(apply_chat_template(cfg, ojson::object(), true).is_ok());
  EXPECT_FALSE(apply_chat_template(cfg, msgs({}), true, {{"tools", "not a list"}}).is_ok());
  EXPECT_FALSE(apply_chat_template(cfg, msgs({}), true, {{"tools", ojson::array({1})}}).is_ok());
  EXPECT_FALSE(apply_chat_template(cfg, msgs({}), true, {{"documents", ojson::array({"x"})}}).is_ok());
  EXPECT_FALSE(apply_chat_template(cfg, msgs({}), true, ojson::array()).is_ok());
}

TEST(ChatTemplate, ContinueFinalMessage) {
  TokenizerConfig cfg;
  cfg.chat_template = kChatML;
  ojson m = msgs({{"user", "2+2?"}, {"assistant", "The answer is"}});
  Result<std::string> r = apply_chat_template(cfg, m, false, {{"continue_final_message", true}});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value(), "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\nThe answer is");
  ojson spaced = msgs({{"user", "q"}, {"assistant", "  padded  "}});
  cfg.chat_template = "{% for m in messages %}[{{ m.content | trim }}]{% endfor %}";
  EXPECT_EQ(apply_chat_template(cfg, spaced, false, {{"continue_final_message", true}}).value(), "[q][padded");
  EXPECT_FALSE(apply_chat_template(cfg, m, true, {{"continue_final_message", true}}).is_ok());
  cfg.chat_template = "{% for m in messages %}{{ m.role }}{% endfor %}";  // drops the content: nothing to continue
  EXPECT_FALSE(apply_chat_template(cfg, m, false, {{"continue_final_message", true}}).is_ok());
}

TEST(ChatTemplate, ParseOnceRenderConcurrently) {
  Result<ChatTemplate> t = ChatTemplate::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m.content|length %}"
      "{{ loop.index }}:{{ m.content|upper }};{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.is_ok());
  const ChatTemplate& tpl = t.value();
  std::vector<ojson> contexts;
  std::vector<std::string> expected;
  for (int i = 0; i < 8; ++i) {
    ojson m = ojson::array();
    for (int k = 0; k <= i; ++k) m.push_back({{"role", "user"}, {"content", std::string(k + 1, 'a' + i)}});
    contexts.push_back({{"messages", m}});
    expected.push_back(tpl.render(contexts.back()).value());
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      for (int rep = 0; rep < 200; ++rep) {
        int i = (th + rep) % 8;
        Result<std::string> r = tpl.render(contexts[i]);
        if (!r.is_ok() || r.value() != expected[i]) ++mismatches[th];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int th = 0; th < 8; ++th) EXPECT_EQ(mismatches[th], 0) << "thread " << th;
}

TEST(ChatTemplate, PythonPrinting) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.0, 2.5e-7, {'k': \"it's\"}, (1,)] }}"),
            "[1, 'a', None, True, 1.0, 2.5e-07, {'k': \"it's\"}, (1,)]");
  EXPECT_EQ(render("{{ x }}", {{"x", 1.0}}), "1.0");
  EXPECT_EQ(render("{{ x }}", {{"x", 100000000000000000000.0}}), "1e+20");
  EXPECT_EQ(render("{{ x }}|{{ y }}", {{"x", nullptr}, {"y", false}}), "None|False");
  EXPECT_EQ(render("{{ undefined_thing }}[{{ d.missing }}]", {{"d", ojson::object()}}), "[]");
  EXPECT_EQ(jinja::py_float_repr(0.1), "0.1");
  EXPECT_EQ(jinja::py_float_repr(1e16), "1e+16");
  EXPECT_EQ(jinja::py_float_repr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(jinja::py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(jinja::py_float_repr(-1.5e-5), "-1.5e-05");
  EXPECT_EQ(jinja::py_repr_string("a'b"), "\"a'b\"");
  EXPECT_EQ(jinja::py_repr_string("\x7f\xc2\xa0\n"), "'\\x7f\\xa0\\n'");
}

TEST(ChatTemplate, WhitespaceControl) {
  // trim_blocks + lstrip_blocks, as transformers sets them.
  EXPECT_EQ(render("<a>\n  {% if true %}\n  x\n  {% endif %}\n</a>"), "<a>\n  x\n</a>");
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("a\n  {%- if true %} b {% endif -%}\n c"), "a b c");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
}

}  // namespace
}  // namespace pipit
