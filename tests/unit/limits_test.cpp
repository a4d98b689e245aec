// Size checks before allocation: the session memory plan, config size validation, capped file reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/limits.h"
#include "core/storage.h"
#include "models/hf_config.h"
#include "models/model.h"
#include "runtime/memory_plan.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

namespace fs = std::filesystem;

ModelInfo stories_like() {
  ModelInfo m;
  m.n_vocab = 512;
  m.n_embd = 64;
  m.n_layer = 5;
  m.max_ctx = 512;
  m.kv = {5, 4, 8};
  return m;
}

// Sets PIPIT_MEM_AVAILABLE for one test.
struct MemAvailable {
  explicit MemAvailable(uint64_t b) { setenv("PIPIT_MEM_AVAILABLE", std::to_string(b).c_str(), 1); }
  ~MemAvailable() { unsetenv("PIPIT_MEM_AVAILABLE"); }
};

TEST(MemoryPlan, KvBytesFollowTheCacheRule) {
  ModelInfo m = stories_like();
  // 5 layers x 4 heads x 8 dims x 4 bytes x (K + V) = 1280 bytes per position
  EXPECT_EQ(kv_cache_bytes(m, 1, 100, DType::F32, 512), 128000.0);
  EXPECT_EQ(kv_cache_bytes(m, 2, 100, DType::F16, 512), 128000.0);
  // the same bytes KvCache allocates, sliding-window rings included
  m.kv.window = {0, 16, 0, 16, 0};
  KvCache kv(m.kv, 1, 256, DType::F32, 8);
  EXPECT_EQ(kv_cache_bytes(m, 1, 256, DType::F32, 8), double(kv.bytes()));
}

TEST(MemoryPlan, RefusesContextBeyondTheModelAndNamesBoth) {
  auto r = plan_session(stories_like(), {.n_ctx = 10000000});
  ASSERT_FALSE(r.is_ok());
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("-c 10000000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_position_embeddings 512"), std::string::npos) << msg;
  EXPECT_NE(msg.find("12.8 GB"), std::string::npos) << msg;  // 1280 bytes x 10^7
}

TEST(MemoryPlan, SaysWhatFitsInTheMemoryThereIs) {
  ModelInfo m = stories_like();
  m.max_ctx = 1 << 20;
  MemAvailable mem(1000000);  // 1 MB
  auto r = plan_session(m, {.n_ctx = 4096, .n_batch = 64}, "n_ctx");
  ASSERT_FALSE(r.is_ok());
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("n_ctx 4096 needs 5.2 MB of KV cache"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1.0 MB of memory is available"), std::string::npos) << msg;
  // activations of a 64-token chunk: 64 x (512 + 32 x 64) x 4 = 655360 bytes; the rest, 344640, holds 269 positions
  EXPECT_NE(msg.find("at most n_ctx 269 fits"), std::string::npos) << msg;
  EXPECT_TRUE(plan_session(m, {.n_ctx = 269, .n_batch = 64}).is_ok());
  EXPECT_FALSE(plan_session(m, {.n_ctx = 270, .n_batch = 64}).is_ok());
}

TEST(MemoryPlan, Limits) {
  const ModelInfo m = stories_like();
  EXPECT_FALSE(plan_session(m, {.n_ctx = 0}).is_ok());
  EXPECT_FALSE(plan_session(m, {.n_ctx = Limits::kMaxCtx + 1}).is_ok());
  EXPECT_FALSE(plan_session(m, {.n_ctx = 16, .n_batch = 0}).is_ok());
  EXPECT_FALSE(plan_session(m, {.n_ctx = 16, .n_slot = Limits::kMaxSlots + 1}).is_ok());
  EXPECT_FALSE(plan_session(m, {.n_ctx = 16, .n_threads = Limits::kMaxThreads + 1}).is_ok());
  EXPECT_TRUE(plan_session(m, {.n_ctx = 512}).is_ok());
}

TEST(ConfigSizes, EveryTestCheckpointPasses) {
  // Every config the project runs must pass (a maximum set too low would refuse a real model).
  int n = 0;
  for (const auto& e : fs::directory_iterator(test::model_dir(""))) {
    const fs::path cfg = e.path() / "config.json";
    if (!fs::exists(cfg)) continue;
    auto c = HfConfig::load(cfg.string());
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    EXPECT_TRUE(c->validate_sizes().is_ok()) << cfg << ": " << c->validate_sizes().message();
    ++n;
  }
  EXPECT_GT(n, 5);
}

TEST(ConfigSizes, RefusesAbsurdValuesNamingTheField) {
  auto check = [](const char* json, const char* field) {
    auto c = HfConfig::parse(json, "config.json");
    ASSERT_TRUE(c.is_ok());
    Status st = c->validate_sizes();
    EXPECT_FALSE(st.is_ok()) << json;
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  };
  check(R"({"head_dim": 3e9})", "'head_dim' is 3000000000.0");
  check(R"({"num_hidden_layers": 1e15})", "'num_hidden_layers'");
  check(R"({"hidden_size": -1})", "'hidden_size'");
  check(R"({"vocab_size": 2147483648})", "'vocab_size'");
  check(R"({"intermediate_size": "64"})", "a string");
  check(R"({"num_attention_heads": [8]})", "an array");
  check(R"({"num_experts": true})", "'num_experts' is true");
  check(R"({"hidden_size": 64.5})", "'hidden_size' is 64.5");
  check(R"({"text_config": {"vocab_size": 1099511627776}})", "config.json:text_config");
  check(R"({"eos_token_id": [1, 2, 4294967296]})", "'eos_token_id'");
  // what real configs write is fine
  auto ok = HfConfig::parse(R"({"hidden_size": 64.0, "eos_token_id": [1, 2], "pad_token_id": null,
                                "sliding_window": null, "rope_scaling": {"factor": 8.0}})", "config.json");
  ASSERT_TRUE(ok.is_ok());
  EXPECT_TRUE(ok->validate_sizes().is_ok()) << ok->validate_sizes().message();
}

TEST(ConfigSizes, GetIntDoesNotConvertHugeFloats) {
  auto c = HfConfig::parse(R"({"a": 1e30, "b": 64.0, "c": 18446744073709551615})", "config.json");
  ASSERT_TRUE(c.is_ok());
  EXPECT_FALSE(c->get_int("a").is_ok());
  EXPECT_EQ(*c->get_int("b"), 64);
  EXPECT_FALSE(c->get_int("c").is_ok());
}

TEST(ReadFile, CapsDirectoriesDevicesAndLargeFiles) {
  const fs::path dir = fs::temp_directory_path() / ("pipit_limits_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto r = read_file(dir.string(), 100);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("is a directory"), std::string::npos) << r.status().message();
  r = read_file("/dev/zero", 1000);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("goes on past 1.0 KB"), std::string::npos) << r.status().message();
  const fs::path f = dir / "f.txt";
  std::ofstream(f) << std::string(200, 'x');
  r = read_file(f.string(), 100);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("is 200 bytes, more than the 100 bytes"), std::string::npos)
      << r.status().message();
  r = read_file(f.string(), 200);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->size(), 200u);
  fs::remove_all(dir);
}

TEST(HeapStorage, AllocationFailureThrowsInsteadOfAborting) {
  EXPECT_THROW(HeapStorage::make(SIZE_MAX - 8), std::bad_alloc);
}

}  // namespace
}  // namespace pipit
