// Engine (continuous batching): requests served together give exactly the tokens each gives alone.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <new>
#include <stdexcept>
#include <thread>

#include "runtime/engine.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
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

// The speculative tests' requests: one per prompt, greedy (temperature 0) or seeded (request i: seed 7 + i, top-k
// 20), n_draft guesses per step except for the third request (none: batches mix requests with and without guesses).
std::vector<GenerateResult> run_requests(Engine& eng, const std::vector<std::vector<int32_t>>& prompts, int max_tokens,
                                         float temperature, int n_draft) {
  std::vector<std::promise<GenerateResult>> done(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.prompt = prompts[i];
    r.params.max_tokens = max_tokens;
    r.params.sampler.temperature = temperature;
    r.params.sampler.top_k = 20;
    r.params.sampler.seed = 7 + i;
    r.params.ignore_eos = true;
    r.params.spec.n_draft = i == 2 ? 0 : n_draft;
    r.on_done = [&done, i](const Result<GenerateResult>& res) {
      EXPECT_TRUE(res.is_ok()) << res.status().message();
      done[i].set_value(res.is_ok() ? *res : GenerateResult{});
    };
    EXPECT_TRUE(eng.submit(std::move(r)).is_ok());
  }
  std::vector<GenerateResult> out;
  for (auto& d : done) out.push_back(d.get_future().get());
  return out;
}

