// `pipit run` on the one generation path: seeded sampling with --lookup or --draft prints exactly the text of plain
// decoding; --grammar / --json-schema constrain the answer; bad grammars are one error line.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_run_util.h"
#include "tests/test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

using CliOutput = test::RunResult;

// `pipit run` on stories260k: stdout alone (stderr has the timings), or stdout + stderr with `err`
CliOutput pipit_run(const std::string& args, bool err = false) {
  return test::run_cli("run -m " + test::model_dir("stories260k") + " -t 1 " + args, err);
}

// The case the redesign issue measured: `--lookup --temp 0.8 --seed 5` used to print other text than plain.
TEST(CliGeneration, SpeculativeSampledTextEqualsPlain) {
  const std::string prompt = "-p \"Once upon a time, there was a little girl. Once upon a time, there was a\" -n 48";
  int differ = 0;
  std::string first;
  for (const char* sampling : {"--temp 0.8 --seed 5", "--temp 0.8 --seed 6 --top-k 0", "--temp 1.2 --seed 7 --top-p 1 "
                                                                                       "--min-p 0 --top-k 0"}) {
    SCOPED_TRACE(sampling);
    const CliOutput plain = pipit_run(prompt + " " + sampling);
    ASSERT_EQ(plain.code, 0);
    const CliOutput lookup = pipit_run(prompt + " " + sampling + " --lookup --draft-max 4");
    const CliOutput draft = pipit_run(prompt + " " + sampling + " --draft " + test::model_dir("stories260k"));
    EXPECT_EQ(lookup.out, plain.out);
    EXPECT_EQ(draft.out, plain.out);
    if (first.empty()) first = plain.out;
    differ += plain.out != first;
  }
  EXPECT_GT(differ, 0);  // the seeds and settings do change the text
}

// No --seed: a new seed each run, said in the speed line and in --json; --seed with it gives the same text. Sampling
// options left unset take the model's generation_config.json (do_sample false: greedy), set ones win.
TEST(CliGeneration, RandomSeedByDefaultAndModelSampling) {
  const std::string prompt = "-p \"Once upon a time\" -n 24 --temp 1.0 --json";
  const CliOutput a = pipit_run(prompt), b = pipit_run(prompt);
  ASSERT_EQ(a.code, 0);
  const auto ja = nlohmann::json::parse(a.out, nullptr, false), jb = nlohmann::json::parse(b.out, nullptr, false);
  ASSERT_TRUE(ja.is_object() && jb.is_object()) << a.out;
  EXPECT_NE(ja["sampling"]["seed"], jb["sampling"]["seed"]);
  const uint64_t seed = ja["sampling"]["seed"].get<uint64_t>();
  const CliOutput again_out = pipit_run(prompt + " --seed " + std::to_string(seed));
  const auto again = nlohmann::json::parse(again_out.out, nullptr, false);
  ASSERT_TRUE(again.is_object()) << again_out.out;
  EXPECT_EQ(again["tokens"], ja["tokens"]);
  const CliOutput line = pipit_run("-p \"Once upon a time\" -n 4 --temp 1.0", true);
  EXPECT_NE(line.out.find("| seed "), std::string::npos) << line.out;
  EXPECT_NE(pipit_run("-p x --seed -2", true).out.find("--seed -2"), std::string::npos);

  test::ScratchDir d("gencfg");
  const std::string src = test::model_dir("stories260k");
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    test::write_bytes(d.path(f), test::read_bytes(src + "/" + f));
  test::write_bytes(d.path("generation_config.json"),
                   R"({"bos_token_id": 1, "eos_token_id": 2, "do_sample": false, "top_k": 7, "top_p": 7})");
  auto run_dir = [&](const std::string& args) {
    return test::run_cli("run -m " + d.path("") + " -t 1 -p \"Once upon a time\" -n 24 --json " + args, false);
  };
  const CliOutput def_out = run_dir("");
  const auto def = nlohmann::json::parse(def_out.out, nullptr, false);
  ASSERT_TRUE(def.is_object()) << def_out.out;
  EXPECT_EQ(def["sampling"]["temperature"], 0.0);  // do_sample false
  EXPECT_EQ(def["sampling"]["top_k"], 7);
  EXPECT_NEAR(def["sampling"]["top_p"].get<double>(), 0.95, 1e-6);  // 7 is out of range: ignored
  const CliOutput greedy_out = pipit_run("-p \"Once upon a time\" -n 24 --temp 0 --json");
  const auto greedy = nlohmann::json::parse(greedy_out.out, nullptr, false);
  ASSERT_TRUE(greedy.is_object()) << greedy_out.out;
  EXPECT_EQ(def["tokens"], greedy["tokens"]);
  const CliOutput set_out = run_dir("--temp 0.9 --top-k 3");
  const auto set = nlohmann::json::parse(set_out.out, nullptr, false);
  ASSERT_TRUE(set.is_object()) << set_out.out;
  EXPECT_NEAR(set["sampling"]["temperature"].get<double>(), 0.9, 1e-6);
  EXPECT_EQ(set["sampling"]["top_k"], 3);
  const CliOutput warn = test::run_cli("run -m " + d.path("") + " -t 1 -p x -n 2", true);
  EXPECT_NE(warn.out.find("generation_config.json: top_p is out of range, ignored"), std::string::npos) << warn.out;
}

