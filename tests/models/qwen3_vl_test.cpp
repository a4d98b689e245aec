// Qwen3-VL beyond the goldens (vl_golden_test, vl_multi_test): the interleaved M-RoPE frequency table against HF's
// apply_interleaved_mrope, the interleaving applied even when the config does not say so (HF's Qwen3-VL always
// interleaves), a checkpoint missing a merger / DeepStack / position-embedding tensor naming it, and images the
// processor refuses.
#include <gtest/gtest.h>

#include <cmath>

#include "format/safetensors.h"
#include "models/rope.h"
#include "runtime/multimodal.h"
#include "runtime/session.h"
#include "tests/models/model_test_util.h"

namespace pipit {
namespace {

using nlohmann::json;

TEST(Qwen3VL, InterleavedMropeStreamsFollowHF) {
  // HF apply_interleaved_mrope with mrope_section [24, 20, 20] over 64 frequencies: t everywhere, then h at
  // 1, 4, .., 58 (slice(1, 60, 3)) and w at 2, 5, .., 59 (slice(2, 60, 3)); 60..63 stay t
  HfConfig cfg(json{{"rope_theta", 5000000.0},
                    {"rope_scaling", {{"rope_type", "default"}, {"mrope_section", {24, 20, 20}},
                                      {"mrope_interleaved", true}}}});
  auto r = rope_from_config(cfg, 128);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->mrope_stream.size(), 64u);
  int count[3] = {0, 0, 0};
  for (int i = 0; i < 64; ++i) {
    const int want = i < 60 ? i % 3 : 0;
    EXPECT_EQ(int(r->mrope_stream[size_t(i)]), want) << "frequency " << i;
    ++count[r->mrope_stream[size_t(i)]];
  }
  EXPECT_EQ(count[0], 24);  // each stream keeps the number of frequencies its section gives it
  EXPECT_EQ(count[1], 20);
  EXPECT_EQ(count[2], 20);
  // without the flag: sections one after another (Qwen2-VL)
  HfConfig chunked(json{{"rope_scaling", {{"mrope_section", {24, 20, 20}}}}});
  auto c = rope_from_config(chunked, 128);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(int(c->mrope_stream[23]), 0);
  EXPECT_EQ(int(c->mrope_stream[24]), 1);
  EXPECT_EQ(int(c->mrope_stream[44]), 2);
}

std::vector<float> image_logits(const std::string& dir) {
  auto lm = load_model(dir);
  EXPECT_TRUE(lm.is_ok()) << lm.status().message();
  if (!lm.is_ok()) return {};
  auto g = SafetensorsFile::open(test::model_dir("qwen3_vl") + "/golden.safetensors");
  Tensor ids = *g->get("img_150x90.input_ids_unexpanded");
  ThreadPool pool(2);
  auto p = prepare_multimodal_prompt(*lm, std::span<const int32_t>(ids.ptr<int32_t>(), size_t(ids.numel())),
                                     {test::model_dir("qwen3_vl") + "/img_150x90.png"}, {}, pool);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  if (!p.is_ok()) return {};
  Session s(*lm->model, SessionOptions{.n_threads = 2});
  auto r = s.eval(*p, /*all_logits=*/true);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return {r->ptr<float>(), r->ptr<float>() + r->numel()};
}

TEST(Qwen3VL, InterleavesWithoutTheConfigFlag) {
  const auto want = image_logits(test::model_dir("qwen3_vl"));
  test::EditedCheckpoint no_flag("qwen3_vl", [](json& c) { c["text_config"]["rope_scaling"].erase("mrope_interleaved"); });
  std::filesystem::create_symlink(test::model_dir("qwen3_vl") + "/preprocessor_config.json",
                                  no_flag.dir() + "/preprocessor_config.json");
  const auto got = image_logits(no_flag.dir());
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(test::max_abs_diff(got.data(), want.data(), int64_t(want.size())).max_abs, 0.0);
  // and the golden logits are those of the interleaved table (the chunked one is off by ~0.2, README mutation list)
  auto g = SafetensorsFile::open(test::model_dir("qwen3_vl") + "/golden.safetensors");
  Tensor gl = *g->get("img_150x90.logits");
  ASSERT_EQ(gl.numel(), int64_t(want.size()));
  EXPECT_LE(test::max_abs_diff(want.data(), gl.ptr<float>(), gl.numel()).max_abs, 1e-3);
}

TEST(Qwen3VL, MissingVisionTensorIsNamed) {
  const HfConfig cfg = *HfConfig::load(test::model_dir("qwen3_vl") + "/config.json");
  for (const std::string name : {"model.visual.merger.linear_fc2.weight", "model.visual.merger.norm.bias",
                                 "model.visual.deepstack_merger_list.1.norm.weight",
                                 "model.visual.deepstack_merger_list.0.linear_fc1.bias",
                                 "model.visual.pos_embed.weight", "model.visual.patch_embed.proj.bias"}) {
    auto set = SafetensorsSet::open_dir(test::model_dir("qwen3_vl"));
    ASSERT_TRUE(set.is_ok()) << set.status().message();
    auto tensors = set->tensors();
    ASSERT_EQ(tensors.erase(name), 1u) << name;
    MapWeightSource w(tensors);
    auto m = create_model(cfg, w);
    ASSERT_FALSE(m.is_ok()) << name;
    const std::string msg = m.status().message();
    EXPECT_NE(msg.find(name.substr(std::string("model.").size())), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    if (name.find("deepstack") != std::string::npos) {
      EXPECT_NE(msg.find("DeepStack merger"), std::string::npos) << msg;
    }
  }
}

TEST(Qwen3VL, DeepStackIndexOutsideTheTowerIsRefused) {
  test::EditedCheckpoint bad("qwen3_vl", [](json& c) { c["vision_config"]["deepstack_visual_indexes"] = {0, 3}; });
  auto m = load_model(bad.dir());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("deepstack_visual_indexes"), std::string::npos) << m.status().message();
}

TEST(Qwen3VL, ProcessorSizesAndRefusedImages) {
  auto lm = load_model(test::model_dir("qwen3_vl"));
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  auto pp = preprocessor_config_of(*lm);
  ASSERT_TRUE(pp.is_ok());
  auto proc = image_processor_for(*lm->model, *pp);
  ASSERT_TRUE(proc.is_ok()) << proc.status().message();
  EXPECT_EQ(proc->patch_size, 16);
  EXPECT_EQ(proc->min_pixels, 4096);
  EXPECT_EQ(proc->max_pixels, 65536);
  ThreadPool pool(2);
  auto image = [](int w, int h) {
    Image img;
    img.width = w;
    img.height = h;
    img.rgb.assign(size_t(w) * size_t(h) * 3, 128);
    return img;
  };
  // a tiny image is scaled up to min_pixels (HF's smart_resize), a huge one down to max_pixels
  auto tiny = encode_image(*lm->model, *proc, image(3, 2), pool);
  ASSERT_TRUE(tiny.is_ok()) << tiny.status().message();
  EXPECT_GE(int64_t(tiny->processed.resized_height) * tiny->processed.resized_width, 4096);
  auto big = encode_image(*lm->model, *proc, image(2000, 1500), pool);
  ASSERT_TRUE(big.is_ok()) << big.status().message();
  EXPECT_LE(int64_t(big->processed.resized_height) * big->processed.resized_width, 65536);
  EXPECT_EQ(big->features.dim(1), 3 * lm->model->info().n_embd);  // features + 2 DeepStack blocks
  // an aspect ratio HF refuses
  auto thin = encode_image(*lm->model, *proc, image(300, 1), pool);
  ASSERT_FALSE(thin.is_ok());
  EXPECT_NE(thin.status().message().find("aspect ratio"), std::string::npos) << thin.status().message();
  // a processor whose patch does not fit the tower
  auto wrong = image_processor_for(*lm->model, json{{"patch_size", 14}});
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("patch 14"), std::string::npos) << wrong.status().message();
}

}  // namespace
}  // namespace pipit
