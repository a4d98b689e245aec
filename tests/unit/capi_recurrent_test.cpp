// The C API over a model with a recurrent state (Qwen3.5): chat turns that reuse the cached prefix, including an
// edited earlier answer (the state is rewound to a snapshot and the rest re-evaluated), give the tokens a fresh
// session gives for the same conversation. The tiny test checkpoint has no tokenizer; stories260k's (same 512-id
// vocabulary size) is put next to it with a small chat template.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "include/pipit/pipit.h"
#include "tests/test_util.h"
#include <nlohmann/json.hpp>

namespace pipit {
namespace {

class CapiRecurrent : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    dir_ = (fs::temp_directory_path() / ("pipit_capi_qwen35_" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    const std::string q = test::model_dir("qwen3_5"), st = test::model_dir("stories260k");
    fs::create_symlink(q + "/config.json", dir_ + "/config.json");
    fs::create_symlink(q + "/model.safetensors", dir_ + "/model.safetensors");
    fs::create_symlink(st + "/tokenizer.json", dir_ + "/tokenizer.json");
    std::ofstream(dir_ + "/tokenizer_config.json") << R"({"bos_token": "<s>", "eos_token": "</s>", "chat_template":
      "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"})";
    ASSERT_EQ(pipit_model_load(dir_.c_str(), nullptr, &model_), PIPIT_OK) << pipit_last_error();
  }
  void TearDown() override {
    pipit_model_destroy(model_);
    std::filesystem::remove_all(dir_);
  }
  std::vector<int32_t> chat(pipit_session* s, const std::string& messages, int n) {
    pipit_generate_options o;
    pipit_generate_options_default(&o);
    o.max_tokens = n;
    o.temperature = 0;
    std::vector<int32_t> got;
    auto cb = [](const char*, size_t, int32_t tok, void* user) -> int32_t {
      if (tok >= 0) static_cast<std::vector<int32_t>*>(user)->push_back(tok);
      return 1;
    };
    EXPECT_EQ(pipit_session_generate(s, messages.c_str(), 1, &o, cb, &got), PIPIT_OK) << pipit_last_error();
    return got;
  }
  std::vector<int32_t> fresh(const std::string& messages, int n) {
    pipit_session* s = nullptr;
    pipit_session_options so;
    pipit_session_options_default(&so);
    so.n_threads = 2;
    so.kv_type = PIPIT_KV_DEFAULT;
    EXPECT_EQ(pipit_session_create(model_, &so, &s), PIPIT_OK);
    auto r = chat(s, messages, n);
    pipit_session_destroy(s);
    return r;
  }
  std::string dir_;
  pipit_model* model_ = nullptr;
};

TEST_F(CapiRecurrent, ChatTurnsReuseAndRewindTheState) {
  pipit_session* s = nullptr;
  pipit_session_options so;
  pipit_session_options_default(&so);
  so.n_threads = 2;
  so.kv_type = PIPIT_KV_DEFAULT;
  ASSERT_EQ(pipit_session_create(model_, &so, &s), PIPIT_OK);
  const std::string t1 = R"([{"role": "user", "content": "Once upon a time"}])";
  const std::string t2 = R"([{"role": "user", "content": "Once upon a time"}, {"role": "assistant", "content": "there was"},
                            {"role": "user", "content": "a cat"}])";  // not what the model said: rewinds
  const std::string t3 = R"([{"role": "user", "content": "Once upon a time"}, {"role": "assistant", "content": "there was"},
                            {"role": "user", "content": "a cat"}, {"role": "assistant", "content": "ok"},
                            {"role": "user", "content": "and a dog"}])";
  const std::string t4 = R"([{"role": "user", "content": "The end"}])";  // shares almost nothing
  auto a1 = chat(s, t1, 6);
  auto a2 = chat(s, t2, 6);
  auto a3 = chat(s, t3, 6);
  auto a4 = chat(s, t4, 6);
  pipit_session_destroy(s);
  EXPECT_FALSE(a1.empty());
  EXPECT_EQ(a1, fresh(t1, 6));
  EXPECT_EQ(a2, fresh(t2, 6));
  EXPECT_EQ(a3, fresh(t3, 6));
  EXPECT_EQ(a4, fresh(t4, 6));
}

