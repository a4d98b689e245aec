// Speculative decoding: greedy and seeded sampled output equal plain decoding's on several model families (prompt
// lookup and a draft model, a recurrent state included), guesses are accepted, and sampling keeps the target's
// distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "runtime/generator.h"
#include "runtime/loader.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

GenerateResult gen(Session& s, const std::vector<int32_t>& prompt, int n, const SpecParams& spec = {},
                   const SamplerParams& sampler = {.temperature = 0}) {
  s.reset();
  GenerateParams p;
  p.max_tokens = n;
  p.sampler = sampler;
  p.ignore_eos = true;
  p.spec = spec;
  auto r = generate(s, nullptr, prompt, p);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : GenerateResult{};
}

TEST(Speculative, LookupDraft) {
  const std::vector<int32_t> h = {5, 6, 7, 8, 9, 5, 6, 7, 1, 2, 5, 6};
  // "5 6" last occurred at 5..6, followed by 7 1 2 ...
  EXPECT_EQ(lookup_draft(h, 3, 1, 4), (std::vector<int32_t>{7, 1, 2}));
  EXPECT_EQ(lookup_draft(h, 10, 1, 4), (std::vector<int32_t>{7, 1, 2, 5, 6}));  // up to the end of the history
  EXPECT_TRUE(lookup_draft(std::vector<int32_t>{1, 2, 3}, 4, 1, 4).empty());
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{4, 9, 4}, 2, 1, 4), (std::vector<int32_t>{9, 4}));
}

// A prompt that repeats itself, so that prompt lookup has something to find.
std::vector<int32_t> repetitive_prompt() {
  std::vector<int32_t> p = {1};
  for (int r = 0; r < 3; ++r)
    for (int32_t t : {403, 407, 261, 378, 5, 6, 7, 8, 9, 10, 11}) p.push_back(t);
  return p;
}

TEST(Speculative, GreedyEqualsPlainGreedy) {
  int64_t accepted = 0;
  for (const char* arch : {"stories260k", "qwen3", "gemma3_text", "smollm3", "qwen3_moe", "qwen3_5", "gpt_oss"}) {
    SCOPED_TRACE(arch);
    auto lm = load_model(test::model_dir(arch));
    ASSERT_TRUE(lm.is_ok()) << lm.status().message();
    Model& m = *lm->model;
    Session s(m, SessionOptions{.n_ctx = 256, .n_threads = 2, .n_batch = 16});
    const auto prompt = repetitive_prompt();
    const auto plain = gen(s, prompt, 40);
    for (int k : {1, 3, 8}) {
      const auto spec = gen(s, prompt, 40, SpecParams{.n_draft = k});
      EXPECT_EQ(spec.tokens, plain.tokens) << "lookup, " << k << " guesses";
      EXPECT_EQ(s.n_past(), int(prompt.size() + plain.tokens.size()) - 1);  // rejected guesses are gone
      accepted += spec.spec.accepted;
    }
    // the same model as its own draft: every guess is accepted
    Session ds(m, SessionOptions{.n_ctx = 256, .n_threads = 2, .n_batch = 16});
    Draft d{&ds, {}};
    const auto self = gen(s, prompt, 40, SpecParams{.n_draft = 4, .draft = &d});
    EXPECT_EQ(self.tokens, plain.tokens) << "self draft";
    EXPECT_GT(self.spec.drafted, 20);
    EXPECT_EQ(self.spec.accepted, self.spec.drafted);
  }
  EXPECT_GT(accepted, 0);
}

// A different draft model with the same vocabulary (stories260k for the qwen3_5 test checkpoint, both 512 ids):
// some guesses fail, the answer is the target's.
TEST(Speculative, DraftModelGreedyEqualsPlain) {
  auto target = load_model(test::model_dir("qwen3_5"));
  auto draft = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(target.is_ok() && draft.is_ok());
  ASSERT_EQ(target->model->info().n_vocab, draft->model->info().n_vocab);
  Session s(*target->model, SessionOptions{.n_ctx = 256, .n_threads = 2});
  Session ds(*draft->model, SessionOptions{.n_ctx = 256, .n_threads = 2});
  Draft d{&ds, {}};
  const auto prompt = repetitive_prompt();
  const auto plain = gen(s, prompt, 30);
  const auto spec = gen(s, prompt, 30, SpecParams{.n_draft = 3, .draft = &d});
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.spec.drafted, 0);
  EXPECT_LT(spec.spec.accepted, spec.spec.drafted);
}

