// Qwen3.5 with images (Qwen3_5ForConditionalGeneration): every image case of the golden (one image, two images in
// prompt order) through the model's own processor, tower, placeholder expansion and M-RoPE positions, the hybrid
// decoder's residuals, linear-attention state and logits after the prefill (in one chunk, in chunks that split the
// images, token by token), and the greedy continuation with the KV cache + recurrent state; q8 / q4 files within
// bounds. Also the text case through the multimodal model, the mtp.* tensors left alone, and a checkpoint without
// the tower loading as the text model. The video case: frames sampled and patched as HF's video processor, the tower
// on them, the placeholder expanded with timestamps (runtime/multimodal_video.h), positions, logits, greedy ids.
// Goldens: ../shared/testdata/models/qwen3_5_vl (README.md there; the MTP tensors are not covered here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "format/safetensors.h"
#include "models/vision/video_processor.h"
#include "models/vision/vision_model.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "runtime/multimodal_video.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/models/model_test_util.h"
#include "tests/test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

using nlohmann::json;

constexpr double kPixelTol = 1e-6, kTol = 1e-3;
const char* const kArch = "qwen3_5_vl";

std::vector<int32_t> ids_of(const Tensor& t) { return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()}; }

// report.json: per case the media in prompt order ([["image", "img_64x64.png"], ...]).
std::vector<std::string> case_images(const std::string& name) {
  std::ifstream in(test::model_dir(kArch) + "/report.json");
  const json r = json::parse(in, nullptr, false);
  std::vector<std::string> files;
  if (r.is_discarded()) return files;
  for (const auto& item : r["cases"][name]["items"]) {
    if (item.at(0) != "image") return {};  // a video case: not covered here
    files.push_back(item.at(1).get<std::string>());
  }
  return files;
}

class Qwen35VL : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { test::load_suite_model(kArch, &lm_, &golden_); }
  static void TearDownTestSuite() { test::free_suite_model(&lm_, &golden_); }
  void SetUp() override {
    ASSERT_NE(lm_, nullptr);
    ASSERT_NE(lm_->model->vision(), nullptr) << "qwen3_5 with a vision tower loaded text-only";
    auto pp = preprocessor_config_of(*lm_);
    ASSERT_TRUE(pp.is_ok()) << pp.status().message();
    auto p = image_processor_for(*lm_->model, *pp);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    proc_ = *p;
  }
  static bool has(const std::string& key) { return golden_->has(GetParam() + "." + key); }
  static Tensor get(const std::string& key) { return test::golden_tensor(*golden_, GetParam() + "." + key); }
  static std::vector<int32_t> ids(const std::string& key) { return ids_of(get(key)); }
  int64_t V() const { return lm_->model->info().n_vocab; }

  // The case's images in prompt order through the processor and tower; `trace` collects the tower's named
  // intermediates of all images one after another (the golden runs them as one batch, rows concatenated).
  std::vector<EncodedImage> encode(std::map<std::string, std::vector<float>>* trace = nullptr) const {
    ThreadPool pool(2);
    TensorHook hook;
    if (trace)
      hook = [trace](const std::string& n, int layer, const Tensor& t) {
        auto& v = (*trace)[layer >= 0 ? n + "." + std::to_string(layer) : n];
        v.insert(v.end(), t.ptr<float>(), t.ptr<float>() + t.numel());
      };
    std::vector<EncodedImage> out;
    for (const auto& f : case_images(GetParam())) {
      auto img = load_image(test::model_dir(kArch) + "/" + f);
      EXPECT_TRUE(img.is_ok()) << img.status().message();
      if (!img.is_ok()) return {};
      auto e = encode_image(*lm_->model, proc_, *img, pool, hook);
      EXPECT_TRUE(e.is_ok()) << e.status().message();
      if (!e.is_ok()) return {};
      out.push_back(std::move(e).value());
    }
    return out;
  }
  MultimodalPrompt prompt(const std::vector<EncodedImage>& imgs,
                          const std::string& key = "input_ids_unexpanded") const {
    auto p = build_multimodal_prompt(*lm_->model, ids(key), imgs);
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    return p.is_ok() ? std::move(p).value() : MultimodalPrompt{};
  }

  static LoadedModel* lm_;
  static SafetensorsFile* golden_;
  ImageProcessorConfig proc_;
};
LoadedModel* Qwen35VL::lm_ = nullptr;
SafetensorsFile* Qwen35VL::golden_ = nullptr;

