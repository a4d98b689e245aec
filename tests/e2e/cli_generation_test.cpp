// `pipit run` on the one generation path: seeded sampling with --lookup or --draft prints exactly the text of plain
// decoding; --grammar / --json-schema constrain the answer; bad grammars are one error line.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_run_util.h"
#include "tests/test_util.h"

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
