// Tool calls (server/tool_calls.h, server/structured.cpp): the syntax each real chat template teaches, parsing
// answers into calls, the streaming parser giving the same calls and content however the text is split into
// pieces, and forced calls: the grammar built for tool_choice accepts exactly calls the parser reads back.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "runtime/grammar.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace pipit::server {
namespace {

using ojson = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(PIPIT_SOURCE_DIR) + "/tests/data/chat_templates/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

TEST(ToolCalls, SyntaxOfTheRealTemplates) {
  EXPECT_EQ(detect_tool_syntax(read_template("qwen2_5.jinja")), ToolSyntax::kTagged);
  EXPECT_EQ(detect_tool_syntax(read_template("qwen3.jinja")), ToolSyntax::kTagged);
  EXPECT_EQ(detect_tool_syntax(read_template("smollm3.jinja")), ToolSyntax::kTagged);
  EXPECT_EQ(detect_tool_syntax(read_template("llama3_1.jinja")), ToolSyntax::kLlama3);
  EXPECT_EQ(detect_tool_syntax(read_template("llama3_2.jinja")), ToolSyntax::kLlama3);
  EXPECT_EQ(detect_tool_syntax(read_template("gemma3.jinja")), ToolSyntax::kNone);
  EXPECT_EQ(detect_tool_syntax(read_template("llama3.jinja")), ToolSyntax::kNone);
}

TEST(ToolCalls, TaggedAnswers) {
  const std::vector<std::string> names = {"get_weather", "get_time"};
  auto a = parse_tool_calls(ToolSyntax::kTagged,
                            "<think>\nok\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                            "{\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
                            "\"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>",
                            names);
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, "{\"city\":\"Paris\",\"unit\":\"c\"}");  // the model's key order
  EXPECT_EQ(a.calls[1].arguments, "{\"tz\":\"CET\"}");
  EXPECT_EQ(a.content, "<think>\nok\n</think>");
  EXPECT_EQ(a.calls[0].id.size(), 29u);
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  // arguments given as a JSON string are read too
  auto s = parse_tool_calls(ToolSyntax::kTagged,
                            "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}</tool_call>",
                            names);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].arguments, "{\"tz\":\"UTC\"}");
  // not calls: broken JSON, an unknown tool, an unclosed tag -> all content, as written
  for (const char* text : {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>",
                           "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
                           "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}", "plain answer"}) {
    auto p = parse_tool_calls(ToolSyntax::kTagged, text, names);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
}

TEST(ToolCalls, Llama3Answers) {
  const std::vector<std::string> names = {"get_weather"};
  auto a = parse_tool_calls(ToolSyntax::kLlama3,
                            " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}", names);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{\"city\":\"Rome\"}");
  EXPECT_EQ(a.content, "");
  auto two = parse_tool_calls(ToolSyntax::kLlama3,
                              "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"A}\"}}; "
                              "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"B\"}}",
                              names);
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[0].arguments, "{\"city\":\"A}\"}");
  for (const char* text : {"The weather is nice.", "{\"name\": \"get_weather\", \"parameters\": {}} and more",
                           "{\"city\": \"Rome\"}"}) {
    auto p = parse_tool_calls(ToolSyntax::kLlama3, text, names);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
}

// Streams `text` in pieces of `step` bytes; returns content and the calls' "name:arguments".
std::pair<std::string, std::vector<std::string>> stream(ToolSyntax syn, const std::string& text, size_t step,
                                                        const std::vector<std::string>& names) {
  ToolCallStream s(syn, names);
  std::string content;
  std::vector<std::string> calls;
  auto take = [&](ToolCallStream::Out o) {
    content += o.content;
    for (auto& c : o.calls) calls.push_back(c.name + ":" + c.arguments);
  };
  for (size_t i = 0; i < text.size(); i += step) take(s.feed(text.substr(i, step)));
  take(s.finish());
  return {content, calls};
}

