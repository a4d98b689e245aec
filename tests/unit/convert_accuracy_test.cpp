// Accuracy of q8 / q4 on a real model: stories260k over 400 tokens of story text (greedy continuation of the
// golden prompt "Once upon a time" by the f32 model), measured as llama.cpp's perplexity --kl-divergence reports it:
// mean KL(P_f32 || P_quant) per position and the share of positions whose top-1 token agrees.
#include <gtest/gtest.h>

#include "runtime/sampler.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

// Thresholds: q8 from the issue; q4 just below what was measured (see docs/format.md for the figures).
constexpr double kQ8MaxKld = 0.01, kQ8MinTop1 = 0.98;
constexpr double kQ4MaxKld = 0.045, kQ4MinTop1 = 0.89;  // measured 0.0392, 90.5%
constexpr int kTokens = 400;

std::vector<int32_t> story_tokens(Model& m) {
  std::vector<int32_t> ids = test::golden_ids("stories260k");  // BOS + "Once upon a time"
  Session s(m, SessionOptions{.n_ctx = kTokens, .n_threads = 2});
  auto r = s.eval(ids);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  while (int(ids.size()) < kTokens && r.is_ok()) {
    const int64_t V = m.info().n_vocab;
    int32_t next = argmax(std::span<const float>(r->ptr<float>(), size_t(V)));
    ids.push_back(next);
    if (int(ids.size()) == kTokens) break;
    r = s.eval(std::span<const int32_t>(&ids.back(), 1));
  }
  return ids;
}

TEST(ConvertAccuracy, Stories260kKlDivergenceAndTop1) {
  test::ScratchDir d("acc");
  LoadedModel ref = test::load_or_fail(test::model_dir("stories260k"));
  const auto ids = story_tokens(*ref.model);
  ASSERT_EQ(int(ids.size()), kTokens);
  const auto want = test::all_logits(*ref.model, ids);
  const int64_t V = ref.model->info().n_vocab;
  struct Case {
    const char* quant;
    double max_kld, min_top1;
  };
  for (const Case& c : {Case{"q8", kQ8MaxKld, kQ8MinTop1}, Case{"q4", kQ4MaxKld, kQ4MinTop1}}) {
    const std::string out = d.path(std::string(c.quant) + ".pipit");
    test::convert_or_fail(test::model_dir("stories260k"), out, c.quant);
    LoadedModel lm = test::load_or_fail(out);
    const auto got = test::all_logits(*lm.model, ids);
    const auto s = test::kl_stats(want, got, V);
    std::printf("[ measure  ] stories260k %s over %d tokens: mean KLD %.6f (max %.4f), top-1 agreement %.2f%%, "
                "relative RMS %.5f\n",
                c.quant, kTokens, s.mean_kld, s.max_kld, 100 * s.top1, test::rel_rms(got, want));
    EXPECT_LE(s.mean_kld, c.max_kld) << c.quant;
    EXPECT_GE(s.top1, c.min_top1) << c.quant;
  }
}

}  // namespace
}  // namespace pipit
