// Chat templates: renders a model's HF `chat_template` (a Jinja template in tokenizer_config.json) byte for byte as
// Python `transformers` does: Jinja2's ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
// loopcontrols extension, transformers' tojson (ensure_ascii=False, no HTML escaping), raise_exception and
// strftime_now. The interpreter lives in tokenizer/jinja_*.
//
// Goals: every construct the chat templates of Qwen2/2.5/3 (+VL), Llama-3.x, Gemma-3, SmolLM3 and Mistral use;
// Python printing rules ({{ [1, 'a'] }} -> "[1, 'a']", 1.0 -> "1.0", True/None); errors, never crashes, for broken
// templates or hostile input (nesting, loop and output limits). Non-goals: autoescaping, template inheritance
// ({% extends %}, {% include %}), async.
//
// Key order: JSON objects (tools, tool-call arguments) are printed by tojson in the order they are iterated. Pass
// nlohmann::ordered_json to keep the caller's order, as Python dicts do; nlohmann::json sorts keys.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace pipit {

namespace jinja {
struct Program;
}

class ChatTemplate {
 public:
  // Syntax errors name the template line: "[chat_template] line 3: unknown tag 'foo'".
  static Result<ChatTemplate> parse(std::string_view source);
  // `context` is a JSON object: its keys become template variables. Runtime errors (raise_exception, an unknown
  // filter, adding a string to a number, ...) name the line too. Thread-safe: one parse, many concurrent renders.
  Result<std::string> render(const nlohmann::ordered_json& context) const;
  Result<std::string> render(const nlohmann::json& context) const;

 private:
  std::shared_ptr<const jinja::Program> program_;
};

// What run/chat/serve call: builds the context as transformers' apply_chat_template does and renders the model's
// default template (or the "tool_use" one when tools are given and the config has named templates):
//   messages, add_generation_prompt, tools (None when absent), documents (None when absent),
//   bos_token / eos_token / unk_token / sep_token / pad_token / cls_token / mask_token /
//   additional_special_tokens and extra_special_tokens from tokenizer_config.json,
//   and every other key of `extra_context` (enable_thinking, date_string, add_vision_id, xml_tools, ...), which
//   override the special tokens. strftime_now and raise_exception are always available.
// `extra_context` may also hold "chat_template" (a template name from the config, or a template string) and
// "continue_final_message" (cut the text after the last message's content, as transformers does).
// Errors if the model has no template. Parsed templates are cached by source, so repeated calls parse once.
Result<std::string> apply_chat_template(const Tokenizer& tok, const nlohmann::json& messages, bool add_generation_prompt,
                                        const nlohmann::json& extra_context = nlohmann::json::object());
// `max_output_bytes` (0: the interpreter's 64 MiB) caps the rendered text; a template that writes more is an error.
Result<std::string> apply_chat_template(const Tokenizer& tok, const nlohmann::ordered_json& messages,
                                        bool add_generation_prompt,
                                        const nlohmann::ordered_json& extra_context = nlohmann::ordered_json::object(),
                                        size_t max_output_bytes = 0);
// The same from a tokenizer config alone (tests, tools that have no tokenizer.json).
Result<std::string> apply_chat_template(const TokenizerConfig& config, const nlohmann::ordered_json& messages,
                                        bool add_generation_prompt,
                                        const nlohmann::ordered_json& extra_context = nlohmann::ordered_json::object());

}  // namespace pipit
