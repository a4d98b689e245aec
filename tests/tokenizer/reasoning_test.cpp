// ReasoningSplit (server/reasoning.h): <think>...</think> split from the answer, whole or piece by piece, with tags
// cut anywhere between pieces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/reasoning.h"

namespace pipit::server {
namespace {

// The answer fed in pieces of `step` bytes: what the stream's deltas add up to.
ReasoningSplit::Out streamed(const std::string& text, size_t step, bool opened) {
  ReasoningSplit s(opened);
  ReasoningSplit::Out all;
  for (size_t i = 0; i < text.size(); i += step) {
    ReasoningSplit::Out o = s.feed(std::string_view(text).substr(i, step));
    all.reasoning += o.reasoning;
    all.content += o.content;
  }
  ReasoningSplit::Out o = s.finish();
  all.reasoning += o.reasoning;
  all.content += o.content;
  return all;
}

struct Case {
  std::string text;
  bool opened;
  std::string reasoning, content;
};

TEST(ReasoningSplit, WholeAndStreamedAlike) {
  const std::vector<Case> cases = {
      {"<think>\nLet me see.\n</think>\n\nParis.", false, "Let me see.", "Paris."},
      {"  <think>a < b </think>x</think>", false, "a < b", "x</think>"},  // only the first block
      {"Paris, <think>not here</think>", false, "", "Paris, <think>not here</think>"},
      {"Let me see.\n</think>\n\nParis.", true, "Let me see.", "Paris."},  // the template opened the block
      {"<think>\ncut off before the end", false, "cut off before the end", ""},
      {"<think>\n\n</think>\n\nhi", false, "", "hi"},
      {"<thin", false, "", "<thin"},  // a partial tag that never completes is content
      {"", false, "", ""},
      {"no thinking at all", false, "", "no thinking at all"},
      {"<think>x</thinking> y</think>z", false, "x</thinking> y", "z"},
  };
  for (const Case& c : cases) {
    ReasoningSplit::Out whole = split_reasoning(c.text, c.opened);
    EXPECT_EQ(whole.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(whole.content, c.content) << c.text;
    for (size_t step : {1, 2, 3, 5, 7}) {
      ReasoningSplit::Out s = streamed(c.text, step, c.opened);
      EXPECT_EQ(s.reasoning, c.reasoning) << c.text << " step " << step;
      EXPECT_EQ(s.content, c.content) << c.text << " step " << step;
    }
  }
}

TEST(ReasoningSplit, ReasoningStreamsBeforeTheEnd) {
  ReasoningSplit s;
  EXPECT_EQ(s.feed("<think>\nStep one").reasoning, "Step one");
  EXPECT_EQ(s.feed(" and two.\n</thi").reasoning, " and two.");  // the blank and the partial tag held back
  ReasoningSplit::Out o = s.feed("nk>\n\nAnswer");
  EXPECT_EQ(o.reasoning, "");
  EXPECT_EQ(o.content, "Answer");
}

TEST(ReasoningSplit, PromptOpensThinking) {
  EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace pipit::server