TEST_P(Qwen35VL, PixelValuesAndGrid) {
  const auto imgs = encode();
  ASSERT_FALSE(imgs.empty());
  std::vector<float> pv;
  std::vector<int32_t> grid;
  for (const auto& e : imgs) {
    pv.insert(pv.end(), e.processed.pixel_values.ptr<float>(),
              e.processed.pixel_values.ptr<float>() + e.processed.pixel_values.numel());
    grid.insert(grid.end(), e.processed.grid_thw.begin(), e.processed.grid_thw.end());
  }
  Tensor want = get("pixel_values");
  ASSERT_EQ(int64_t(pv.size()), want.numel());
  auto d = test::max_abs_diff(pv.data(), want.ptr<float>(), want.numel());
  std::printf("[ measure  ] %s pixel_values max |diff| %.3g\n", GetParam().c_str(), d.max_abs);
  EXPECT_LE(d.max_abs, kPixelTol) << "worst at element " << d.worst;
  EXPECT_EQ(grid, ids("image_grid_thw"));
}

TEST_P(Qwen35VL, VisionTowerAndIntermediates) {
  std::map<std::string, std::vector<float>> trace;
  const auto imgs = encode(&trace);
  ASSERT_FALSE(imgs.empty());
  EXPECT_EQ(lm_->model->vision()->vision_tokens().deepstack, 0);  // Qwen3.5 has no DeepStack
  std::vector<std::string> names = {"vision.patch_embed", "vision.pos_embed"};
  for (int i = 0; has("vision.block." + std::to_string(i)); ++i) names.push_back("vision.block." + std::to_string(i));
  for (const auto& n : names) {  // in order: the first that differs says where
    Tensor want = get(n);
    ASSERT_TRUE(trace.count(n)) << "no intermediate named " << n;
    ASSERT_EQ(int64_t(trace[n].size()), want.numel()) << n;
    auto d = test::max_abs_diff(trace[n].data(), want.ptr<float>(), want.numel());
    std::printf("[ measure  ] %s %s max |diff| %.3g\n", GetParam().c_str(), n.c_str(), d.max_abs);
    ASSERT_LE(d.max_abs, kTol) << "first difference at " << n << " element " << d.worst;
  }
  std::vector<float> feats;
  for (const auto& e : imgs) feats.insert(feats.end(), e.features.ptr<float>(), e.features.ptr<float>() + e.features.numel());
  Tensor want = get("vision_embeds");
  ASSERT_EQ(int64_t(feats.size()), want.numel());
  auto d = test::max_abs_diff(feats.data(), want.ptr<float>(), want.numel());
  std::printf("[ measure  ] %s vision_embeds max |diff| %.3g\n", GetParam().c_str(), d.max_abs);
  EXPECT_LE(d.max_abs, kTol) << "worst at element " << d.worst;
}

TEST_P(Qwen35VL, PlaceholderExpansionAndPositions) {
  const auto imgs = encode();
  ASSERT_FALSE(imgs.empty());
  MultimodalPrompt p = prompt(imgs);
  EXPECT_EQ(p.tokens, ids("input_ids"));
  EXPECT_EQ(p.mrope_pos, ids("position_ids"));
  EXPECT_EQ(p.rope_delta, ids("rope_deltas")[0]);
  MultimodalPrompt q = prompt(imgs, "input_ids");  // the processor's already-expanded ids: the same prompt
  EXPECT_EQ(q.tokens, p.tokens);
  EXPECT_EQ(q.mrope_pos, p.mrope_pos);
  EXPECT_EQ(q.embd_row, p.embd_row);
}

