// Several images in one prompt (the shared goldens have one per case): expansion, get_rope_index across two
// images (Qwen3-VL: both images' DeepStack features), logits and greedy decode against tests/data/vl_multi (made by tests/data/make_vl_multi_golden.py with
// the shared PyTorch reference). Also the bad-input paths of the multimodal runtime.
#include <gtest/gtest.h>

#include "format/safetensors.h"
#include "models/vision/vision_model.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

std::vector<int32_t> ids_of(const Tensor& t) { return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()}; }

struct Loaded {
  LoadedModel lm;
  ImageProcessorConfig proc;
};

Loaded load(const std::string& arch) {
  auto m = load_model(test::model_dir(arch));
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  Loaded l{std::move(m).value(), {}};
  auto pp = preprocessor_config_of(l.lm);
  EXPECT_TRUE(pp.is_ok());
  auto p = image_processor_for(*l.lm.model, *pp);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  l.proc = *p;
  return l;
}

EncodedImage encode(const Loaded& l, const std::string& arch, const std::string& name, ThreadPool& pool) {
  auto img = load_image(test::model_dir(arch) + "/" + name + ".png");
  EXPECT_TRUE(img.is_ok()) << img.status().message();
  auto e = encode_image(*l.lm.model, l.proc, *img, pool);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return std::move(e).value();
}

class TwoImages : public ::testing::TestWithParam<std::string> {};

TEST_P(TwoImages, MatchesTheReference) {
  const std::string arch = GetParam();
  auto g = SafetensorsFile::open(std::string(PIPIT_SOURCE_DIR) + "/tests/data/vl_multi/" + arch + ".safetensors");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  Loaded l = load(arch);
  ThreadPool pool(2);
  // the case images of the arch's shared goldens, small one first (Qwen3-VL's patch 16 has its own pair)
  const bool q3 = arch == "qwen3_vl";
  std::vector<EncodedImage> imgs = {encode(l, arch, q3 ? "img_150x90" : "img_100x75", pool),
                                    encode(l, arch, q3 ? "img_256x160" : "img_300x200", pool)};
  auto p = build_multimodal_prompt(*l.lm.model, ids_of(*g->get("input_ids_unexpanded")), imgs);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->tokens, ids_of(*g->get("input_ids")));
  if (arch != "llava") {
    EXPECT_EQ(p->mrope_pos, ids_of(*g->get("position_ids")));
    EXPECT_EQ(p->rope_delta, ids_of(*g->get("rope_deltas"))[0]);
  }
  const int64_t V = l.lm.model->info().n_vocab;
  Session s(*l.lm.model, SessionOptions{.n_threads = 2, .n_batch = 16});
  auto r = s.eval(*p, /*all_logits=*/true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const auto rows = ids_of(*g->get("logits_rows"));
  const Tensor want = *g->get("logits");
  for (size_t i = 0; i < rows.size(); ++i) {
    auto d = test::max_abs_diff(r->ptr<float>() + int64_t(rows[i]) * V, want.ptr<float>() + int64_t(i) * V, V);
    EXPECT_LE(d.max_abs, 1e-3) << "row " << rows[i];
  }
  // greedy decode from the last prompt row
  const auto want_ids = ids_of(*g->get("greedy_ids"));
  std::vector<int32_t> got;
  int32_t next = argmax(std::span<const float>(r->ptr<float>() + (int64_t(p->tokens.size()) - 1) * V, size_t(V)));
  for (size_t k = 0; k < want_ids.size(); ++k) {
    got.push_back(next);
    auto step = s.eval(std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(step.is_ok()) << step.status().message();
    next = argmax(std::span<const float>(step->ptr<float>(), size_t(V)));
  }
  EXPECT_EQ(got, want_ids);
}

INSTANTIATE_TEST_SUITE_P(VL, TwoImages, ::testing::Values("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llava"));

TEST(MultimodalErrors, TextOnlyModelAndCountMismatch) {
  auto text = load_model(test::model_dir("qwen2"));
  ASSERT_TRUE(text.is_ok());
  auto e = image_processor_for(*text->model, nullptr);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("text-only"), std::string::npos) << e.status().message();
  EXPECT_FALSE(build_multimodal_prompt(*text->model, std::vector<int32_t>{1, 2}, {}).is_ok());

  Loaded l = load("qwen2_vl");
  ThreadPool pool(2);
  std::vector<EncodedImage> one = {encode(l, "qwen2_vl", "img_100x75", pool)};
  const std::vector<int32_t> two_marks = {1001, 1009, 1012, 1010, 1009, 1012, 1010, 56};
  auto more = build_multimodal_prompt(*l.lm.model, two_marks, one);  // more image tokens than images
  ASSERT_FALSE(more.is_ok());
  EXPECT_NE(more.status().message().find("2 image tokens for 1 image"), std::string::npos) << more.status().message();
  EXPECT_FALSE(build_multimodal_prompt(*l.lm.model, std::vector<int32_t>{1001, 56}, one).is_ok());  // none
  std::vector<int32_t> split(12, 1012);  // expanded, but the run is cut by text
  split.insert(split.begin() + 5, 56);
  EXPECT_FALSE(build_multimodal_prompt(*l.lm.model, split, one).is_ok());
  auto cap = image_processor_for(*l.lm.model, nullptr, ImageOptions{.max_pixels = 100});
  EXPECT_FALSE(cap.is_ok());
}

TEST(MultimodalSession, TruncateKeepsWholeImagesAndTheirOffset) {
  Loaded l = load("qwen2_vl");
  ThreadPool pool(2);
  std::vector<EncodedImage> one = {encode(l, "qwen2_vl", "img_100x75", pool)};
  const std::vector<int32_t> ids = {1001, 795, 413, 1009, 1012, 1010, 56, 376, 681};
  auto p = build_multimodal_prompt(*l.lm.model, ids, one);
  ASSERT_TRUE(p.is_ok());
  Session s(*l.lm.model, SessionOptions{.n_threads = 2});
  ASSERT_TRUE(s.eval(*p).is_ok());
  EXPECT_EQ(s.n_past(), 20);  // 8 text + 12 image tokens
  EXPECT_EQ(s.rope_delta(), p->rope_delta);
  EXPECT_EQ(p->rope_delta, -8);  // a 6x8 grid seen as 3x4 spans max(3, 4) = 4 positions for 12 tokens
  s.truncate(18);  // text after the image: the offset stays
  EXPECT_EQ(s.n_past(), 18);
  EXPECT_EQ(s.rope_delta(), -8);
  s.truncate(10);  // inside the image: back to its start, before it the offset is 0
  EXPECT_EQ(s.n_past(), 4);
  EXPECT_EQ(s.rope_delta(), 0);
  s.reset();
  EXPECT_EQ(s.n_past(), 0);
}

}  // namespace
}  // namespace pipit
