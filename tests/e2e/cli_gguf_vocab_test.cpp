// The CLI on llama.cpp's Gemma 4 GGUF with a vocabulary (tokenizer.ggml.model "gemma4"): tests/data/llamacpp_gguf/
// gemma4_bpe-Q8_0.gguf, the tiny checkpoint with the Gemma-4-shaped tokenizer of tests/data/gemma4_bpe_tokenizer
// (make_gemma4_vocab_gguf.py). `pipit run -p TEXT` used to stop at "tokenizer model 'gemma4' is not supported".
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_run_util.h"

namespace pipit {
namespace {

std::string gguf() { return std::string(PIPIT_SOURCE_DIR) + "/tests/data/llamacpp_gguf/gemma4_bpe-Q8_0.gguf"; }

nlohmann::json run_json(const std::string& args) {
  const test::RunResult r = test::run_cli("run -m " + gguf() + " -t 1 --temp 0 --json " + args, false);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out;
  return j.is_object() ? j : nlohmann::json::object();
}

// A text prompt runs through the file's chat template ("<bos><|turn>user\nhello<turn|>\n<|turn>model\n": 10 ids) or
// raw with --no-template (<bos> hello: 2 ids); the answer stops at <turn|> (106) and <|tool_response> (50), the
// end-of-generation tokens llama.cpp gives Gemma 4, and not at <|turn> (105).
TEST(CliGgufVocab, Gemma4RunsTextPromptsAndStopsAtItsTurnEnd) {
  const test::RunResult plain = test::run_cli("run -m " + gguf() + " -t 1 -p hello -n 4 --temp 0");
  EXPECT_EQ(plain.code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("not supported"), std::string::npos) << plain.out;
  auto chat = run_json("-p hello -n 4");
  EXPECT_EQ(chat["timings"]["prompt_tokens"], 10) << chat.dump();
  auto raw = run_json("-p hello -n 4 --no-template");
  EXPECT_EQ(raw["timings"]["prompt_tokens"], 2) << raw.dump();
  for (int eog : {106, 50, 1}) {
    auto j = run_json("-p hello -n 6 -l " + std::to_string(eog) + "+100");
    EXPECT_EQ(j["finish_reason"], "stop") << eog << " " << j.dump();
    EXPECT_LE(j["tokens"].size(), 1u) << eog << " " << j.dump();
  }
  auto turn = run_json("-p hello -n 6 -l 105+100");
  EXPECT_EQ(turn["finish_reason"], "length") << turn.dump();
  EXPECT_EQ(turn["tokens"], nlohmann::json::array({105, 105, 105, 105, 105, 105})) << turn.dump();
}

// `pipit template` and `pipit tokenize` read the template and the vocabulary from the GGUF.
TEST(CliGgufVocab, Gemma4TemplateAndTokenize) {
  const test::RunResult t = test::run_cli(
      "template -m " + gguf() + " --messages '[{\"role\": \"user\", \"content\": \"hello  world\"}]'", false);
  EXPECT_EQ(t.code, 0) << t.out;
  EXPECT_EQ(t.out, "<bos><|turn>user\nhello  world<turn|>\n<|turn>model\n");
  const test::RunResult k = test::run_cli("tokenize -m " + gguf() + " -p 'hello world'", false);
  EXPECT_EQ(k.code, 0) << k.out;
  EXPECT_EQ(k.out, "2 32 35\n");  // <bos> hello ▁world
}

}  // namespace
}  // namespace pipit