TEST_P(Qwen35VL, PrefillResidualsStateAndLogits) {
  const auto imgs = encode();
  ASSERT_FALSE(imgs.empty());
  MultimodalPrompt p = prompt(imgs);
  Tensor want = get("logits");
  // one chunk, chunks that cut the images (the state carries across), and token by token
  for (int n_batch : {512, 7, 1}) {
    Session s(*lm_->model, SessionOptions{.n_threads = 2, .n_batch = n_batch});
    std::map<std::string, std::vector<float>> trace;
    s.ctx().on_tensor = [&](const std::string& n, int layer, const Tensor& t) {
      if (n != "embd" && n != "l_out") return;
      auto& v = trace[layer >= 0 ? n + "." + std::to_string(layer) : n];
      v.insert(v.end(), t.ptr<float>(), t.ptr<float>() + t.numel());
    };
    auto r = s.eval(p, /*all_logits=*/true);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    s.ctx().on_tensor = nullptr;
    Tensor emb = get("inputs_embeds");
    ASSERT_EQ(int64_t(trace["embd"].size()), emb.numel());
    auto de = test::max_abs_diff(trace["embd"].data(), emb.ptr<float>(), emb.numel());
    EXPECT_LE(de.max_abs, kTol) << "inputs_embeds, worst at " << de.worst << " (n_batch " << n_batch << ")";
    for (int l = 0; has("llm.layer." + std::to_string(l)); ++l) {
      Tensor want_l = get("llm.layer." + std::to_string(l));
      auto& got = trace["l_out." + std::to_string(l)];
      ASSERT_EQ(int64_t(got.size()), want_l.numel());
      auto dl = test::max_abs_diff(got.data(), want_l.ptr<float>(), want_l.numel());
      std::printf("[ measure  ] %s n_batch %d llm.layer.%d max |diff| %.3g\n", GetParam().c_str(), n_batch, l,
                  dl.max_abs);
      EXPECT_LE(dl.max_abs, kTol) << "llm.layer." << l << " (n_batch " << n_batch << ")";
    }
    // linear-attention state after the prefill (HF layout: conv_state [1, conv_dim, K], recurrent [1, nv, dk, dv])
    const KvCache& kv = s.cache();
    for (int il = 0; il < kv.n_layer(); ++il) {
      if (!kv.is_recurrent(il)) continue;
      Tensor want_conv = get("llm.conv_state." + std::to_string(il));
      Tensor want_rec = get("llm.recurrent_state." + std::to_string(il));
      Tensor conv = kv.state(il, 0, 0), rec = kv.state(il, 0, 1);  // [K, C], [nv, dk, dv]
      const int64_t C = want_conv.dim(1), K = want_conv.dim(2);
      ASSERT_EQ(conv.shape(), std::vector<int64_t>({K, C}));
      double dc = 0;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t j = 0; j < K; ++j)
          dc = std::max(dc, double(std::fabs(conv.ptr<float>()[j * C + c] - want_conv.ptr<float>()[c * K + j])));
      ASSERT_EQ(rec.numel(), want_rec.numel());
      const double dr = test::max_abs_diff(rec.ptr<float>(), want_rec.ptr<float>(), rec.numel()).max_abs;
      std::printf("[ measure  ] %s n_batch %d layer %d: conv state %.3g, recurrent state %.3g\n", GetParam().c_str(),
                  n_batch, il, dc, dr);
      EXPECT_LE(dc, kTol) << "conv state of layer " << il << " (n_batch " << n_batch << ")";
      EXPECT_LE(dr, kTol) << "recurrent state of layer " << il << " (n_batch " << n_batch << ")";
    }
    ASSERT_EQ(r->numel(), want.numel());
    auto d = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel());
    std::printf("[ measure  ] %s n_batch %d logits max |diff| %.3g\n", GetParam().c_str(), n_batch, d.max_abs);
    EXPECT_LE(d.max_abs, kTol) << "worst at position " << d.worst / V() << ", token " << d.worst % V()
                               << " (n_batch " << n_batch << ")";
  }
}

