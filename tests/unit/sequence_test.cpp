// Sequence (runtime/sequence.h), the token path every front end shares: HF's no_repeat_ngram_size, against a
// direct reading of HF's NoRepeatNGramLogitsProcessor and on a real model's greedy text.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "runtime/generator.h"
#include "runtime/loader.h"
#include "runtime/sequence.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

// HF's _get_ngrams + _get_generated_ngrams, written as a set of n-grams: the banned tokens are the last tokens of
// the n-grams whose first n - 1 tokens are h's last n - 1.
std::set<int32_t> hf_banned(const std::vector<int32_t>& h, int n) {
  std::set<int32_t> out;
  if (n <= 0 || int(h.size()) + 1 < n) return out;
  const std::vector<int32_t> tail(h.end() - (n - 1), h.end());
  for (size_t i = 0; i + size_t(n) <= h.size(); ++i)
    if (std::vector<int32_t>(h.begin() + long(i), h.begin() + long(i) + n - 1) == tail) out.insert(h[i + size_t(n) - 1]);
  return out;
}

TEST(Sequence, RepeatedNgramEndsAsHf) {
  std::vector<int32_t> out;
  repeated_ngram_ends(std::vector<int32_t>{1, 2, 3, 1, 2}, 3, out);
  EXPECT_EQ(std::set<int32_t>(out.begin(), out.end()), (std::set<int32_t>{3}));  // "1 2" was followed by 3
  repeated_ngram_ends(std::vector<int32_t>{1, 2, 3, 1, 2}, 1, out);  // n = 1: every token seen
  EXPECT_EQ(std::set<int32_t>(out.begin(), out.end()), (std::set<int32_t>{1, 2, 3}));
  repeated_ngram_ends(std::vector<int32_t>{1, 2}, 4, out);  // shorter than n - 1: nothing
  EXPECT_TRUE(out.empty());
  repeated_ngram_ends(std::vector<int32_t>{5, 5, 5}, 0, out);  // off
  EXPECT_TRUE(out.empty());
  // random short sequences over a small alphabet (many repeats) against the reading of HF's code
  uint64_t x = 88172645463325252ull;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> h(size_t(trial % 40));
    for (auto& t : h) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      t = int32_t(x % 4);
    }
    const int n = 1 + trial % 5;
    repeated_ngram_ends(h, n, out);
    ASSERT_EQ(std::set<int32_t>(out.begin(), out.end()), hf_banned(h, n)) << "trial " << trial << " n " << n;
  }
}

// Greedy stories260k repeats itself quickly; with no_repeat_ngram_size 3 no trigram of prompt + answer occurs
// twice, and the answer differs from the plain one (the rule did something).
TEST(Sequence, NoRepeatNgramOnGreedyText) {
  auto lm = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(lm.is_ok());
  Session s(*lm->model, SessionOptions{.n_ctx = 512, .n_threads = 2});
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  GenerateParams p;
  p.max_tokens = 200;
  p.sampler.temperature = 0;
  p.ignore_eos = true;
  EXPECT_EQ(lm->model->info().no_repeat_ngram_size, 0);  // stories260k's default: off
  auto plain = generate(s, nullptr, prompt, p);
  ASSERT_TRUE(plain.is_ok());
  s.reset();
  p.no_repeat_ngram_size = 3;
  auto norep = generate(s, nullptr, prompt, p);
  ASSERT_TRUE(norep.is_ok());
  EXPECT_NE(norep->tokens, plain->tokens);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), norep->tokens.begin(), norep->tokens.end());
  std::set<std::vector<int32_t>> seen;
  for (size_t i = 0; i + 3 <= all.size(); ++i)
    EXPECT_TRUE(seen.insert(std::vector<int32_t>(all.begin() + long(i), all.begin() + long(i) + 3)).second)
        << "trigram at " << i << " repeats";
  // the plain greedy answer does repeat trigrams (so the check above is not vacuous)
  all = prompt;
  all.insert(all.end(), plain->tokens.begin(), plain->tokens.end());
  seen.clear();
  bool repeats = false;
  for (size_t i = 0; i + 3 <= all.size(); ++i)
    repeats |= !seen.insert(std::vector<int32_t>(all.begin() + long(i), all.begin() + long(i) + 3)).second;
  EXPECT_TRUE(repeats);
}

}  // namespace
}  // namespace pipit