// --logit-bias ID-inf bans a token (the greedy answer's first token never appears), +BIAS favours one; bad forms and
// ids outside the vocabulary are one error line.
TEST(CliGeneration, LogitBias) {
  const std::string base = "-p \"Once upon a time\" -n 16 --temp 0 --json";
  const CliOutput plain_out = pipit_run(base);
  const auto plain = nlohmann::json::parse(plain_out.out, nullptr, false);
  ASSERT_TRUE(plain.is_object()) << plain_out.out;
  const int first = plain["tokens"][0].get<int>();
  const auto banned = nlohmann::json::parse(pipit_run(base + " --logit-bias " + std::to_string(first) + "-inf").out);
  for (const auto& t : banned["tokens"]) EXPECT_NE(t.get<int>(), first);
  const auto forced = nlohmann::json::parse(pipit_run(base + " -l 300+100").out);
  for (const auto& t : forced["tokens"]) EXPECT_EQ(t.get<int>(), 300);
  for (const char* bad : {"300", "+5", "x+1", "300+", "300+abc", "300*2"}) {
    const CliOutput r = pipit_run(std::string("-p x -n 2 --logit-bias ") + bad, true);
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_NE(r.out.find("--logit-bias"), std::string::npos) << r.out;
  }
  const CliOutput far = pipit_run("-p x -n 2 --logit-bias 512+1", true);
  EXPECT_NE(far.out.find("token id 512 is not in [0, 512)"), std::string::npos) << far.out;
  const CliOutput big = pipit_run("-p x -n 2 --logit-bias 5+101", true);
  EXPECT_NE(big.out.find("not in [-100, 100]"), std::string::npos) << big.out;
}

TEST(CliGeneration, GrammarAndJsonSchema) {
  const CliOutput yes_no = pipit_run("-p \"Once upon a time\" -n 16 --seed 3 --grammar 'root ::= \"yes\" | \"no\"'");
  ASSERT_EQ(yes_no.code, 0);
  EXPECT_TRUE(yes_no.out == "Once upon a timeyes\n" || yes_no.out == "Once upon a timeno\n") << yes_no.out;
  const CliOutput js = pipit_run("--no-echo -p \"Once upon a time\" -n 64 --seed 4 --json-schema "
                           "'{\"type\": \"object\", \"properties\": {\"mood\": {\"enum\": [\"happy\", \"sad\"]}}, "
                           "\"required\": [\"mood\"], \"additionalProperties\": false}'");
  ASSERT_EQ(js.code, 0);
  const auto j = nlohmann::json::parse(js.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << js.out;
  EXPECT_TRUE(j["mood"] == "happy" || j["mood"] == "sad") << js.out;
  // errors: one line, exit 1
  const CliOutput bad = pipit_run("-p x --grammar 'root ::= ('", true);
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("--grammar"), std::string::npos) << bad.out;
  const CliOutput two = pipit_run("-p x --grammar 'root ::= \"a\"' --json-schema '{}'", true);
  EXPECT_EQ(two.code, 1) << two.out;
  EXPECT_NE(two.out.find("choose one"), std::string::npos) << two.out;
  const CliOutput missing = pipit_run("-p x --json-schema-file /nonexistent/schema.json", true);
  EXPECT_EQ(missing.code, 1) << missing.out;
  EXPECT_NE(missing.out.find("--json-schema-file"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace pipit