TEST(ToolCalls, StreamingGivesTheSameAnswerForEverySplit) {
  const std::vector<std::string> names = {"get_weather", "get_time"};
  const std::vector<std::pair<ToolSyntax, std::string>> cases = {
      {ToolSyntax::kTagged, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                            "\"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
                            "</tool_call>"},
      {ToolSyntax::kTagged, "No tools needed: a < b, and <tool is not a tag. <tool_call"},
      {ToolSyntax::kTagged, "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call> after"},
      {ToolSyntax::kLlama3, "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"PST\"}}"},
      {ToolSyntax::kLlama3, "Sure: {\"name\": \"get_time\"}"},
  };
  for (auto& [syn, text] : cases) {
    ParsedAnswer whole = parse_tool_calls(syn, text, names);
    std::vector<std::string> want_calls;
    for (auto& c : whole.calls) want_calls.push_back(c.name + ":" + c.arguments);
    for (size_t step = 1; step <= text.size(); ++step) {
      auto [content, calls] = stream(syn, text, step, names);
      ASSERT_EQ(calls, want_calls) << text << " step " << step;
      // streamed content: the whole answer's content (whitespace between calls is dropped either way)
      ASSERT_EQ(content.find_first_not_of(" \n") == std::string::npos ? "" : content,
                whole.calls.empty() ? text : content)
          << text << " step " << step;
      if (whole.calls.empty()) {
        ASSERT_EQ(content, text);
      }
    }
  }
  // content before a call streams before the call is complete
  ToolCallStream s(ToolSyntax::kTagged, names);
  EXPECT_EQ(s.feed("Hello <tool").content, "Hello ");
  EXPECT_EQ(s.feed("_call>\n{\"name\": \"get_time\",").content, "");
  auto o = s.feed(" \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].name, "get_time");
}

// tool_choice: the forced-call grammar admits a call the parser reads back, and nothing else.
TEST(ToolCalls, ForcedCallGrammar) {
  const ojson body = ojson::parse(R"({
    "tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time"}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "parallel_tool_calls": false})");
  for (ToolSyntax syn : {ToolSyntax::kTagged, ToolSyntax::kLlama3}) {
    ParsedRequest pr;
    pr.chat = true;
    const std::string tmpl = syn == ToolSyntax::kTagged ? "<tool_call>" : "<|python_tag|>";
    auto e = parse_structured(body, tmpl, pr);
    ASSERT_FALSE(e) << e->message;
    ASSERT_TRUE(pr.params.grammar);
    EXPECT_EQ(pr.tool_names, (std::vector<std::string>{"get_weather", "get_time"}));
    const std::string call = syn == ToolSyntax::kTagged
                                 ? "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
                                   "\"unit\": \"c\"}}\n</tool_call>"
                                 : "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"c\"}}";
    GrammarMatcher m(pr.params.grammar);
    EXPECT_TRUE(m.accept(call) && m.can_end() && m.finished()) << call;
    auto parsed = parse_tool_calls(syn, call, pr.tool_names);
    ASSERT_EQ(parsed.calls.size(), 1u);
    EXPECT_EQ(parsed.calls[0].arguments, "{\"city\":\"Oslo\",\"unit\":\"c\"}");
    GrammarMatcher other(pr.params.grammar);
    EXPECT_FALSE(other.accept(syn == ToolSyntax::kTagged ? "<tool_call>\n{\"name\": \"get_time\""
                                                         : "{\"name\": \"get_time\""));
  }
}

// tool_choice "required": with parallel_tool_calls (OpenAI's default) the grammar admits several calls of any of
// the tools, which the parser reads back; with parallel_tool_calls false, or a named function, exactly one.
TEST(ToolCalls, RequiredParallelAdmitsSeveralCalls) {
  const std::string tools = R"("tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time"}}])";
  const std::string one_call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const std::string two_calls = one_call + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  struct Case {
    std::string choice;
    bool parallel, several;
  };
  for (const Case& c : {Case{R"("required")", true, true}, Case{R"("required")", false, false},
                        Case{R"({"type": "function", "function": {"name": "get_weather"}})", true, false}}) {
    ParsedRequest pr;
    pr.chat = true;
    const ojson body = ojson::parse("{" + tools + ", \"tool_choice\": " + c.choice +
                                    ", \"parallel_tool_calls\": " + (c.parallel ? "true" : "false") + "}");
    auto e = parse_structured(body, "<tool_call>", pr);
    ASSERT_FALSE(e) << e->message;
    GrammarMatcher one(pr.params.grammar);
    EXPECT_TRUE(one.accept(one_call) && one.can_end()) << c.choice;
    EXPECT_EQ(one.finished(), !c.several) << c.choice;  // nothing may follow a single call
    GrammarMatcher two(pr.params.grammar);
    EXPECT_EQ(two.accept(two_calls) && two.can_end(), c.several) << c.choice << " parallel " << c.parallel;
    if (c.several) {
      auto parsed = parse_tool_calls(ToolSyntax::kTagged, two_calls, pr.tool_names);
      ASSERT_EQ(parsed.calls.size(), 2u);
      EXPECT_EQ(parsed.calls[1].name, "get_time");
    }
  }
}

TEST(ToolCalls, BadRequestsNameTheField) {
  auto err = [](const char* body) -> std::pair<std::string, std::string> {
    ParsedRequest pr;
    pr.chat = true;
    auto e = parse_structured(ojson::parse(body), "<tool_call>", pr);
    return e ? std::pair{e->param, e->message} : std::pair{std::string(), std::string()};
  };
  const char* tools = R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])";
  EXPECT_EQ(err((std::string("{") + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "g"}}})").c_str()).first,
            "tool_choice");
  EXPECT_EQ(err((std::string("{") + tools + R"(, "tool_choice": "sometimes"})").c_str()).first, "tool_choice");
  EXPECT_EQ(err(R"({"tool_choice": "required"})").first, "tool_choice");
  EXPECT_EQ(err(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"a": {"type": "string", "pattern": "\\bx"}}}}}], "tool_choice": "required"})").first,
            "tools[0].function.parameters");
  EXPECT_EQ(err(R"({"tools": [{"type": "function"}]})").first, "tools[0].function");
  EXPECT_EQ(err(R"({"tools": "f"})").first, "tools");
  EXPECT_EQ(err(R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integr"}}}})").first,
            "response_format.json_schema.schema");
  EXPECT_EQ(err(R"({"response_format": {"type": "yaml"}})").first, "response_format");
  EXPECT_EQ(err(R"({"grammar": "root ::= \"a\" root"})").first, "grammar");  // cannot match: never ends
  EXPECT_EQ(err(R"({"grammar": "root ::= nothing"})").first, "grammar");
  EXPECT_EQ(err(R"({"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})").first, "grammar");
  ParsedRequest pr;
  pr.chat = true;
  auto e = parse_structured(ojson::parse(std::string("{") + tools + "}"), "no tools here", pr);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools");
}

}  // namespace
}  // namespace pipit::server
