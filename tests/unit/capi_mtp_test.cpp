// Speculative decoding with the model's own MTP head through the C API (pipit_session_options.mtp) and the Engine
// (EngineOptions::mtp, what `pipit serve --mtp` runs): greedy and seeded tokens are those of plain decoding, over
// chat turns that reuse the context; guesses are made and some accepted; a model without the head is refused.
#include <gtest/gtest.h>

#include <future>

#include "include/pipit/pipit.h"
#include "runtime/engine.h"
#include "runtime/loader.h"
#include "tests/mtp_fixture.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

class CapiMtp : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pipit_model_load(dir_.path().c_str(), nullptr, &model_), PIPIT_OK) << pipit_last_error();
  }
  void TearDown() override { pipit_model_destroy(model_); }
  pipit_session* session(int32_t mtp) {
    pipit_session* s = nullptr;
    pipit_session_options so;
    pipit_session_options_default(&so);
    so.n_threads = 2;
    so.kv_type = PIPIT_KV_F32;
    so.mtp = mtp;
    EXPECT_EQ(pipit_session_create(model_, &so, &s), PIPIT_OK) << pipit_last_error();
    return s;
  }
  static std::vector<int32_t> chat(pipit_session* s, const std::string& messages, int n, float temp) {
    pipit_generate_options o;
    pipit_generate_options_default(&o);
    o.max_tokens = n;
    o.temperature = temp;
    o.seed = 5;
    std::vector<int32_t> got;
    auto cb = [](const char*, size_t, int32_t tok, void* user) -> int32_t {
      if (tok >= 0) static_cast<std::vector<int32_t>*>(user)->push_back(tok);
      return 1;
    };
    EXPECT_EQ(pipit_session_generate(s, messages.c_str(), 1, &o, cb, &got), PIPIT_OK) << pipit_last_error();
    return got;
  }
  test::MtpModelDir dir_;
  pipit_model* model_ = nullptr;
};

TEST_F(CapiMtp, GreedyAndSeededEqualPlain) {
  const std::string t1 = R"([{"role": "user", "content": "Once upon a time there was a cat."}])";
  const std::string t2 = R"([{"role": "user", "content": "Once upon a time there was a cat."},
                            {"role": "assistant", "content": "It was big"}, {"role": "user", "content": "a dog"}])";
  for (float temp : {0.0f, 0.8f}) {
    for (int32_t k : {1, 3}) {
      SCOPED_TRACE("temperature " + std::to_string(temp) + ", mtp " + std::to_string(k));
      pipit_session* plain = session(0);
      pipit_session* s = session(k);
      ASSERT_TRUE(plain && s);
      EXPECT_EQ(chat(s, t1, 24, temp), chat(plain, t1, 24, temp));
      int64_t drafted = 0, accepted = 0;
      ASSERT_EQ(pipit_session_speculation_stats(s, &drafted, &accepted), PIPIT_OK);
      EXPECT_GT(drafted, 0);
      EXPECT_EQ(chat(s, t2, 24, temp), chat(plain, t2, 24, temp));  // the second turn reuses the context
      EXPECT_EQ(pipit_session_n_past(s), pipit_session_n_past(plain));
      pipit_session_destroy(s);
      pipit_session_destroy(plain);
    }
  }
}

TEST_F(CapiMtp, Refused) {
  pipit_session_options so;
  pipit_session_options_default(&so);
  so.mtp = 17;
  pipit_session* s = nullptr;
  EXPECT_EQ(pipit_session_create(model_, &so, &s), PIPIT_ERR_INVALID_ARGUMENT);
  pipit_model* text = nullptr;  // the qwen3_5 test checkpoint has no mtp.* tensors
  test::MtpModelDir no_head("qwen3_5");
  ASSERT_EQ(pipit_model_load(no_head.path().c_str(), nullptr, &text), PIPIT_OK) << pipit_last_error();
  so.mtp = 1;
  EXPECT_EQ(pipit_session_create(text, &so, &s), PIPIT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(pipit_last_error()).find("no mtp.* tensors"), std::string::npos) << pipit_last_error();
  pipit_model_destroy(text);
}