// Seeded sampling: the same tokens with guesses as without, for every seed, with top-k or the whole vocabulary,
// prompt lookup or a draft model, on a model with a KV cache and one with a recurrent state (Qwen3.5: rewound to a
// snapshot after each rejection). Before the one verification rule, generate() used rejection sampling with a
// sampled draft and gave other text than plain decoding for the same seed.
TEST(Speculative, SeededSamplingEqualsPlain) {
  auto draft = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(draft.is_ok());
  int64_t accepted = 0, differ = 0;
  for (const char* arch : {"stories260k", "qwen3_5"}) {
    SCOPED_TRACE(arch);
    auto lm = load_model(test::model_dir(arch));
    ASSERT_TRUE(lm.is_ok()) << lm.status().message();
    Session s(*lm->model, SessionOptions{.n_ctx = 256, .n_threads = 2, .n_batch = 16});
    Session ds(*draft->model, SessionOptions{.n_ctx = 256, .n_threads = 2, .n_batch = 16});
    Draft d{&ds, {}};
    const auto prompt = repetitive_prompt();
    std::vector<int32_t> first;
    for (uint64_t seed = 1; seed <= 6; ++seed)
      for (int top_k : {0, 40}) {
        const SamplerParams sp{.temperature = 0.8f, .top_k = top_k, .top_p = 0.95f, .min_p = 0.0f, .seed = seed};
        const auto plain = gen(s, prompt, 32, {}, sp);
        const auto lookup = gen(s, prompt, 32, SpecParams{.n_draft = 4}, sp);
        const auto model = gen(s, prompt, 32, SpecParams{.n_draft = 3, .draft = &d}, sp);
        EXPECT_EQ(lookup.tokens, plain.tokens) << "lookup, seed " << seed << ", top_k " << top_k;
        EXPECT_EQ(model.tokens, plain.tokens) << "draft model, seed " << seed << ", top_k " << top_k;
        accepted += lookup.spec.accepted + model.spec.accepted;
        if (first.empty()) first = plain.tokens;
        differ += plain.tokens != first;  // the seeds do change the answer (the test compares something)
      }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(differ, 0);
}

// Sampling: the second generated token (the first that can come from a verified guess) has the same distribution
// with and without guesses (few outcomes, so that 3000 draws each estimate it well).
TEST(Speculative, SamplingKeepsTheTargetDistribution) {
  auto lm = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(lm.is_ok());
  Model& m = *lm->model;
  Session s(m, SessionOptions{.n_ctx = 512, .n_threads = 1});
  // a draft model: the target itself in a session of its own, whose greedy guesses the target's sampling at
  // temperature 1 often picks and often does not (a different random model's guesses are almost never picked)
  Session ds(m, SessionOptions{.n_ctx = 512, .n_threads = 1});
  Draft d{&ds, {}};
  // the context: the model's own greedy continuation of a prompt, in which prompt lookup finds guesses the model
  // often likes (and often does not, at temperature 3)
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  {
    GenerateParams g;
    g.max_tokens = 150;
    g.sampler.temperature = 0;
    g.ignore_eos = true;
    auto r = generate(s, nullptr, prompt, g);
    ASSERT_TRUE(r.is_ok());
    prompt.insert(prompt.end(), r->tokens.begin(), r->tokens.end());
    s.reset();
  }
  ASSERT_TRUE(s.eval(std::span<const int32_t>(prompt.data(), prompt.size() - 1)).is_ok());
  const int base = s.n_past();
  const std::span<const int32_t> ctx(prompt.data(), prompt.size() - 1);
  // top-k 4: four outcomes; no top-k (the draft's and the target's supports overlap): outcomes bucketed by id % 8
  const SamplerParams top4{.temperature = 3.0f, .top_k = 4, .top_p = 1.0f, .min_p = 0};
  const SamplerParams all{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0};
  auto histogram = [&](SpecParams sp, const SamplerParams& sampler, SpecStats* st) {
    std::map<int32_t, double> h;
    const int N = 3000;
    for (int i = 0; i < N; ++i) {
      s.truncate(base);
      GenerateParams p;
      p.max_tokens = 3;  // one guess at the second token (a third would be wasted)
      p.ignore_eos = true;
      p.sampler = sampler;
      p.sampler.seed = uint64_t(i);
      sp.context = ctx;
      p.spec = sp;
      auto r = generate(s, nullptr, std::vector<int32_t>{prompt.back()}, p);
      EXPECT_TRUE(r.is_ok());
      h[sampler.top_k > 0 ? r->tokens.at(1) : r->tokens.at(1) % 8] += 1.0 / N;
      st->drafted += r->spec.drafted;
      st->accepted += r->spec.accepted;
    }
    return h;
  };
  SpecStats none, lookup, model;
  const auto plain = histogram({}, top4, &none);
  const auto a = histogram(SpecParams{.n_draft = 1}, top4, &lookup);
  const auto plain_all = histogram({}, all, &none);
  const auto b = histogram(SpecParams{.n_draft = 1, .draft = &d}, all, &model);
  auto tv = [](const std::map<int32_t, double>& x, const std::map<int32_t, double>& y) {
    std::map<int32_t, double> all = x;
    for (auto& [k, v] : y) all[k] += 0;
    double t = 0;
    for (auto& [k, v] : all) t += std::abs((x.count(k) ? x.at(k) : 0) - (y.count(k) ? y.at(k) : 0));
    return t / 2;
  };
  EXPECT_LT(tv(plain, a), 0.05);
  EXPECT_LT(tv(plain_all, b), 0.05);
  // both outcomes of the check happened, often, for both sources of guesses
  EXPECT_GT(lookup.drafted, 2000);
  EXPECT_GT(lookup.accepted, 300);
  EXPECT_LT(lookup.accepted, lookup.drafted - 300);
  EXPECT_EQ(model.drafted, 3000);
  EXPECT_GT(model.accepted, 100);
  EXPECT_LT(model.accepted, model.drafted);  // (2935 of 3000: the model is sure of itself at that position)
}

}  // namespace
}  // namespace pipit
