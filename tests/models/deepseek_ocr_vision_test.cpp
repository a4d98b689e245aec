// DeepSeek-OCR, whole: image in, exact tokens out, against the PyTorch reference tests/reference/
// deepseek_ocr_vision.py (DeepEncoder, projector, layout tokens and preprocessing modes following the remote code;
// the decoder through ../shared/testdata/reference/deepseek_ocr.py). The reference writes a tiny random checkpoint
// in the real checkpoint's layout (real view sizes: 1024 global view, 640 tiles) and goldens for Base mode
// (700x500 image: pad path) and Gundam (1000x700: 3x2 tiles + global view); they are too large to commit
// (tests/deepseek_ocr_goldens.h makes them in the build folder on first use).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include <unistd.h>

#include "format/safetensors.h"
#include "models/vision/vision_model.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/deepseek_ocr_goldens.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

constexpr double kPixelTol = 1e-4, kTol = 1e-3;
namespace fs = std::filesystem;

class DeepseekOcrVision : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::deepseek_ocr_goldens();
    ASSERT_FALSE(dir_.empty()) << "the DeepSeek-OCR goldens could not be made (see stderr)";
    auto m = load_model(dir_ + "/model");
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    lm_ = std::make_unique<LoadedModel>(std::move(m).value());
    ASSERT_NE(lm_->model->vision(), nullptr);
  }
  ImageProcessorConfig processor(const std::string& mode) {
    auto p = image_processor_for(*lm_->model, nlohmann::json(), ImageOptions{.mode = mode});
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    return p.is_ok() ? *p : ImageProcessorConfig{};
  }

  // Everything for one case: preprocessing, every named stage of the global view, the image rows, the prompt
  // rendered as infer() does, prefill logits (whole and in chunks that split the image), greedy ids.
  void check_case(const std::string& mode, const std::string& image) {
    auto g = SafetensorsFile::open(dir_ + "/golden_" + mode + ".safetensors");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    auto get = [&](const std::string& k) {
      auto t = g->get(k);
      EXPECT_TRUE(t.is_ok()) << "golden has no " << k;
      return t.is_ok() ? *t : Tensor();
    };
    auto ids = [&](const std::string& k) {
      Tensor t = get(k);
      return std::vector<int32_t>(t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel());
    };
    auto img = load_image(dir_ + "/" + image);
    ASSERT_TRUE(img.is_ok()) << img.status().message();
    std::map<std::string, std::vector<float>> trace;
    TensorHook hook = [&](const std::string& n, int layer, const Tensor& t) {
      trace[layer >= 0 ? n + "." + std::to_string(layer) : n].assign(t.ptr<float>(), t.ptr<float>() + t.numel());
    };
    ThreadPool pool(2);
    auto e = encode_image(*lm_->model, processor(mode), *img, pool, hook);
    ASSERT_TRUE(e.is_ok()) << e.status().message();

    // preprocessing: the global view, the tiles and their grid
    Tensor pv = get("pixel_values");
    ASSERT_EQ(e->processed.pixel_values.numel(), pv.numel());
    EXPECT_LE(test::max_abs_diff(e->processed.pixel_values.ptr<float>(), pv.ptr<float>(), pv.numel()).max_abs,
              kPixelTol);
    const auto ratio = ids("crop_ratio");
    EXPECT_EQ(e->processed.crop_cols, ratio[0]);
    EXPECT_EQ(e->processed.crop_rows, ratio[1]);
    ASSERT_EQ(e->processed.crops.defined(), g->has("pixel_values_crops"));
    if (g->has("pixel_values_crops")) {
      Tensor pc = get("pixel_values_crops");
      ASSERT_EQ(e->processed.crops.numel(), pc.numel());
      EXPECT_LE(test::max_abs_diff(e->processed.crops.ptr<float>(), pc.ptr<float>(), pc.numel()).max_abs, kPixelTol);
    }
    // stages in order: the first that differs says where a bug is
    std::vector<std::string> names = {"vision.sam.embed"};
    for (int i = 0; g->has("vision.sam.block." + std::to_string(i)); ++i) names.push_back("vision.sam.block." + std::to_string(i));
    names.insert(names.end(), {"vision.sam.neck", "vision.sam.out", "vision.clip.embed"});
    for (int i = 0; g->has("vision.clip.block." + std::to_string(i)); ++i) names.push_back("vision.clip.block." + std::to_string(i));
    EXPECT_GE(names.size(), 8u);
    for (const auto& n : names) {
      Tensor want = get(n);
      ASSERT_TRUE(trace.count(n)) << "no stage named " << n;
      ASSERT_EQ(int64_t(trace[n].size()), want.numel()) << n;
      auto d = test::max_abs_diff(trace[n].data(), want.ptr<float>(), want.numel());
      ASSERT_LE(d.max_abs, kTol) << "first difference at " << n << " element " << d.worst;
    }
    Tensor ve = get("vision_embeds");
    ASSERT_EQ(e->features.numel(), ve.numel());
    auto dv = test::max_abs_diff(e->features.ptr<float>(), ve.ptr<float>(), ve.numel());
    EXPECT_LE(dv.max_abs, kTol) << "vision_embeds row " << dv.worst / e->features.dim(1);

    // the prompt: "<image>\nFree OCR." in infer()'s plain format is BOS, the image's tokens, the text after it;
    // a raw prompt (BOS + text) gets its placeholder after BOS, which expands to the same ids
    const auto want_ids = ids("input_ids");
    const int64_t n_img = e->features.dim(0);
    std::vector<int32_t> raw = {want_ids[0]};
    raw.insert(raw.end(), want_ids.begin() + 1 + n_img, want_ids.end());
    auto p = build_multimodal_prompt(*lm_->model, with_image_placeholders_for_test(raw), {*e});
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    EXPECT_EQ(p->tokens, want_ids);

    const int64_t V = lm_->model->info().n_vocab;
    Tensor want = get("logits");
    for (int n_batch : {512, 100}) {  // one chunk; chunks that split the image
      Session s(*lm_->model, SessionOptions{.n_threads = 2, .n_batch = n_batch});
      std::vector<float> embd;
      std::map<int, std::vector<float>> layers;
      s.ctx().on_tensor = [&](const std::string& n, int layer, const Tensor& t) {
        if (n == "embd") embd.insert(embd.end(), t.ptr<float>(), t.ptr<float>() + t.numel());
        if (n == "l_out") layers[layer].insert(layers[layer].end(), t.ptr<float>(), t.ptr<float>() + t.numel());
      };
      auto r = s.eval(*p, /*all_logits=*/true);
      ASSERT_TRUE(r.is_ok()) << r.status().message();
      Tensor ie = get("inputs_embeds");
      ASSERT_EQ(int64_t(embd.size()), ie.numel());
      EXPECT_LE(test::max_abs_diff(embd.data(), ie.ptr<float>(), ie.numel()).max_abs, kTol) << "inputs_embeds";
      for (int l = 0; g->has("llm.layer." + std::to_string(l)); ++l) {
        Tensor wl = get("llm.layer." + std::to_string(l));
        ASSERT_EQ(int64_t(layers[l].size()), wl.numel());
        EXPECT_LE(test::max_abs_diff(layers[l].data(), wl.ptr<float>(), wl.numel()).max_abs, kTol) << "layer " << l;
      }
      ASSERT_EQ(r->numel(), want.numel());
      auto d = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel());
      EXPECT_LE(d.max_abs, kTol) << "logits worst at position " << d.worst / V << " (n_batch " << n_batch << ")";
    }
    // greedy continuation with the KV cache
    Session s(*lm_->model, SessionOptions{.n_threads = 2});
    auto r = s.eval(*p);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    std::vector<int32_t> got;
    const auto want_greedy = ids("greedy_ids");
    for (size_t k = 0; k < want_greedy.size(); ++k) {
      const int32_t next = argmax(std::span<const float>(r->ptr<float>(), size_t(V)));
      got.push_back(next);
      r = s.eval(std::span<const int32_t>(&next, 1));
      ASSERT_TRUE(r.is_ok()) << r.status().message();
    }
    EXPECT_EQ(got, want_greedy);
  }
  std::vector<int32_t> with_image_placeholders_for_test(const std::vector<int32_t>& ids) {
    // as cli/image_args.cpp with_image_placeholders: one placeholder after BOS
    std::vector<int32_t> out = ids;
    out.insert(out.begin() + 1, lm_->model->vision()->vision_tokens().image_token_id);
    return out;
  }

  std::string dir_;
  std::unique_ptr<LoadedModel> lm_;
};

