// The thinking part of an answer, for models that write it between <think> and </think> (Qwen3, DeepSeek-R1, ...):
// returned as message.reasoning_content (streamed as delta.reasoning_content), with `content` the rest, as
// llama-server's --reasoning-format deepseek does. Text is split as it streams: a partial tag at the end of what
// has arrived is held back until the next piece says whether it is one.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pipit::server {

enum class ReasoningFormat { kAuto, kNone, kDeepseek };  // auto: deepseek when the template writes <think>
std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name);  // "auto", "none", "deepseek"

class ReasoningSplit {
 public:
  // `opened`: the prompt already ends inside a <think> block (templates that open it for the model).
  explicit ReasoningSplit(bool opened = false) : state_(opened ? State::kThinkStart : State::kStart) {}
  struct Out {
    std::string reasoning, content;
  };
  Out feed(std::string_view text);
  Out finish();  // the end of the answer: whatever was held back

 private:
  // kStart: before the first non-blank text (a leading <think> opens the reasoning); kThinkStart / kAfterThink:
  // blanks after <think> / </think> are dropped; kThinking: inside the block; kContent: the rest, passed through.
  enum class State { kStart, kThinkStart, kThinking, kAfterThink, kContent };
  State state_;
  std::string held_;  // text not yet given out: a possible tag, or blanks that may precede </think>
};

// A whole answer at once (non-streaming).
ReasoningSplit::Out split_reasoning(std::string_view text, bool opened);

// Whether a rendered prompt's end leaves a <think> block open: its last "<think>" has no "</think>" after it.
bool prompt_opens_thinking(std::string_view prompt_tail);

}  // namespace pipit::server