TEST(Engine, ConcurrentGreedyEqualsSolo) {
  for (const char* arch : {"stories260k", "qwen3", "gemma3_text", "smollm3", "qwen3_moe", "minicpm",
                           "deepseek_ocr_lm", "qwen3_5", "gpt_oss", "gpt_oss_mxfp4"}) {
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

// Issue 14, parallel model execution: an image request arrives while 3 streams decode. Its image is encoded on the
// engine's encode pool while the streams keep stepping (on the threads left), and its prompt is prefilled in
// chunks between their steps; every stream's tokens and the image request's tokens equal their solo runs.
TEST(Engine, ImageRequestWhileStreamsDecode) {
  for (auto [arch, image] : {std::pair{"qwen2_vl", "img_100x75"}, {"qwen2_5_vl", "img_100x75"},
                              {"qwen3_vl", "img_150x90"}}) {
    auto lm = load_model(test::model_dir(arch));
    ASSERT_TRUE(lm.is_ok()) << lm.status().message();
    Model& m = *lm->model;
    auto pp = preprocessor_config_of(*lm);
    ASSERT_TRUE(pp.is_ok());
    auto proc = image_processor_for(m, *pp);
    ASSERT_TRUE(proc.is_ok()) << proc.status().message();
    auto img = load_image(test::model_dir(arch) + "/" + image + ".png");
    ASSERT_TRUE(img.is_ok()) << img.status().message();
    std::vector<int32_t> ids = {1, 5, 6, 7};
    for (int32_t t : image_placeholder_tokens(m)) ids.push_back(t);
    for (int32_t t : {8, 9, 10}) ids.push_back(t);
    const std::vector<std::vector<int32_t>> prompts = {{1, 403, 407, 261, 378}, {1, 300}, {1, 5, 6, 7, 8, 9, 10}};
    constexpr int kStream = 48, kImage = 12, kChunk = 4;

    // solo: the streams one at a time on a Session; the image request on a Session with its own pool
    std::vector<std::vector<int32_t>> want;
    for (auto& p : prompts) want.push_back(solo(m, p, kStream));
    std::vector<int32_t> want_image;
    {
      Session s(m, SessionOptions{.n_ctx = 256, .n_threads = 2});
      auto e = encode_image(m, *proc, *img, s.pool());
      ASSERT_TRUE(e.is_ok()) << e.status().message();
      auto mm = build_multimodal_prompt(m, ids, {*e});
      ASSERT_TRUE(mm.is_ok()) << mm.status().message();
      GenerateParams gp;
      gp.max_tokens = kImage;
      gp.sampler.temperature = 0;
      gp.ignore_eos = true;
      auto r = generate(s, nullptr, *mm, gp);
      ASSERT_TRUE(r.is_ok()) << r.status().message();
      want_image = r->tokens;
    }

    std::array<std::atomic<int>, 3> emitted{};
    // Stream 0's callback holds the engine thread once it has `allow` tokens: the test decides how far the streams
    // get before and during the encode, whatever the machine's speed.
    std::atomic<int> allow{5};
    std::atomic<int> image_first_at{-1};  // stream 0's token count when the image request's first token came
    std::vector<std::promise<GenerateResult>> done(prompts.size() + 1);
    struct OnExit {  // a failed ASSERT returns early: let the engine thread go before ~Engine joins it
      std::function<void()> f;
      ~OnExit() { f(); }
    };
    Engine eng(m, nullptr, EngineOptions{.n_slots = 4, .n_ctx = 256, .n_batch = 64, .n_threads = 2,
                                         .n_prefill_chunk = kChunk});
    OnExit release{[&] { allow = 1 << 30; }};
    ASSERT_EQ(eng.n_encode_threads(), 1);  // half of 2
    auto request = [&](std::vector<int32_t> prompt, int n, size_t i) {
      EngineRequest r;
      r.prompt = std::move(prompt);
      r.params.max_tokens = n;
      r.params.sampler.temperature = 0;
      r.params.ignore_eos = true;
      r.on_token = [&, i](const std::string&, int32_t) {
        if (i < prompts.size()) {
          ++emitted[i];
          // (once all three decode: a stream admitted a step later must not be held behind stream 0)
          while (i == 0 && emitted[1] > 0 && emitted[2] > 0 && emitted[0] >= allow.load())
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        } else if (image_first_at.load() < 0) image_first_at = emitted[0].load();
        return true;
      };
      r.on_done = [&done, i](const Result<GenerateResult>& res) {
        EXPECT_TRUE(res.is_ok()) << res.status().message();
        done[i].set_value(res.is_ok() ? *res : GenerateResult{});
      };
      return r;
    };
    // A gate request holds the engine thread (in its first token's callback) while the three streams are submitted,
    // so that the engine admits them together: otherwise, on a loaded machine, this thread could lose the CPU between
    // two submits while stream 0 ran alone (unheld until the others decode) to the end of its tokens.
    std::atomic<bool> gate_open{false}, gate_waiting{false};
    {
      EngineRequest g;
      g.prompt = {1, 2};
      g.params.max_tokens = 2;
      g.params.sampler.temperature = 0;
      g.params.ignore_eos = true;
      g.on_token = [&](const std::string&, int32_t) {
        gate_waiting = true;
        while (!gate_open.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
        return true;
      };
      ASSERT_TRUE(eng.submit(std::move(g)).is_ok());
    }
    OnExit open_gate{[&] { gate_open = true; }};
    while (!gate_waiting.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    for (size_t i = 0; i < prompts.size(); ++i) ASSERT_TRUE(eng.submit(request(prompts[i], kStream, i)).is_ok());
    gate_open = true;
    auto wait_for = [&](auto pred) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!pred() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return pred();
    };
    ASSERT_TRUE(wait_for([&] { return emitted[0] >= 5 && emitted[1] > 0 && emitted[2] > 0; }));
    // The streams must go on while an encode holds the encode pool: wait inside it for them to advance (an engine
    // that stopped for the encode would never get there).
    auto e = eng.encode([&](ThreadPool& pool) {
      EXPECT_EQ(pool.size(), 1);
      const int at = emitted[0];
      allow = at + 3;
      EXPECT_TRUE(wait_for([&] { return emitted[0] >= at + 3; })) << arch << ": the streams stopped";
      return encode_image(m, *proc, *img, pool);
    });
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    auto mm = build_multimodal_prompt(m, ids, {*e});
    ASSERT_TRUE(mm.is_ok()) << mm.status().message();
    const int64_t n_prompt = int64_t(mm->tokens.size());
    ASSERT_GT(n_prompt, 3 * kChunk) << arch;  // several chunks
    EngineRequest ir = request(mm->tokens, kImage, prompts.size());
    ir.images = std::make_shared<const MultimodalPrompt>(std::move(mm).value());
    const int at_submit = emitted[0];
    ASSERT_LT(at_submit + n_prompt / kChunk, kStream) << arch << ": stream 0 would end before the image prefill";
    ASSERT_TRUE(eng.submit(std::move(ir)).is_ok());
    allow = 1 << 30;
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(done[i].get_future().get().tokens, want[i]) << arch << " stream " << i;
    EXPECT_EQ(done.back().get_future().get().tokens, want_image) << arch << " image request";
    // chunked prefill: stream 0 got a token at every chunk of the image prompt but the last (which also gives the
    // image request's first token)
    EXPECT_GE(image_first_at.load() - at_submit, (n_prompt + kChunk - 1) / kChunk - 1) << arch;
  }
}

// Speculative decoding by prompt lookup in the Engine: the guesses ride along in the batch with other requests;
// greedy and seeded sampling give exactly the tokens of the same requests without it, while guesses are accepted.
// A recurrent model (qwen3_5) speculates too: its state goes back to the snapshot before a rejected guess.
TEST(Engine, LookupSpeculationEqualsPlain) {
  for (const char* arch : {"stories260k", "qwen3", "gemma3_text", "gpt_oss", "qwen3_5"}) {
    auto lm = load_model(test::model_dir(arch));
    ASSERT_TRUE(lm.is_ok()) << lm.status().message();
    Model& m = *lm->model;
    // repetitive prompts: the lookup finds the context's last n-gram earlier on
    const std::vector<std::vector<int32_t>> prompts = {
        {1, 5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 9, 10, 5, 6, 7}, {1, 300, 301, 302, 300, 301, 302, 300}, {1, 42, 43}};
    auto run = [&](int n_draft, float temperature) {
      Engine eng(m, nullptr, EngineOptions{.n_slots = 4, .n_ctx = 128, .n_batch = 16, .n_threads = 2});
      const std::vector<GenerateResult> out = run_requests(eng, prompts, 40, temperature, n_draft);
      const Engine::Stats st = eng.stats();
      int64_t drafted = 0, accepted = 0;
      for (auto& r : out) drafted += r.spec.drafted, accepted += r.spec.accepted;
      EXPECT_EQ(uint64_t(drafted), st.spec_drafted);
      EXPECT_EQ(uint64_t(accepted), st.spec_accepted);
      return out;
    };
    for (float temperature : {0.0f, 1.0f}) {
      const auto plain = run(0, temperature), spec = run(8, temperature);
      int64_t drafted = 0, accepted = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(spec[i].tokens, plain[i].tokens) << arch << " T " << temperature << " request " << i;
        EXPECT_EQ(plain[i].spec.drafted, 0);
        drafted += spec[i].spec.drafted, accepted += spec[i].spec.accepted;
      }
      EXPECT_EQ(spec[2].spec.drafted, 0);
      if (temperature == 0) {
        for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(plain[i].tokens, solo(m, prompts[i], 40)) << arch;
      }
      EXPECT_GT(drafted, 0) << arch << " T " << temperature;
      if (temperature == 0) {
        EXPECT_GT(accepted, 0) << arch;
      }
      std::printf("%s T %.0f: %lld guesses, %lld accepted\n", arch, temperature, (long long)drafted,
                  (long long)accepted);
    }
  }
}

// Speculative decoding with a draft model (EngineOptions::draft): the draft's slots follow each request's accepted
// tokens (a prompt longer than a pass, mixed batches, a request without guesses); greedy and seeded sampling give
// exactly the plain tokens. The target as its own draft must have every greedy guess accepted (a draft slot that
// lost track of its request would guess wrong); a different model of the same vocabulary has some rejected (a
// recurrent target rewinds its state then). A recurrent draft is refused.
TEST(Engine, DraftSpeculationEqualsPlain) {
  struct Pair {
    const char *target, *draft;
  };
  for (Pair pair : {Pair{"stories260k", "llama"}, Pair{"llama", "stories260k"}, Pair{"qwen3", "qwen3"},
                    Pair{"gemma3_text", "gemma3_text"}, Pair{"gpt_oss", "gpt_oss"}, Pair{"qwen3_5", "stories260k"}}) {
    SCOPED_TRACE(std::string(pair.target) + " drafted by " + pair.draft);
    auto lm = load_model(test::model_dir(pair.target));
    auto dm = load_model(test::model_dir(pair.draft));
    ASSERT_TRUE(lm.is_ok() && dm.is_ok());
    Model& m = *lm->model;
    ASSERT_TRUE(Engine::check_draft(m, *dm->model).is_ok());
    std::vector<int32_t> longer = {1};
    for (int i = 0; i < 40; ++i) longer.push_back(int32_t(3 + (i * 37) % 200));
    const std::vector<std::vector<int32_t>> prompts = {longer, {1, 300, 301, 302, 300}, {1, 42, 43}};
    auto run = [&](Model* draft, float temperature) {
      Engine eng(m, nullptr,
                 EngineOptions{.n_slots = 4, .n_ctx = 128, .n_batch = 16, .n_threads = 2, .draft = draft});
      return run_requests(eng, prompts, 30, temperature, 4);
    };
    const bool self = std::string(pair.target) == pair.draft;
    for (float temperature : {0.0f, 1.0f}) {
      const auto plain = run(nullptr, temperature), spec = run(dm->model.get(), temperature);
      int64_t drafted = 0, accepted = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "T " << temperature << " request " << i;
        drafted += spec[i].spec.drafted, accepted += spec[i].spec.accepted;
      }
      EXPECT_EQ(spec[2].spec.drafted, 0);
      EXPECT_GT(drafted, 0) << "T " << temperature;
      if (temperature == 0) {
        if (self) {
          EXPECT_EQ(accepted, drafted);
        } else {
          EXPECT_LT(accepted, drafted);
        }
      }
      std::printf("%s drafted by %s, T %.0f: %lld guesses, %lld accepted\n", pair.target, pair.draft, temperature,
                  (long long)drafted, (long long)accepted);
    }
  }
  auto q35 = load_model(test::model_dir("qwen3_5"));
  auto st = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(q35.is_ok() && st.is_ok());
  EXPECT_FALSE(Engine::check_draft(*st->model, *q35->model).is_ok());  // recurrent layers
  auto q3 = load_model(test::model_dir("qwen3"));
  ASSERT_TRUE(q3.is_ok());
  if (q3->model->info().n_vocab != st->model->info().n_vocab) {
    EXPECT_FALSE(Engine::check_draft(*st->model, *q3->model).is_ok());  // another vocabulary
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

// The engine thread's exception barrier: a callback that throws (as a bad_alloc in a forward pass would) fails its
// request with one error, and the engine goes on serving.
TEST(Engine, ExceptionFailsTheRequestNotTheEngine) {
  auto lm = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(lm.is_ok());
  Engine eng(*lm->model, nullptr, EngineOptions{.n_slots = 2, .n_ctx = 128, .n_threads = 1});
  std::promise<Status> first;
  EngineRequest a;
  a.prompt = {1, 403};
  a.params.max_tokens = 50;
  a.params.ignore_eos = true;
  int seen = 0;
  a.on_token = [&seen](const std::string&, int32_t) -> bool {
    if (++seen == 3) throw std::bad_alloc();
    return true;
  };
  a.on_done = [&first](const Result<GenerateResult>& r) { first.set_value(r.status()); };
  ASSERT_TRUE(eng.submit(std::move(a)).is_ok());
  Status st = first.get_future().get();
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("out of memory"), std::string::npos) << st.message();
  // an on_done that throws is called once, and does not stop the engine either
  std::atomic<int> calls{0};
  std::promise<void> thrown;
  EngineRequest b;
  b.prompt = {1, 300};
  b.params.max_tokens = 3;
  b.on_done = [&calls, &thrown](const Result<GenerateResult>&) {
    if (++calls == 1) thrown.set_value();
    throw std::runtime_error("callback failed");
  };
  ASSERT_TRUE(eng.submit(std::move(b)).is_ok());
  thrown.get_future().get();  // (what else runs in the step that throws fails with it)
  std::promise<size_t> third;
  EngineRequest c;
  c.prompt = {1, 403};
  c.params.max_tokens = 5;
  c.params.ignore_eos = true;
  c.on_done = [&third](const Result<GenerateResult>& r) { third.set_value(r.is_ok() ? r->tokens.size() : 0); };
  ASSERT_TRUE(eng.submit(std::move(c)).is_ok());
  EXPECT_EQ(third.get_future().get(), 5u);
  EXPECT_EQ(calls.load(), 1);
}

// cancel() from other threads while requests are queued, admitted and finishing (the ThreadSanitizer build runs
// this: cancelled_ and active_ are shared with the engine thread).
TEST(Engine, CancelAndStatsFromManyThreads) {
  auto lm = load_model(test::model_dir("stories260k"));
  ASSERT_TRUE(lm.is_ok());
  Engine eng(*lm->model, nullptr, EngineOptions{.n_slots = 2, .n_ctx = 128, .n_threads = 1, .max_queue = 64});
  constexpr int kN = 24;
  std::vector<std::promise<StopReason>> done(kN);
  std::vector<uint64_t> ids;
  for (int i = 0; i < kN; ++i) {
    EngineRequest r;
    r.prompt = {1, 403, int32_t(300 + i)};
    r.params.max_tokens = 40;
    r.params.ignore_eos = true;
    r.on_done = [&done, i](const Result<GenerateResult>& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // widens the window the cancel() calls race with
      done[size_t(i)].set_value(res.is_ok() ? res->reason : StopReason::kCallback);
    };
    auto id = eng.submit(std::move(r));
    ASSERT_TRUE(id.is_ok());
    ids.push_back(*id);
  }
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!stop) {
      Engine::Stats s = eng.stats();
      EXPECT_LE(s.active, 2);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> cancellers;
  for (int t = 0; t < 3; ++t)
    cancellers.emplace_back([&, t] {
      // every odd request, again and again for a while (cancelling a finished request is a no-op)
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
      while (std::chrono::steady_clock::now() < end)
        for (int i = t; i < kN; i += 3)
          if (i % 2 == 1) eng.cancel(ids[size_t(i)]);
    });
  for (auto& t : cancellers) t.join();
  int cancelled = 0;
  for (int i = 0; i < kN; ++i) cancelled += done[size_t(i)].get_future().get() == StopReason::kCallback;
  stop = true;
  watcher.join();
  EXPECT_GE(cancelled, 1);
  // on_done runs just before the request leaves the running set
  for (int i = 0; i < 200 && eng.stats().active > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(eng.stats().active, 0);
  EXPECT_EQ(eng.stats().queued, 0);
}

}  // namespace
}  // namespace pipit