TEST_P(Qwen35VL, GreedyContinuationWithCacheAndState) {
  const auto imgs = encode();
  ASSERT_FALSE(imgs.empty());
  MultimodalPrompt p = prompt(imgs);
  const auto want_ids = ids("greedy_ids");
  const auto want_pos = ids("greedy_position_ids");  // [3, 1, 16]: all rows equal
  Tensor want_logits = get("greedy_logits");
  Session s(*lm_->model, SessionOptions{.n_threads = 2});
  auto r = s.eval(p);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::vector<int32_t> got;
  double worst = 0;
  for (size_t k = 0; k < want_ids.size(); ++k) {
    const float* l = r->ptr<float>();
    worst = std::max(worst, test::max_abs_diff(l, want_logits.ptr<float>() + k * V(), V()).max_abs);
    const int32_t next = argmax(std::span<const float>(l, size_t(V())));
    got.push_back(next);
    if (next != want_ids[k]) break;
    EXPECT_EQ(s.n_past() + s.rope_delta(), want_pos[k]) << "decode position of step " << k;
    r = s.eval(std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
  }
  std::printf("[ measure  ] %s greedy_logits max |diff| %.3g\n", GetParam().c_str(), worst);
  EXPECT_EQ(got, want_ids);
  EXPECT_LE(worst, kTol);
}

// The whole model (tower, decoder; mtp.* carried along) from a q8 / q4 / q4_k_m .pipit file against the f32 goldens:
// relative RMS of the tower's features and of the prefill logits, and (q8) the last position's argmax. Bounds: the
// worst measured over the image cases times ~1.5 (q8 features 0.0147, logits 0.0778; q4 0.160, 0.643, at the commit
// that added this; q4_k_m 0.111, 0.441). q4_k_m on this tiny model: the matrices whose rows are 256 wide take q4_K /
// q5_K / q6_K (48 + 1 + 6), the 64- and 128-wide ones llama.cpp's fallbacks (q5_0, q8_0), as a real Qwen3.5's would not
// (its widths are multiples of 256). The logits' relative error is large because this random model's logits are small
// (max |logit| ~1) and the DeltaNet state carries every error on: the text-only qwen3_5 checkpoint measures
// 0.045 / 0.425 (tests/unit/convert_families_test.cpp).
TEST_P(Qwen35VL, QuantizedFileWithinBounds) {
  struct Bound {
    const char* quant;
    double features, logits;
  };
  const Bound bounds[] = {{"q8", 0.022, 0.12}, {"q4", 0.24, 0.96}, {"q4_k_m", 0.17, 0.66}};
  test::ScratchDir d("qwen35vl_quant");
  Tensor want_f = get("vision_embeds"), want_l = get("logits");
  const std::vector<float> want_feat(want_f.ptr<float>(), want_f.ptr<float>() + want_f.numel());
  const std::vector<float> want_logits(want_l.ptr<float>(), want_l.ptr<float>() + want_l.numel());
  for (const auto& b : bounds) {
    const std::string out = d.path(std::string(b.quant) + ".pipit");
    test::convert_or_fail(test::model_dir(kArch), out, b.quant);
    LoadedModel lq = test::load_or_fail(out);
    ASSERT_NE(lq.model->vision(), nullptr);
    ThreadPool pool(2);
    std::vector<EncodedImage> imgs;
    std::vector<float> feat;
    for (const auto& f : case_images(GetParam())) {
      auto img = load_image(test::model_dir(kArch) + "/" + f);
      ASSERT_TRUE(img.is_ok());
      auto e = encode_image(*lq.model, proc_, *img, pool);
      ASSERT_TRUE(e.is_ok()) << e.status().message();
      feat.insert(feat.end(), e->features.ptr<float>(), e->features.ptr<float>() + e->features.numel());
      imgs.push_back(std::move(e).value());
    }
    auto p = build_multimodal_prompt(*lq.model, ids("input_ids_unexpanded"), imgs);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    Session s(*lq.model, SessionOptions{.n_threads = 2});
    auto r = s.eval(*p, /*all_logits=*/true);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    const std::vector<float> got(r->ptr<float>(), r->ptr<float>() + r->numel());
    ASSERT_EQ(got.size(), want_logits.size());
    ASSERT_EQ(feat.size(), want_feat.size());
    const double ef = test::rel_rms(feat, want_feat), el = test::rel_rms(got, want_logits);
    const int64_t last = int64_t(got.size()) / V() - 1;
    const int32_t top = argmax(std::span<const float>(got.data() + last * V(), size_t(V())));
    const int32_t want_top = argmax(std::span<const float>(want_logits.data() + last * V(), size_t(V())));
    std::printf("[ measure  ] %s %s: relative RMS features %.5f (bound %.3f), logits %.5f (bound %.3f), last argmax "
                "%d vs %d\n", GetParam().c_str(), b.quant, ef, b.features, el, b.logits, top, want_top);
    EXPECT_LE(ef, b.features) << b.quant;
    EXPECT_LE(el, b.logits) << b.quant;
    EXPECT_GT(ef, 0.0) << b.quant << ": quantization changed nothing in the tower?";
    if (std::string(b.quant) == "q8") {
      EXPECT_EQ(top, want_top) << "q8: the last position's argmax moved";
    }
  }
}

std::vector<std::string> image_cases() {
  std::vector<std::string> v;
  auto g = SafetensorsFile::open(test::model_dir(kArch) + "/golden.safetensors");
  if (!g.is_ok()) return v;
  auto it = g->metadata().find("cases");
  if (it == g->metadata().end()) return v;
  std::stringstream ss(it->second);
  for (std::string c; std::getline(ss, c, ',');)
    if (g->has(c + ".pixel_values")) v.push_back(c);  // text and video cases have none
  return v;
}

INSTANTIATE_TEST_SUITE_P(Golden, Qwen35VL, ::testing::ValuesIn(image_cases()));

// Prefill + greedy of the golden's text case (no image: plain positions) on a loaded model.
void expect_text_case(Model& m, const std::string& what) {
  auto g = SafetensorsFile::open(test::model_dir(kArch) + "/golden.safetensors");
  ASSERT_TRUE(g.is_ok());
  const auto prompt = ids_of(*g->get("text.input_ids"));
  Tensor want = *g->get("text.logits");
  const auto want_ids = ids_of(*g->get("text.greedy_ids"));
  const int64_t V = m.info().n_vocab;
  Session s(m, SessionOptions{.n_threads = 2});
  auto r = s.eval(prompt, /*all_logits=*/true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->numel(), want.numel());
  auto d = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel());
  std::printf("[ measure  ] text case (%s) logits max |diff| %.3g\n", what.c_str(), d.max_abs);
  EXPECT_LE(d.max_abs, kTol) << what;
  std::vector<int32_t> got;
  int32_t next = argmax(std::span<const float>(r->ptr<float>() + (int64_t(prompt.size()) - 1) * V, size_t(V)));
  for (size_t k = 0; k < want_ids.size(); ++k) {
    got.push_back(next);
    auto st = s.eval(std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(st.is_ok()) << st.status().message();
    next = argmax(std::span<const float>(st->ptr<float>(), size_t(V)));
  }
  EXPECT_EQ(got, want_ids) << what;
}

TEST(Qwen35VLModel, TextCaseAndTheMtpTensorsLeftAlone) {
  auto lm = load_model(test::model_dir(kArch));
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  EXPECT_EQ(lm->model->info().arch, "qwen3_5");
  ASSERT_NE(lm->model->vision(), nullptr);
  const VisionTokens& vt = lm->model->vision()->vision_tokens();
  EXPECT_EQ(vt.image_token_id, 492);
  EXPECT_EQ(vt.vision_start_id, 489);
  EXPECT_EQ(vt.vision_end_id, 490);
  EXPECT_EQ(lm->model->media_positions(1, {}).value().n_stream, 3);  // M-RoPE: get_rope_index
  const auto& eos = lm->model->info().eos_ids;  // <|im_end|> (config), <|endoftext|> too (generation_config.json)
  EXPECT_NE(std::find(eos.begin(), eos.end(), 482), eos.end());
  expect_text_case(*lm->model, "multimodal model");
}

// The same checkpoint without its model.visual.* tensors (a text-only export of a Qwen3_5ForConditionalGeneration
// config) loads as the text model and gives the same text logits.
TEST(Qwen35VLModel, WithoutTheTowerLoadsAsText) {
  const HfConfig cfg = *HfConfig::load(test::model_dir(kArch) + "/config.json");
  auto set = SafetensorsSet::open_dir(test::model_dir(kArch));
  ASSERT_TRUE(set.is_ok()) << set.status().message();
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : set->tensors())
    if (name.rfind("model.visual.", 0) != 0) tensors[name] = t;
  MapWeightSource w(tensors);
  auto m = create_model(cfg, w);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->vision(), nullptr);
  expect_text_case(**m, "text-only load");
}