TEST_F(DeepseekOcrVision, BaseModeMatchesReference) { check_case("base", "img_base_700x500.png"); }

TEST_F(DeepseekOcrVision, GundamTilesMatchReference) { check_case("gundam", "img_gundam_1000x700.png"); }

// Token counts of every mode (the remote code's id layout) and the defaults (infer()'s: Gundam, no_repeat_ngram 20).
TEST_F(DeepseekOcrVision, ModesAndTokenCounts) {
  auto def = image_processor_for(*lm_->model, nlohmann::json());
  ASSERT_TRUE(def.is_ok());
  EXPECT_EQ(lm_->model->info().no_repeat_ngram_size, 20);  // infer()'s generation setting, every front end's default
  EXPECT_TRUE(def->crop_mode);
  EXPECT_EQ(def->base_size, 1024);
  EXPECT_EQ(def->image_size, 640);
  Image small;  // <= 640 on both sides: Gundam takes no tiles
  small.width = 300;
  small.height = 200;
  small.rgb.assign(300 * 200 * 3, 90);
  const std::map<std::string, int64_t> want = {{"tiny", 8 * 9 + 1}, {"small", 10 * 11 + 1}, {"base", 16 * 17 + 1},
                                               {"large", 20 * 21 + 1}, {"gundam", 16 * 17 + 1}};
  for (const auto& [mode, n] : want) {
    auto pi = preprocess_image(small, processor(mode));
    ASSERT_TRUE(pi.is_ok()) << mode << ": " << pi.status().message();
    EXPECT_EQ(lm_->model->vision()->n_image_tokens(*pi), n) << mode;
    EXPECT_FALSE(pi->crops.defined()) << mode;
  }
  // a wide image in Gundam: the 3x1 grid of 640 tiles (aspect 3), 273 + 10 * (30 + 1) tokens
  Image wide;
  wide.width = 1920;
  wide.height = 640;
  wide.rgb.assign(size_t(1920) * 640 * 3, 200);
  auto pw = preprocess_image(wide, processor("gundam"));
  ASSERT_TRUE(pw.is_ok()) << pw.status().message();
  EXPECT_EQ(pw->crop_cols, 3);
  EXPECT_EQ(pw->crop_rows, 1);
  EXPECT_EQ(lm_->model->vision()->n_image_tokens(*pw), 273 + 10 * 31);
}