std::string detok(pipit_model* m, const std::vector<int32_t>& ids) {
  char buf[4096];
  size_t n = 0;
  EXPECT_EQ(pipit_detokenize(m, ids.data(), ids.size(), 1, buf, sizeof buf, &n), PIPIT_OK);
  return std::string(buf, n);
}

// The model's prompt cache: a new session continuing another session's conversation evaluates only what follows
// the latest state snapshot it shares, and answers as a fresh session without the cache.
TEST_F(CapiRecurrent, PromptCacheAcrossSessions) {
  ASSERT_EQ(pipit_model_set_prompt_cache(model_, 64), PIPIT_OK);
  pipit_session* a = nullptr;
  pipit_session_options so;
  pipit_session_options_default(&so);
  so.n_threads = 2;
  so.kv_type = PIPIT_KV_DEFAULT;
  ASSERT_EQ(pipit_session_create(model_, &so, &a), PIPIT_OK);
  const std::string t1 = R"([{"role": "user", "content": "Once upon a time"}])";
  auto a1 = chat(a, t1, 6);
  int32_t n_prompt = 0, n_reused = -1, n_eval = 0;
  ASSERT_EQ(pipit_session_prompt_stats(a, &n_prompt, &n_reused, &n_eval), PIPIT_OK);
  EXPECT_EQ(n_reused, 0);
  EXPECT_EQ(n_eval, n_prompt);
  const int32_t a_prompt = n_prompt, a_past = pipit_session_n_past(a);
  pipit_session_destroy(a);
  nlohmann::json t2 = nlohmann::json::parse(t1);
  t2.push_back({{"role", "assistant"}, {"content", detok(model_, a1)}});
  t2.push_back({{"role", "user"}, {"content", "a cat"}});
  pipit_session* b = nullptr;
  ASSERT_EQ(pipit_session_create(model_, &so, &b), PIPIT_OK);
  auto b2 = chat(b, t2.dump(), 6);
  ASSERT_EQ(pipit_session_prompt_stats(b, &n_prompt, &n_reused, &n_eval), PIPIT_OK);
  // the state comes back from one of session a's snapshots: its prompt's end, or its end when the re-rendered
  // answer tokenizes as generated
  EXPECT_TRUE(n_reused == a_prompt || n_reused == a_past) << n_reused << " " << a_prompt << " " << a_past;
  EXPECT_EQ(n_eval, n_prompt - n_reused);
  pipit_session_destroy(b);
  ASSERT_EQ(pipit_model_set_prompt_cache(model_, 0), PIPIT_OK);
  EXPECT_EQ(b2, fresh(t2.dump(), 6));
}

// A conversation that outgrows the context: the answer ends with "length" when the context is full, and the next
// turn is refused with a clear error.
TEST_F(CapiRecurrent, ContextFullIsLength) {
  pipit_session* s = nullptr;
  pipit_session_options so;
  pipit_session_options_default(&so);
  so.n_ctx = 24;
  so.n_threads = 2;
  so.kv_type = PIPIT_KV_DEFAULT;
  ASSERT_EQ(pipit_session_create(model_, &so, &s), PIPIT_OK);
  EXPECT_STREQ(pipit_session_finish_reason(s), "");
  const std::string t1 = R"([{"role": "user", "content": "Once upon a time"}])";
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 100;
  o.temperature = 0;
  ASSERT_EQ(pipit_session_generate(s, t1.c_str(), 1, &o, nullptr, nullptr), PIPIT_OK) << pipit_last_error();
  EXPECT_STREQ(pipit_session_finish_reason(s), "length");
  EXPECT_EQ(pipit_session_n_past(s), 24);
  EXPECT_EQ(pipit_session_n_ctx(s), 24);
  EXPECT_EQ(pipit_session_generate(s, " and then", 0, &o, nullptr, nullptr), PIPIT_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(pipit_last_error()).find("context of 24"), std::string::npos) << pipit_last_error();
  pipit_session_destroy(s);
}

}  // namespace
}  // namespace pipit