// A missing tower tensor is named (the tower is there, so the checkpoint is multimodal).
TEST(Qwen35VLModel, MissingVisionTensorIsNamed) {
  const HfConfig cfg = *HfConfig::load(test::model_dir(kArch) + "/config.json");
  for (const std::string name : {"model.visual.merger.linear_fc2.weight", "model.visual.pos_embed.weight",
                                 "model.visual.blocks.2.norm2.bias"}) {
    auto set = SafetensorsSet::open_dir(test::model_dir(kArch));
    ASSERT_TRUE(set.is_ok()) << set.status().message();
    auto tensors = set->tensors();
    ASSERT_EQ(tensors.erase(name), 1u) << name;
    MapWeightSource w(tensors);
    auto m = create_model(cfg, w);
    ASSERT_FALSE(m.is_ok()) << name;
    EXPECT_NE(m.status().message().find(name.substr(std::string("model.").size())), std::string::npos)
        << m.status().message();
  }
}

// HF's Qwen3.5 rotary always interleaves the M-RoPE streams: a config without mrope_interleaved gives the same
// image logits (and they are the golden's).
TEST(Qwen35VLModel, InterleavesWithoutTheConfigFlag) {
  auto logits = [](const std::string& dir) -> std::vector<float> {
    auto lm = load_model(dir);
    EXPECT_TRUE(lm.is_ok()) << lm.status().message();
    if (!lm.is_ok()) return {};
    auto g = SafetensorsFile::open(test::model_dir(kArch) + "/golden.safetensors");
    ThreadPool pool(2);
    auto p = prepare_multimodal_prompt(*lm, ids_of(*g->get("img_200x130.input_ids_unexpanded")),
                                       {test::model_dir(kArch) + "/img_200x130.png"}, {}, pool);
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    if (!p.is_ok()) return {};
    Session s(*lm->model, SessionOptions{.n_threads = 2});
    auto r = s.eval(*p, /*all_logits=*/true);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? std::vector<float>(r->ptr<float>(), r->ptr<float>() + r->numel()) : std::vector<float>{};
  };
  const auto want = logits(test::model_dir(kArch));
  test::EditedCheckpoint no_flag(kArch, [](json& c) { c["text_config"]["rope_parameters"].erase("mrope_interleaved"); });
  std::filesystem::create_symlink(test::model_dir(kArch) + "/preprocessor_config.json",
                                  no_flag.dir() + "/preprocessor_config.json");
  const auto got = logits(no_flag.dir());
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(test::max_abs_diff(got.data(), want.data(), int64_t(want.size())).max_abs, 0.0);
  auto g = SafetensorsFile::open(test::model_dir(kArch) + "/golden.safetensors");
  Tensor gl = *g->get("img_200x130.logits");
  ASSERT_EQ(gl.numel(), int64_t(want.size()));
  EXPECT_LE(test::max_abs_diff(want.data(), gl.ptr<float>(), gl.numel()).max_abs, kTol);
}