TEST_F(DeepseekOcrVision, BadInputIsOneClearError) {
  // unknown mode
  auto p = image_processor_for(*lm_->model, nlohmann::json(), ImageOptions{.mode = "huge"});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("unknown DeepSeek-OCR mode 'huge'"), std::string::npos) << p.status().message();
  // crop mode with another tile size than the remote code's 640
  auto q = image_processor_for(*lm_->model, nlohmann::json{{"image_size", 1024}, {"crop_mode", true}});
  ASSERT_FALSE(q.is_ok());
  EXPECT_NE(q.status().message().find("crop mode needs image_size 640"), std::string::npos) << q.status().message();
  // an image too thin for the padded view (a side would round to 0 pixels)
  Image thin;
  thin.width = 5000;
  thin.height = 1;
  thin.rgb.assign(5000 * 3, 10);
  auto pi = preprocess_image(thin, processor("base"));
  ASSERT_FALSE(pi.is_ok());
  EXPECT_NE(pi.status().message().find("too elongated"), std::string::npos) << pi.status().message();
  // a checkpoint without the projector
  auto st = SafetensorsFile::open(dir_ + "/model/model.safetensors");
  ASSERT_TRUE(st.is_ok());
  std::vector<std::pair<std::string, Tensor>> kept;
  for (const auto& [n, t] : st->tensors())
    if (n.rfind("model.projector.", 0) != 0) kept.push_back({n, t});
  const std::string d = (fs::temp_directory_path() / ("pipit_dsocr_noproj_" + std::to_string(::getpid()))).string();
  fs::create_directories(d);
  fs::copy_file(dir_ + "/model/config.json", d + "/config.json", fs::copy_options::overwrite_existing);
  ASSERT_TRUE(write_safetensors(d + "/model.safetensors", kept).is_ok());
  auto m = load_model(d);
  fs::remove_all(d);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("model.projector.layers.weight"), std::string::npos) << m.status().message();
  // an image option a text-only DeepSeek-OCR decoder cannot take
  auto lmonly = load_model(test::model_dir("deepseek_ocr_lm"));
  if (lmonly.is_ok()) {
    EXPECT_EQ(lmonly->model->vision(), nullptr);
    auto r = image_processor_for(*lmonly->model, nlohmann::json(), ImageOptions{.mode = "base"});
    EXPECT_FALSE(r.is_ok());
  }
}

}  // namespace
}  // namespace pipit
