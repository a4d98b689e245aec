// Tool calls: which syntax a chat template teaches its model, and the model's output parsed back into OpenAI
// `tool_calls`, whole (non-streaming) or as it streams (content deltas, then one tool-call delta per call).
//
// Syntaxes:
//   kTagged  <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, any number, text around them is content:
//            Qwen2.5, Qwen3, Hermes-style templates, SmolLM3 (xml_tools).
//   kLlama3  the whole answer is one JSON object {"name": ..., "parameters": {...}} (Llama 3.1 / 3.2 custom tools;
//            3.1 may start it with <|python_tag|>, a special token the text stream drops) — several may follow
//            each other separated by ';' (Llama 3.2 sometimes does).
// A call whose JSON does not parse, or names no tool the request offered, stays content: the client sees what the
// model wrote rather than a call it cannot run.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipit::server {

enum class ToolSyntax { kNone, kTagged, kLlama3 };

// From the template source: "<tool_call>" -> kTagged, "<|python_tag|>" or Llama's "parameters" convention ->
// kLlama3, else kNone (the template does not render tools).
ToolSyntax detect_tool_syntax(const std::string& chat_template);
const char* tool_syntax_name(ToolSyntax s);

struct ToolCall {
  std::string id;         // "call_" + 24 random characters
  std::string name;
  std::string arguments;  // JSON text of an object, keys in the model's order
};

struct ParsedAnswer {
  std::string content;
  std::vector<ToolCall> calls;
};

// The whole answer. `names`: the offered tools (a call to another name stays content); empty accepts any.
ParsedAnswer parse_tool_calls(ToolSyntax syntax, const std::string& text, const std::vector<std::string>& names);

// OpenAI's message.tool_calls entry / streamed delta entry for a call.
nlohmann::json tool_call_json(const ToolCall& c, int index, bool delta);

// Streaming: text in, deltas out. Content flows through as it comes except what could be the start of a call
// ("<tool_call" being typed, or a Llama answer that opens with '{'), which is held until it is known.
class ToolCallStream {
 public:
  ToolCallStream(ToolSyntax syntax, std::vector<std::string> names) : syntax_(syntax), names_(std::move(names)) {}
  struct Out {
    std::string content;
    std::vector<ToolCall> calls;  // completed calls, in order
  };
  Out feed(const std::string& piece);
  Out finish();  // end of the answer: whatever is held back
  int n_calls() const { return n_calls_; }

 private:
  Out drain(bool final);
  ToolSyntax syntax_;
  std::vector<std::string> names_;
  std::string buf_;
  bool started_ = false;  // Llama: the first non-space character has been seen
  bool json_mode_ = false;  // Llama: the answer is a call
  int n_calls_ = 0;
};

std::string make_call_id();

}  // namespace pipit::server