// The golden's video case: 8 frames at 4 fps -> 4 sampled frames, 2 temporal patches of 4x6 patches. The processor
// output and timestamps, the tower on the video (one attention segment per temporal patch), the placeholder
// expanded per temporal patch with its timestamp text (the golden's toy ids for the pieces '<', digits, '.',
// ' seconds', '>'), the positions (each temporal patch placed as a (1, h, w) image), logits and greedy ids.
TEST(Qwen35VLVideo, ProcessorTowerExpansionPositionsAndLogits) {
  const std::string dir = test::model_dir(kArch);
  auto g = SafetensorsFile::open(dir + "/golden.safetensors");
  ASSERT_TRUE(g.is_ok());
  auto lm = load_model(dir);
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  auto vpp = video_preprocessor_config_of(*lm);
  ASSERT_TRUE(vpp.is_ok()) << vpp.status().message();
  ASSERT_TRUE(vpp->is_object());
  auto vc = video_processor_for(*lm->model, *vpp);
  ASSERT_TRUE(vc.is_ok()) << vc.status().message();
  std::vector<Image> frames;
  for (int i = 0; i < 8; ++i) {
    auto f = load_image(dir + "/video_frame0" + std::to_string(i) + ".png");
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    frames.push_back(std::move(f).value());
  }
  const double fps = double(g->get("video.video_fps")->ptr<float>()[0]);
  ThreadPool pool(2);
  std::map<std::string, std::vector<float>> trace;
  auto ev = encode_video(*lm->model, *vc, frames, fps, pool, [&](const std::string& n, int layer, const Tensor& t) {
    trace[layer >= 0 ? n + "." + std::to_string(layer) : n].assign(t.ptr<float>(), t.ptr<float>() + t.numel());
  });
  ASSERT_TRUE(ev.is_ok()) << ev.status().message();
  const ProcessedVideo& pv = ev->processed;
  EXPECT_EQ(pv.frame_indices, ids_of(*g->get("video.video_frame_indices")));
  EXPECT_EQ(std::vector<int32_t>(pv.patches.grid_thw.begin(), pv.patches.grid_thw.end()),
            ids_of(*g->get("video.video_grid_thw")));
  Tensor want_ts = *g->get("video.video_timestamps");
  ASSERT_EQ(int64_t(pv.timestamps.size()), want_ts.numel());
  for (size_t i = 0; i < pv.timestamps.size(); ++i) EXPECT_EQ(float(pv.timestamps[i]), want_ts.ptr<float>()[i]);
  EXPECT_EQ(video_timestamp_text(pv.timestamps[0]), "<0.2 seconds>");  // 0.25: half to even, as Python
  EXPECT_EQ(video_timestamp_text(pv.timestamps[1]), "<1.5 seconds>");
  Tensor want_pv = *g->get("video.pixel_values_videos");
  ASSERT_EQ(pv.patches.pixel_values.numel(), want_pv.numel());
  auto dp = test::max_abs_diff(pv.patches.pixel_values.ptr<float>(), want_pv.ptr<float>(), want_pv.numel());
  std::printf("[ measure  ] video pixel_values_videos max |diff| %.3g\n", dp.max_abs);
  EXPECT_LE(dp.max_abs, kPixelTol);
  for (const std::string n : {"patch_embed", "pos_embed", "block.0", "block.1", "block.2"}) {
    Tensor want = *g->get("video.video_vision." + n);
    ASSERT_EQ(int64_t(trace["vision." + n].size()), want.numel()) << n;
    auto d = test::max_abs_diff(trace["vision." + n].data(), want.ptr<float>(), want.numel());
    std::printf("[ measure  ] video video_vision.%s max |diff| %.3g\n", n.c_str(), d.max_abs);
    ASSERT_LE(d.max_abs, kTol) << "first difference at video_vision." << n;
  }
  Tensor want_f = *g->get("video.video_embeds");
  ASSERT_EQ(ev->features.numel(), want_f.numel());
  auto df = test::max_abs_diff(ev->features.ptr<float>(), want_f.ptr<float>(), want_f.numel());
  std::printf("[ measure  ] video video_embeds max |diff| %.3g\n", df.max_abs);
  EXPECT_LE(df.max_abs, kTol);

  // the golden's toy tokenizer for timestamps: its pieces' ids, read off the expanded prompt (tokens 14..19 are
  // "<0.2 seconds>", then <|vision_start|>, 6 video tokens, <|vision_end|>, and 28..33 "<1.5 seconds>")
  const auto want_ids = ids_of(*g->get("video.input_ids"));
  std::map<std::string, int32_t> piece;
  const char* pieces[2][6] = {{"<", "0", ".", "2", " seconds", ">"}, {"<", "1", ".", "5", " seconds", ">"}};
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 6; ++j) piece[pieces[k][j]] = want_ids[size_t((k ? 28 : 14) + j)];
  int n_encoded = 0;
  TextEncoder encode = [&](const std::string& text) -> Result<std::vector<int32_t>> {
    ++n_encoded;
    std::vector<int32_t> out;
    for (size_t i = 0; i < text.size();) {  // '<', single characters, ' seconds', '>'
      const size_t len = text.compare(i, 8, " seconds") == 0 ? 8 : 1;
      auto it = piece.find(text.substr(i, len));
      if (it == piece.end()) return Error::invalid_argument("no toy id for '{}'", text.substr(i, len));
      out.push_back(it->second);
      i += len;
    }
    return out;
  };
  auto p = build_multimodal_prompt(*lm->model, ids_of(*g->get("video.input_ids_unexpanded")), {}, {*ev}, encode);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(n_encoded, 2);
  EXPECT_EQ(p->tokens, want_ids);
  EXPECT_EQ(p->mrope_pos, ids_of(*g->get("video.position_ids")));
  EXPECT_EQ(p->rope_delta, ids_of(*g->get("video.rope_deltas"))[0]);
  Session s(*lm->model, SessionOptions{.n_threads = 2, .n_batch = 7});  // chunks that cut the frame groups
  std::vector<float> embd;
  s.ctx().on_tensor = [&](const std::string& n, int, const Tensor& t) {
    if (n == "embd") embd.insert(embd.end(), t.ptr<float>(), t.ptr<float>() + t.numel());
  };
  auto r = s.eval(*p, /*all_logits=*/true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  s.ctx().on_tensor = nullptr;
  Tensor want_e = *g->get("video.inputs_embeds");
  ASSERT_EQ(int64_t(embd.size()), want_e.numel());
  EXPECT_LE(test::max_abs_diff(embd.data(), want_e.ptr<float>(), want_e.numel()).max_abs, kTol);
  Tensor want = *g->get("video.logits");
  ASSERT_EQ(r->numel(), want.numel());
  auto d = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel());
  std::printf("[ measure  ] video logits max |diff| %.3g\n", d.max_abs);
  EXPECT_LE(d.max_abs, kTol);
  // greedy with the KV cache + state, at T + k + rope_delta
  const int64_t V = lm->model->info().n_vocab;
  const auto want_greedy = ids_of(*g->get("video.greedy_ids"));
  const auto want_gpos = ids_of(*g->get("video.greedy_position_ids"));
  Tensor want_gl = *g->get("video.greedy_logits");
  std::vector<int32_t> got;
  double worst = 0;
  std::vector<float> last(r->ptr<float>() + (int64_t(p->tokens.size()) - 1) * V, r->ptr<float>() + r->numel());
  for (size_t k = 0; k < want_greedy.size(); ++k) {
    worst = std::max(worst, test::max_abs_diff(last.data(), want_gl.ptr<float>() + int64_t(k) * V, V).max_abs);
    const int32_t next = argmax(std::span<const float>(last));
    got.push_back(next);
    if (next != want_greedy[k]) break;
    EXPECT_EQ(s.n_past() + s.rope_delta(), want_gpos[k]) << "decode position of step " << k;
    auto st = s.eval(std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(st.is_ok()) << st.status().message();
    last.assign(st->ptr<float>(), st->ptr<float>() + V);
  }
  std::printf("[ measure  ] video greedy_logits max |diff| %.3g\n", worst);
  EXPECT_EQ(got, want_greedy);
  EXPECT_LE(worst, kTol);
}

