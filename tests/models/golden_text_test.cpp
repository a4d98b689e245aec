// Golden parity for the text decoders: f32 logits of a full forward pass, the greedy continuation with a KV cache,
// the batch prompts, and token-by-token decode equal to the full pass. Goldens: ../shared/testdata/models/<arch>.
#include <gtest/gtest.h>

#include <vector>

#include "format/safetensors.h"
#include "runtime/loader.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

constexpr double kTol = 1e-3;

struct Golden {
  SafetensorsFile file;
  std::vector<int32_t> ids(const std::string& name) const {
    Tensor t = *file.get(name);
    return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
  }
  Tensor get(const std::string& name) const { return *file.get(name); }
};

Golden open_golden(const std::string& dir, const char* name = "golden.safetensors") {
  auto f = SafetensorsFile::open(dir + "/" + name);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  return Golden{std::move(f).value()};
}

LoadedModel load(const std::string& arch) {
  auto m = load_model(test::model_dir(arch));
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return std::move(m).value();
}

class GoldenText : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenText, FullForwardLogits) {
  const std::string dir = test::model_dir(GetParam());
  LoadedModel lm = load(GetParam());
  Golden g = open_golden(dir);
  auto ids = g.ids("input_ids");
  Session s(*lm.model, SessionOptions{.n_threads = 2});
  auto logits = s.eval(ids, /*all_logits=*/true);
  ASSERT_TRUE(logits.is_ok()) << logits.status().message();
  Tensor want = g.get("logits");
  ASSERT_EQ(logits->numel(), want.numel());
  auto d = test::max_abs_diff(logits->ptr<float>(), want.ptr<float>(), want.numel());
  const int64_t V = lm.model->info().n_vocab;
  EXPECT_LE(d.max_abs, kTol) << "worst at position " << d.worst / V << ", token " << d.worst % V;
}

TEST_P(GoldenText, GreedyContinuationWithKvCache) {
  const std::string dir = test::model_dir(GetParam());
  LoadedModel lm = load(GetParam());
  Golden g = open_golden(dir);
  auto ids = g.ids("input_ids");
  auto want_ids = g.ids("greedy_ids");
  Tensor want_logits = g.get("greedy_logits");
  const int64_t V = lm.model->info().n_vocab;
  Session s(*lm.model, SessionOptions{.n_threads = 2});
  auto r = s.eval(ids);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::vector<int32_t> got;
  double worst = 0;
  for (size_t step = 0; step < want_ids.size(); ++step) {
    std::span<const float> l(r->ptr<float>(), size_t(V));
    auto d = test::max_abs_diff(l.data(), want_logits.ptr<float>() + step * V, V);
    worst = std::max(worst, d.max_abs);
    int32_t next = argmax(l);
    got.push_back(next);
    if (next != want_ids[step]) break;
    r = s.eval(std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
  }
  EXPECT_EQ(got, want_ids);
  EXPECT_LE(worst, kTol);
}

TEST_P(GoldenText, TokenByTokenEqualsFullPass) {
  const std::string dir = test::model_dir(GetParam());
  LoadedModel lm = load(GetParam());
  Golden g = open_golden(dir);
  auto ids = g.ids("input_ids");
  Tensor want = g.get("logits");
  const int64_t V = lm.model->info().n_vocab;
  Session s(*lm.model, SessionOptions{.n_threads = 1});
  double worst = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    auto r = s.eval(std::span<const int32_t>(&ids[t], 1));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    worst = std::max(worst, test::max_abs_diff(r->ptr<float>(), want.ptr<float>() + t * V, V).max_abs);
  }
  EXPECT_LE(worst, kTol);
}

TEST_P(GoldenText, BatchPrompts) {
  const std::string dir = test::model_dir(GetParam());
  if (!file_exists(dir + "/golden_batch.safetensors")) GTEST_SKIP() << "no golden_batch for " << GetParam();
  LoadedModel lm = load(GetParam());
  Golden g = open_golden(dir, "golden_batch.safetensors");
  for (int i = 0; i < 2; ++i) {
    auto ids = g.ids("input_ids_" + std::to_string(i));
    Tensor want = g.get("logits_" + std::to_string(i));
    Session s(*lm.model, SessionOptions{.n_threads = 2, .n_batch = 5});  // small chunks: prefill spans chunks
    auto r = s.eval(ids, true);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_LE(test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs, kTol) << "prompt " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Text, GoldenText, ::testing::Values("llama", "qwen2", "qwen3", "stories260k", "gemma3_text",
                                                        "smollm3", "qwen3_moe"));

}  // namespace
}  // namespace pipit
