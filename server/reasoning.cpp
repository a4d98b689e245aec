// ReasoningSplit: <think>...</think> out of an answer's text, piece by piece (see reasoning.h).
#include "server/reasoning.h"

namespace pipit::server {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The length of the longest end of `s` that is a proper start of `tag` (a tag that may be completed by what comes).
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name) {
  if (name == "auto") return ReasoningFormat::kAuto;
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "deepseek") return ReasoningFormat::kDeepseek;
  return std::nullopt;
}

ReasoningSplit::Out ReasoningSplit::feed(std::string_view text) {
  Out out;
  held_ += text;
  for (;;) {
    switch (state_) {
      case State::kStart: {
        size_t i = 0;
        while (i < held_.size() && blank(held_[i])) ++i;
        const std::string_view rest = std::string_view(held_).substr(i);
        if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // maybe "<think>"
        if (rest.substr(0, kOpen.size()) == kOpen) {
          held_.erase(0, i + kOpen.size());
          state_ = State::kThinkStart;
        } else {
          state_ = State::kContent;
        }
        continue;
      }
      case State::kThinkStart:
      case State::kAfterThink: {
        size_t i = 0;
        while (i < held_.size() && blank(held_[i])) ++i;
        held_.erase(0, i);
        if (held_.empty()) return out;
        state_ = state_ == State::kThinkStart ? State::kThinking : State::kContent;
        continue;
      }
      case State::kThinking: {
        if (const size_t end = held_.find(kClose); end != std::string::npos) {
          size_t keep = end;
          while (keep > 0 && blank(held_[keep - 1])) --keep;  // blanks before </think> are not reasoning
          out.reasoning += held_.substr(0, keep);
          held_.erase(0, end + kClose.size());
          state_ = State::kAfterThink;
          continue;
        }
        // hold back a possible "</think>" being written, and the blanks before it
        size_t keep = held_.size() - partial_tag(held_, kClose);
        while (keep > 0 && blank(held_[keep - 1])) --keep;
        out.reasoning += held_.substr(0, keep);
        held_.erase(0, keep);
        return out;
      }
      case State::kContent:
        out.content += held_;
        held_.clear();
        return out;
    }
  }
}

ReasoningSplit::Out ReasoningSplit::finish() {
  Out out;
  if (state_ == State::kThinking) out.reasoning = std::move(held_);  // cut off before </think>: all of it thought
  else if (state_ == State::kStart || state_ == State::kContent) out.content = std::move(held_);
  held_.clear();
  state_ = State::kContent;
  return out;
}

ReasoningSplit::Out split_reasoning(std::string_view text, bool opened) {
  ReasoningSplit s(opened);
  ReasoningSplit::Out a = s.feed(text), b = s.finish();
  a.reasoning += b.reasoning;
  a.content += b.content;
  return a;
}

bool prompt_opens_thinking(std::string_view tail) {
  const size_t open = tail.rfind(kOpen);
  return open != std::string_view::npos && tail.find(kClose, open) == std::string_view::npos;
}

}  // namespace pipit::server