// A 4-hour clip at 30 fps (432000 frames): sampling keeps max_frames (768) and only those are decoded, one at a time.
TEST(Qwen35VLVideo, LongClipDecodesOnlyTheSampledFrames) {
  int calls = 0;
  const FrameSource frame = [&calls](int32_t i) -> Result<Image> {
    ++calls;
    Image im;
    im.width = im.height = 32;
    im.rgb.assign(32 * 32 * 3, uint8_t(i % 251));
    return im;
  };
  auto pv = preprocess_video(4 * 3600 * 30, frame, 30.0, VideoProcessorConfig{});
  ASSERT_TRUE(pv.is_ok()) << pv.status().message();
  EXPECT_EQ(calls, 768);
  ASSERT_EQ(pv->frame_indices.size(), 768u);
  EXPECT_EQ(pv->frame_indices.back(), 4 * 3600 * 30 - 1);
  EXPECT_EQ(std::vector<int32_t>(pv->patches.grid_thw.begin(), pv->patches.grid_thw.end()),
            std::vector<int32_t>({384, 2, 2}));
  EXPECT_EQ(pv->timestamps.size(), 384u);
}

// Video input errors: a text-only model, a count mismatch, frames of different sizes, no frames.
TEST(Qwen35VLVideo, RefusedInputs) {
  auto lm = load_model(test::model_dir(kArch));
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  auto text = load_model(test::model_dir("qwen3_5"));
  ASSERT_TRUE(text.is_ok());
  EXPECT_FALSE(video_processor_for(*text->model, nullptr).is_ok());
  auto vc = video_processor_for(*lm->model, nullptr);
  ASSERT_TRUE(vc.is_ok()) << vc.status().message();
  ThreadPool pool(2);
  EXPECT_FALSE(encode_video(*lm->model, *vc, {}, 2.0, pool).is_ok());
  Image a, b;
  a.width = a.height = 64;
  a.rgb.assign(64 * 64 * 3, 100);
  b.width = 32;
  b.height = 64;
  b.rgb.assign(32 * 64 * 3, 100);
  std::vector<Image> mixed = {a, b};
  auto e = encode_video(*lm->model, *vc, mixed, 2.0, pool);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("one size"), std::string::npos) << e.status().message();
  std::vector<Image> two = {a, a};
  EXPECT_FALSE(encode_video(*lm->model, *vc, two, 0.0, pool).is_ok());  // no frame rate
  auto ok = encode_video(*lm->model, *vc, two, 2.0, pool);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  TextEncoder none = [](const std::string&) -> Result<std::vector<int32_t>> { return std::vector<int32_t>{}; };
  auto p = build_multimodal_prompt(*lm->model, std::vector<int32_t>{481, 10}, {}, {*ok}, none);  // no placeholder
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("0 video tokens for 1 video"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace pipit
