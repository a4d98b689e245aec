// `pipit template` end to end: feeding a golden chat.jsonl back in must reproduce its text and ids, and a model
// without a template must fail with a message. Needs the `pipit` binary of the same build (built by `ninja`).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tokenizer/tok_test_util.h"

namespace pipit {
namespace {

struct CmdResult {
  int rc;
  std::string out;
};

CmdResult run(const std::string& cmd) {
  CmdResult r{-1, ""};
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string pipit_binary() { return std::string(PIPIT_BINARY_DIR) + "/pipit"; }

TEST(TemplateCli, JsonlRoundTrip) {
  if (!std::filesystem::exists(pipit_binary())) GTEST_SKIP() << pipit_binary() << " not built (run ninja first)";
  // gemma3 (33 MB tokenizer.json) is covered in-process by ChatGolden.
  for (const std::string folder : {"qwen3", "llama3"}) {
    std::string dir = test::tokenizers_dir() + "/" + folder;
    CmdResult r = run(pipit_binary() + " template -m " + dir + " --jsonl " + dir + "/chat.jsonl");
    ASSERT_EQ(r.rc, 0) << r.out;
    std::vector<test::JsonLine> want = test::read_jsonl(dir + "/chat.jsonl");
    std::vector<nlohmann::json> got;
    size_t b = 0;
    for (size_t e; (e = r.out.find('\n', b)) != std::string::npos; b = e + 1)
      got.push_back(nlohmann::json::parse(r.out.substr(b, e - b)));
    ASSERT_EQ(got.size(), want.size()) << folder;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i]["text"], want[i].value["text"]) << folder << " line " << i + 1;
      EXPECT_EQ(got[i]["ids"], want[i].value["ids"]) << folder << " line " << i + 1;
    }
  }
}

TEST(TemplateCli, MessagesAndErrors) {
  if (!std::filesystem::exists(pipit_binary())) GTEST_SKIP() << pipit_binary() << " not built (run ninja first)";
  std::string qwen3 = test::tokenizers_dir() + "/qwen3";
  CmdResult r = run(pipit_binary() + " template -m " + qwen3 +
              " --messages '[{\"role\":\"user\",\"content\":\"hi\"}]' --kwargs '{\"enable_thinking\": false}'");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  CmdResult none = run(pipit_binary() + " template -m " + test::tokenizers_dir() + "/mistral --messages '[]'");
  EXPECT_EQ(none.rc, 1);
  EXPECT_NE(none.out.find("no chat template"), std::string::npos) << none.out;
  CmdResult bad = run(pipit_binary() + " template -m " + qwen3 + " --messages 'not json'");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("not valid JSON"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace pipit
