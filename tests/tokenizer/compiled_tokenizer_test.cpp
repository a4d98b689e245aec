// The compiled tokenizer (Tokenizer::compile / load_compiled) read from damaged bytes: every truncation, a wrong
// magic and random byte changes give an error or a working tokenizer, never a crash or a read outside the bytes
// (run under ASan in the sanitizer job). The golden tests (golden_test.cpp) check that an intact one is exact.
#include <gtest/gtest.h>

#include <random>

#include "tests/tokenizer/tok_test_util.h"

namespace pipit::test {
namespace {

std::string stories_compiled() {
  auto c = Tokenizer::compile(read_text(testdata_dir() + "/models/stories260k/tokenizer.json"));
  EXPECT_TRUE(c) << c.status().message();
  return c ? *c : std::string();
}

TEST(CompiledTokenizer, ReadsBackWhatTheTextGives) {
  const std::string c = stories_compiled();
  ASSERT_FALSE(c.empty());
  auto tok = Tokenizer::load_compiled(c, "");
  ASSERT_TRUE(tok) << tok.status().message();
  auto ids = (*tok)->encode("Once upon a time, there was a little dog.", false);
  ASSERT_TRUE(ids);
  auto want = cached_tokenizer(testdata_dir() + "/models/stories260k")->encode(
      "Once upon a time, there was a little dog.", false);
  ASSERT_TRUE(want);
  EXPECT_EQ(*ids, *want);
  EXPECT_EQ((*tok)->vocab_size(), 512);
}

TEST(CompiledTokenizer, RefusesEveryTruncationAndAWrongMagic) {
  const std::string c = stories_compiled();
  ASSERT_GT(c.size(), 64u);
  for (size_t n = 0; n < c.size(); ++n) {
    auto t = Tokenizer::load_compiled(std::string_view(c).substr(0, n), "");
    ASSERT_FALSE(t) << "truncated to " << n << " of " << c.size() << " bytes";
  }
  std::string bad = c;
  bad[7] = '9';
  auto t = Tokenizer::load_compiled(bad, "");
  ASSERT_FALSE(t);
  EXPECT_NE(t.status().message().find("magic"), std::string::npos) << t.status().message();
}

TEST(CompiledTokenizer, DamagedBytesGiveAnErrorOrATokenizer) {
  const std::string c = stories_compiled();
  ASSERT_FALSE(c.empty());
  std::mt19937 rng(7);
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string d = c;
    for (int k = 0; k < 3; ++k) d[8 + rng() % (d.size() - 8)] = char(rng());
    auto t = Tokenizer::load_compiled(d, "");
    if (!t) {
      ++refused;
      continue;
    }
    auto ids = (*t)->encode("Once upon a time", true);  // whatever it holds, it runs
    if (ids) (*t)->decode(*ids, false);
  }
  EXPECT_GT(refused, 0) << "some damage (an offset or id out of range) must be caught";
}

}  // namespace
}  // namespace pipit::test