// The in-process server's option (pipit_server_options.mtp; what it serves is the Engine's, checked below and by
// server_test.py's SpeculativeMtp over HTTP): out of range, or a model without the head, is refused before it starts.
TEST_F(CapiMtp, InProcessServerRefuses) {
  pipit_server_options o;
  pipit_server_options_default(&o);
  EXPECT_EQ(o.mtp, 0);
  o.n_threads = 1;
  o.mtp = 17;
  pipit_server* srv = nullptr;
  const pipit_status st = pipit_server_start(model_, &o, &srv);
  if (st == PIPIT_ERR_UNSUPPORTED && std::string(pipit_last_error()).find("has no server") != std::string::npos)
    GTEST_SKIP() << "built without the server";
  EXPECT_EQ(st, PIPIT_ERR_INVALID_ARGUMENT) << pipit_last_error();
  o.mtp = 2;
  test::MtpModelDir no_head("qwen3_5");
  pipit_model* text = nullptr;
  ASSERT_EQ(pipit_model_load(no_head.path().c_str(), nullptr, &text), PIPIT_OK) << pipit_last_error();
  EXPECT_EQ(pipit_server_start(text, &o, &srv), PIPIT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(pipit_last_error()).find("no mtp.* tensors"), std::string::npos) << pipit_last_error();
  EXPECT_EQ(srv, nullptr);
  pipit_model_destroy(text);
}

// The Engine with the head (pipit serve --mtp): four requests at once, greedy and seeded, each the plain tokens of
// generate() on its own session; the recurrent state goes back to its snapshot after each rejection.
TEST(EngineMtp, ConcurrentRequestsEqualPlain) {
  test::MtpModelDir dir;
  auto lm = load_model(dir.path());
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  Model& m = *lm->model;
  const std::vector<std::vector<int32_t>> prompts = {{1, 400, 31, 99, 12}, {1, 7, 7, 7, 7, 7, 7}, {1, 250},
                                                     {1, 3, 5, 8, 13, 21, 34, 55, 89, 144}};
  for (float temp : {0.0f, 0.8f}) {
    for (int k : {1, 2}) {
      SCOPED_TRACE("temperature " + std::to_string(temp) + ", " + std::to_string(k) + " guesses");
      GenerateParams gp;
      gp.max_tokens = 32;
      gp.ignore_eos = true;
      gp.sampler.temperature = temp;
      std::vector<std::vector<int32_t>> want;
      for (size_t i = 0; i < prompts.size(); ++i) {
        Session s(m, SessionOptions{.n_ctx = 128, .n_threads = 2});
        gp.sampler.seed = 40 + i;
        auto r = generate(s, nullptr, prompts[i], gp);
        ASSERT_TRUE(r.is_ok());
        want.push_back(r->tokens);
      }
      Engine eng(m, nullptr, EngineOptions{.n_slots = 3, .n_ctx = 128, .n_batch = 16, .n_threads = 2, .mtp = true});
      std::vector<std::promise<GenerateResult>> done(prompts.size());
      for (size_t i = 0; i < prompts.size(); ++i) {
        EngineRequest r;
        r.prompt = prompts[i];
        r.params = gp;
        r.params.sampler.seed = 40 + i;
        r.params.spec.n_draft = k;
        r.on_done = [&done, i](const Result<GenerateResult>& res) { done[i].set_value(res.is_ok() ? *res : GenerateResult{}); };
        ASSERT_TRUE(eng.submit(std::move(r)).is_ok());
      }
      int64_t drafted = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        GenerateResult got = done[i].get_future().get();
        EXPECT_EQ(got.tokens, want[i]) << "request " << i;
        drafted += got.spec.drafted;
      }
      EXPECT_GT(drafted, 0);
      std::printf("[ measure  ] engine temp %.1f k %d: %llu of %llu guesses accepted\n", temp, k,
                  (unsigned long long)eng.stats().spec_accepted, (unsigned long long)eng.stats().spec_drafted);
    }
  }
}

}  // namespace
}  // namespace pipit