namespace pipit {
namespace {

// Speculative decoding through the C API: prompt lookup and a draft model (here the model itself: every guess is
// accepted) give a fresh plain session's greedy tokens over chat turns that reuse the context.
TEST_F(CapiRecurrent, SpeculationGreedyEqualsPlain) {
  const std::string t1 = R"([{"role": "user", "content": "Once upon a time there was a cat. Once upon a time"}])";
  const std::string t2 = R"([{"role": "user", "content": "Once upon a time there was a cat. Once upon a time"},
                            {"role": "assistant", "content": "there was"}, {"role": "user", "content": "a cat"}])";
  for (pipit_model* draft : {static_cast<pipit_model*>(nullptr), model_}) {
    pipit_session* s = nullptr;
    pipit_session_options so;
    pipit_session_options_default(&so);
    so.n_threads = 2;
    so.kv_type = PIPIT_KV_DEFAULT;
    ASSERT_EQ(pipit_session_create(model_, &so, &s), PIPIT_OK);
    ASSERT_EQ(pipit_session_set_speculation(s, draft, 4), PIPIT_OK) << pipit_last_error();
    EXPECT_EQ(chat(s, t1, 12), fresh(t1, 12));
    int64_t drafted = 0, accepted = -1;
    ASSERT_EQ(pipit_session_speculation_stats(s, &drafted, &accepted), PIPIT_OK);
    if (draft) {
      EXPECT_GT(drafted, 0);
      EXPECT_EQ(accepted, drafted);
    }
    EXPECT_EQ(chat(s, t2, 12), fresh(t2, 12));
    pipit_session_destroy(s);
  }
  pipit_session* s = nullptr;
  ASSERT_EQ(pipit_session_create(model_, nullptr, &s), PIPIT_OK);
  EXPECT_EQ(pipit_session_set_speculation(s, nullptr, 17), PIPIT_ERR_INVALID_ARGUMENT);
  pipit_session_destroy(s);
}

// kv_type: 0 (PIPIT_KV_DEFAULT, f16) and every PIPIT_KV_* value make a session that generates (head_dim 64 here, so
// q8_0 blocks fit); greedy tokens of the f16 and q8_0 caches are not compared with f32 (they may differ near ties);
// a value outside the enum is one clear error.
TEST_F(CapiRecurrent, KvTypes) {
  const std::string t1 = R"([{"role": "user", "content": "Once upon a time"}])";
  for (int32_t kv : {PIPIT_KV_DEFAULT, PIPIT_KV_F32, PIPIT_KV_F16, PIPIT_KV_Q8_0}) {
    pipit_session* s = nullptr;
    pipit_session_options so;
    pipit_session_options_default(&so);
    so.n_threads = 2;
    so.kv_type = kv;
    ASSERT_EQ(pipit_session_create(model_, &so, &s), PIPIT_OK) << kv << ": " << pipit_last_error();
    EXPECT_EQ(chat(s, t1, 4).size(), 4u) << kv;
    pipit_session_destroy(s);
  }
  pipit_session* s = nullptr;
  pipit_session_options bad;
  pipit_session_options_default(&bad);
  bad.n_threads = 2;
  bad.kv_type = 7;
  EXPECT_EQ(pipit_session_create(model_, &bad, &s), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pipit_last_error()).find("kv_type 7"), std::string::npos) << pipit_last_error();
  EXPECT_EQ(s, nullptr);
}

}  // namespace
}  // namespace pipit
