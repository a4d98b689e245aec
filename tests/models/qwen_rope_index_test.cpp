// Qwen's get_rope_index as the models answer it (models/qwen_rope_index.h), on small layouts worked out by hand;
// the goldens (vl_golden_test, vl_multi_test, qwen3_5_vl_test) check it against HF's position_ids.
#include <gtest/gtest.h>

#include <vector>

#include "models/qwen_rope_index.h"

namespace pipit {
namespace {

TEST(QwenRopeIndex, TextImageText) {
  // 2 text tokens, an image of patch grid (1, 4, 6) = a 2x3 merged grid (6 tokens), then 2 text tokens
  const MediaSpan img{2, 8, {1, 4, 6}};
  auto r = qwen_rope_index(10, std::span(&img, 1), 2);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->n_stream, 3);
  const std::vector<int32_t> t = {0, 1, 2, 2, 2, 2, 2, 2, 5, 6};
  const std::vector<int32_t> h = {0, 1, 2, 2, 2, 3, 3, 3, 5, 6};
  const std::vector<int32_t> w = {0, 1, 2, 3, 4, 2, 3, 4, 5, 6};
  std::vector<int32_t> want = t;
  want.insert(want.end(), h.begin(), h.end());
  want.insert(want.end(), w.begin(), w.end());
  EXPECT_EQ(r->pos, want);
  EXPECT_EQ(r->delta, -3);  // the image's 6 tokens span max(1, 2, 3) = 3 positions
  EXPECT_EQ(r->delta_after, std::vector<int32_t>{-3});
}

TEST(QwenRopeIndex, RefusesAGridThatDoesNotFitTheSpan) {
  const MediaSpan img{0, 5, {1, 4, 6}};  // 6 merged tokens, 5 in the span
  EXPECT_FALSE(qwen_rope_index(5, std::span(&img, 1), 2).is_ok());
}

}  // namespace
}  // namespace pipit
