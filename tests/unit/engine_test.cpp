// Engine (continuous batching): requests served together give exactly the tokens each gives alone.
#include <gtest/gtest.h>

#include <future>

#include "runtime/engine.h"
#include "runtime/loader.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

std::vector<int32_t> solo(Model& m, const std::vector<int32_t>& prompt, int n) {
  Session s(m, SessionOptions{.n_ctx = 256, .n_threads = 2});
  GenerateParams p;
  p.max_tokens = n;
  p.sampler.temperature = 0;
  p.ignore_eos = true;
  auto r = generate(s, nullptr, prompt, p);
  EXPECT_TRUE(r.is_ok());
  return r->tokens;
}

TEST(Engine, ConcurrentGreedyEqualsSolo) {
  for (const char* arch : {"stories260k", "qwen3", "gemma3_text", "smollm3", "qwen3_moe"}) {
    auto lm = load_model(test::model_dir(arch));
    ASSERT_TRUE(lm.is_ok()) << lm.status().message();
    Model& m = *lm->model;
    std::vector<std::vector<int32_t>> prompts = {{1, 403, 407, 261, 378}, {1, 300}, {1, 5, 6, 7, 8, 9, 10, 11, 12, 13},
                                                 {1, 20, 30}, {1, 100, 200, 300, 400}, {1, 42}};
    Engine eng(m, nullptr, EngineOptions{.n_slots = 4, .n_ctx = 256, .n_batch = 7, .n_threads = 2});
    std::vector<std::promise<GenerateResult>> done(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest r;
      r.prompt = prompts[i];
      r.params.max_tokens = 20 + int(i);
      r.params.sampler.temperature = 0;
      r.params.ignore_eos = true;
      r.on_done = [&done, i](const Result<GenerateResult>& res) { done[i].set_value(*res); };
      ASSERT_TRUE(eng.submit(std::move(r)).is_ok());
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto got = done[i].get_future().get();
      EXPECT_EQ(got.tokens, solo(m, prompts[i], 20 + int(i))) << arch << " request " << i;
    }
  }
}

TEST(Engine, RejectsOversizedPromptAndFullQueue) {
  auto lm = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(lm.is_ok());
  Engine eng(*lm->model, nullptr, EngineOptions{.n_slots = 1, .n_ctx = 16, .n_threads = 1, .max_queue = 1});
  EngineRequest big;
  big.prompt.assign(16, 5);
  auto r = eng.submit(std::move(big));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Code::kOutOfRange);
}

TEST(Engine, CancelFreesSlot) {
  auto lm = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(lm.is_ok());
  Engine eng(*lm->model, nullptr, EngineOptions{.n_slots = 1, .n_ctx = 128, .n_threads = 1});
  std::promise<StopReason> first;
  EngineRequest a;
  a.prompt = {1, 403};
  a.params.max_tokens = 100;
  a.params.ignore_eos = true;
  int seen = 0;
  a.on_token = [&seen](const std::string&, int32_t) { return ++seen < 3; };  // cancel after 3 tokens
  a.on_done = [&first](const Result<GenerateResult>& r) { first.set_value(r->reason); };
  ASSERT_TRUE(eng.submit(std::move(a)).is_ok());
  EXPECT_EQ(first.get_future().get(), StopReason::kCallback);
  std::promise<size_t> second;
  EngineRequest b;
  b.prompt = {1, 403};
  b.params.max_tokens = 5;
  b.params.ignore_eos = true;
  b.on_done = [&second](const Result<GenerateResult>& r) { second.set_value(r->tokens.size()); };
  ASSERT_TRUE(eng.submit(std::move(b)).is_ok());
  EXPECT_EQ(second.get_future().get(), 5u);
}

}  // namespace
}  // namespace pipit
