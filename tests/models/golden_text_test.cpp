// Golden parity for the text decoders: f32 logits of a full forward pass, the greedy continuation with a KV cache,
// the batch prompts, and token-by-token decode equal to the full pass. Goldens: ../shared/testdata/models/<arch>.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "format/safetensors.h"
#include "runtime/loader.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

constexpr double kTol = 1e-3;
constexpr double kQ8KvBound = 0.02;  // set from the measurements printed by Q8KvCacheStaysClose

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

// The q8_0 KV cache (--kv-type q8): K and V rows rounded to 8-bit blocks of 32 when stored. Its error against the
// f32 golden, as relative RMS over all positions' logits (bound ~1.5x what was measured), and token by token equal
// to a full pass over the same quantized cache (each row is quantized once, whichever way it was computed).
TEST_P(GoldenText, Q8KvCacheStaysClose) {
  LoadedModel lm = load(GetParam());
  if (lm.model->info().kv.head_dim % kQBlock) GTEST_SKIP() << "head_dim not a multiple of 32: no q8 KV cache";
  Golden g = open_golden(test::model_dir(GetParam()));
  auto ids = g.ids("input_ids");
  Session s(*lm.model, SessionOptions{.n_threads = 2, .kv_dtype = DType::Q8_0});
  auto logits = s.eval(ids, /*all_logits=*/true);
  ASSERT_TRUE(logits.is_ok()) << logits.status().message();
  Tensor want = g.get("logits");
  ASSERT_EQ(logits->numel(), want.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = double(logits->ptr<float>()[i]) - want.ptr<float>()[i];
    num += d * d;
    den += double(want.ptr<float>()[i]) * want.ptr<float>()[i];
  }
  const double rel = std::sqrt(num / den);
  std::printf("[ measure  ] %s q8 KV: relative RMS logit error %.5f\n", GetParam().c_str(), rel);
  EXPECT_GT(rel, 0.0) << "the q8 cache changed nothing?";
  // gpt_oss measured 0.0190: its sinks and clamped SwiGLU (inputs up to ~50) pass the K/V rounding on more strongly
  EXPECT_LE(rel, GetParam() == "gpt_oss" ? 0.025 : kQ8KvBound);
  const std::vector<float> full(logits->ptr<float>(), logits->ptr<float>() + logits->numel());
  Session t(*lm.model, SessionOptions{.n_threads = 2, .kv_dtype = DType::Q8_0});
  const int64_t V = lm.model->info().n_vocab;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto r = t.eval(std::span<const int32_t>(&ids[i], 1));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_LE(test::max_abs_diff(r->ptr<float>(), full.data() + i * size_t(V), V).max_abs, kTol) << "position " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Text, GoldenText, ::testing::Values("llama", "qwen2", "qwen3", "stories260k", "gemma3_text",
                                                        "smollm3", "qwen3_moe", "minicpm",
                                                        "deepseek_ocr_lm", "qwen3_5", "gpt_oss"));

}  // namespace
}  // namespace pipit
