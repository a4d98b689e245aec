// `pipit run --mtp` (the model's own MTP head as the speculative draft): greedy and seeded text equals plain
// decoding's, the stats line says guesses were made; `pipit chat --mtp` too; a model without the head is one error.
#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/cli_run_util.h"
#include "tests/mtp_fixture.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

TEST(CliMtp, TextEqualsPlain) {
  test::MtpModelDir dir;
  const std::string run = "run -m " + dir.path() + " -t 2 --kv-type f32 --no-template -p \"Once upon a time\" -n 40 ";
  for (const char* sampling : {"--temp 0", "--temp 0.8 --seed 5"}) {
    SCOPED_TRACE(sampling);
    const test::RunResult plain = test::run_cli(run + sampling, false);
    ASSERT_EQ(plain.code, 0) << plain.out;
    for (const char* k : {"1", "3"}) {
      const test::RunResult mtp = test::run_cli(run + sampling + " --mtp --mtp-n " + k, false);
      EXPECT_EQ(mtp.code, 0);
      EXPECT_EQ(mtp.out, plain.out) << "--mtp-n " << k;
    }
    const test::RunResult stats = test::run_cli(run + sampling + " --mtp", true);
    EXPECT_NE(stats.out.find("speculative (MTP head)"), std::string::npos) << stats.out;
  }
  // chat: two turns from stdin
  const std::string chat = "chat -m " + dir.path() + " -t 2 --kv-type f32 -n 16 --temp 0 ";
  const test::RunResult c_plain = test::run_sh("printf 'a cat\\nthe dog\\n' | " + test::pipit_binary() + " " + chat, false);
  const test::RunResult c_mtp = test::run_sh("printf 'a cat\\nthe dog\\n' | " + test::pipit_binary() + " " + chat + "--mtp",
                                             false);
  ASSERT_EQ(c_plain.code, 0) << c_plain.out;
  EXPECT_EQ(c_mtp.out, c_plain.out);
}

TEST(CliMtp, Refused) {
  const test::RunResult no_head = test::run_cli("run -m " + test::model_dir("stories260k") + " -p x -n 4 --mtp");
  EXPECT_EQ(no_head.code, 1) << no_head.out;
  EXPECT_NE(no_head.out.find("--mtp"), std::string::npos) << no_head.out;
  EXPECT_NE(no_head.out.find("no multi-token-prediction head"), std::string::npos) << no_head.out;
  test::MtpModelDir dir;
  const test::RunResult both = test::run_cli("run -m " + dir.path() + " -p x -n 4 --mtp --lookup");
  EXPECT_EQ(both.code, 1) << both.out;
  EXPECT_NE(both.out.find("choose one"), std::string::npos) << both.out;
}

}  // namespace
}  // namespace pipit
