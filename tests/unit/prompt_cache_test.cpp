// The Engine's prompt cache: a request sharing a prefix with a finished one evaluates only its suffix (counted by
// the engine's own forward passes) and gives the tokens a cold run gives; rings and recurrent states reuse only what
// they can; least recently used entries are evicted under a small budget. Also: a conversation that outgrows the
// context ends with StopReason::kContext ("length") after the same tokens as the Session path.
#include <gtest/gtest.h>

#include <future>

#include "runtime/engine.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

std::vector<int32_t> solo(Model& m, const std::vector<int32_t>& prompt, int n, StopReason* why = nullptr,
                          int n_ctx = 256) {
  Session s(m, SessionOptions{.n_ctx = n_ctx, .n_threads = 2, .n_batch = 7});
  GenerateParams p;
  p.max_tokens = n;
  p.sampler.temperature = 0;
  p.ignore_eos = true;
  auto r = generate(s, nullptr, prompt, p);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (why) *why = r->reason;
  return r->tokens;
}

GenerateResult run(Engine& eng, const std::vector<int32_t>& prompt, int n) {
  std::promise<GenerateResult> done;
  EngineRequest r;
  r.prompt = prompt;
  r.params.max_tokens = n;
  r.params.sampler.temperature = 0;
  r.params.ignore_eos = true;
  r.on_done = [&done](const Result<GenerateResult>& res) {
    EXPECT_TRUE(res.is_ok()) << res.status().message();
    done.set_value(res.is_ok() ? *res : GenerateResult{});
  };
  EXPECT_TRUE(eng.submit(std::move(r)).is_ok());
  return done.get_future().get();
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(PromptCache, SecondTurnPrefillsOnlyTheSuffix) {
  // qwen3_5: recurrent state (reused up to a snapshot); gemma3_text: sliding window 8 in rings of 8 + 7 rows
  for (const char* arch : {"stories260k", "qwen3", "gemma3_text", "qwen3_5"}) {
    SCOPED_TRACE(arch);
    auto lm = load_model(test::model_dir(arch));
    ASSERT_TRUE(lm.is_ok()) << lm.status().message();
    Model& m = *lm->model;
    Engine eng(m, nullptr,
               EngineOptions{.n_slots = 2, .n_ctx = 256, .n_batch = 7, .n_threads = 2, .cache_bytes = 64 << 20});
    const std::vector<int32_t> p1 = {1, 403, 407, 261, 378, 5, 6, 7, 8, 9, 10, 11, 12, 13, 20, 30, 40, 50, 60, 70};
    auto a = run(eng, p1, 12);
    EXPECT_EQ(a.n_cached, 0);
    EXPECT_EQ(a.n_prefilled, 20);
    EXPECT_EQ(a.tokens, solo(m, p1, 12));
    // the next turn: the conversation so far (A's 11 fed answer tokens, and its last) plus new text
    const auto p2 = concat(concat(p1, a.tokens), {100, 200, 300});
    auto b = run(eng, p2, 10);
    EXPECT_EQ(b.n_cached, 31);  // 20 prompt + 11 answer tokens in the slot: everywhere (ring: min_rewind(31) = 23)
    EXPECT_EQ(b.n_prefilled, int(p2.size()) - 31);
    EXPECT_EQ(b.tokens, solo(m, p2, 10));
    // a prompt that shares only 15 tokens: full-context layers reuse them; the ring no longer holds position 15's
    // window, and the recurrent state has no snapshot at or before 15: both evaluate everything
    const auto p3 = concat(std::vector<int32_t>(p1.begin(), p1.begin() + 15), {77, 88, 99});
    auto c = run(eng, p3, 8);
    const bool partial = std::string(arch) == "stories260k" || std::string(arch) == "qwen3";
    EXPECT_EQ(c.n_cached, partial ? 15 : 0);
    EXPECT_EQ(c.n_prefilled, int(p3.size()) - c.n_cached);
    EXPECT_EQ(c.tokens, solo(m, p3, 8));
    // the very same prompt again: all but its last token come from the cache, except where B's entry (44
    // positions) cannot go back to 34: the ring holds only its last 15 rows, and the recurrent state goes back to
    // A's snapshot at 31
    auto d = run(eng, p2, 10);
    const int want_d = arch == std::string("qwen3_5") ? int(p2.size()) - 31
                       : arch == std::string("gemma3_text") ? int(p2.size()) : 1;
    EXPECT_EQ(d.n_prefilled, want_d);
    EXPECT_EQ(d.tokens, b.tokens);
    const Engine::Stats st = eng.stats();
    EXPECT_EQ(st.prompt_tokens_cached, uint64_t(b.n_cached + c.n_cached + d.n_cached));
    EXPECT_EQ(st.prompt_tokens_evaluated, uint64_t(a.n_prefilled + b.n_prefilled + c.n_prefilled + d.n_prefilled));
  }
}

TEST(PromptCache, EvictsLeastRecentlyUsedUnderABudget) {
  auto lm = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(lm.is_ok());
  Model& m = *lm->model;
  const std::vector<int32_t> pa = {1, 403, 407, 261, 378, 5, 6, 7, 8, 9}, pb = {2, 300, 301, 302, 303, 5, 6, 7, 8, 9};
  size_t one = 0;  // bytes of one entry (10 prompt + 4 fed tokens)
  {
    Engine eng(m, nullptr, EngineOptions{.n_slots = 1, .n_ctx = 64, .n_threads = 1, .cache_bytes = 64 << 20});
    run(eng, pa, 5);
    one = eng.cache_stats().bytes;
    ASSERT_GT(one, 0u);
  }
  Engine eng(m, nullptr, EngineOptions{.n_slots = 1, .n_ctx = 64, .n_threads = 1, .cache_bytes = one + one / 2});
  const auto a1 = run(eng, pa, 5);
  const auto b1 = run(eng, pb, 5);  // stored: A is evicted to fit
  EXPECT_EQ(eng.cache_stats().evictions, 1u);
  EXPECT_EQ(eng.cache_stats().entries, 1u);
  const auto b2 = run(eng, pb, 5);
  EXPECT_EQ(b2.n_cached, 9);
  EXPECT_EQ(b2.tokens, b1.tokens);
  const auto a2 = run(eng, pa, 5);
  EXPECT_EQ(a2.n_cached, 0);  // evicted
  EXPECT_EQ(a2.tokens, a1.tokens);
  // an entry larger than the whole budget is not stored
  Engine tiny(m, nullptr, EngineOptions{.n_slots = 1, .n_ctx = 64, .n_threads = 1, .cache_bytes = one / 2});
  run(tiny, pa, 5);
  EXPECT_EQ(tiny.cache_stats().entries, 0u);
  EXPECT_EQ(run(tiny, pa, 5).n_cached, 0);
}

TEST(PromptCache, ImagesAreHashedIntoTheKey) {
  MultimodalPrompt x, y;
  x.tokens = y.tokens = {1, 9, 9, 2};
  std::vector<float> fx = {1, 2, 3, 4}, fy = {1, 2, 3, 5};
  x.embd = Tensor::from_data(DType::F32, {2, 2}, fx.data(), nullptr);
  y.embd = Tensor::from_data(DType::F32, {2, 2}, fy.data(), nullptr);
  x.embd_row = y.embd_row = {-1, 0, 1, -1};
  const auto kx = PromptCache::make_key(x.tokens, &x), ky = PromptCache::make_key(y.tokens, &y);
  EXPECT_EQ(kx[0], 1u);
  EXPECT_EQ(kx[1], ky[1]);  // the same first feature row
  EXPECT_NE(kx[2], ky[2]);  // a different second one
  EXPECT_NE(kx[1], PromptCache::make_key(x.tokens, nullptr)[1]);  // an image row is not its placeholder token
}

// The context fills: both paths generate n_ctx - n_prompt + 1 tokens (the last one needs no KV row) and say
// kContext, which the server and the C API report as finish_reason "length".
TEST(Engine, ContextFullEndsWithLength) {
  auto lm = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(lm.is_ok());
  Model& m = *lm->model;
  const std::vector<int32_t> p = {1, 403, 407, 261, 378, 5, 6, 7, 8, 9};
  Engine eng(m, nullptr, EngineOptions{.n_slots = 1, .n_ctx = 16, .n_threads = 1});
  auto r = run(eng, p, 100);
  EXPECT_EQ(r.reason, StopReason::kContext);
  EXPECT_STREQ(stop_reason_name(r.reason), "length");
  EXPECT_EQ(r.tokens.size(), 16u - p.size() + 1);
  StopReason why{};
  EXPECT_EQ(r.tokens, solo(m, p, 100, &why, 16));
  EXPECT_EQ(why, StopReason::kContext);
}

}  // namespace
}  // namespace pipit
