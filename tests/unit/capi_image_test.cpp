// Images through the C API (pipit_session_attach_image) on the tiny Qwen3-VL with the toy tokenizer of
// tests/data/vl_tokenizer: the greedy tokens equal those of the C++ path (chat template -> placeholders expanded
// with the encoded image -> Session), over two turns that keep the first turn's image, in raw mode, and with two
// images; plus the errors (text-only model, more placeholders than images). DeepSeek-OCR and Gemma 4 raw prompts give
// their goldens' tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "pipit/pipit.h"
#include "runtime/generator.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "format/safetensors.h"
#include "tests/deepseek_ocr_goldens.h"
#include "tests/test_util.h"
#include "tests/unit/capi_test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace pipit {
namespace {

class CapiImage : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.make_dir("capi_image", "qwen3_vl",
                {"config.json", "generation_config.json", "preprocessor_config.json", "model.safetensors"});
    c_.copy_tokenizer("vl_tokenizer");
    c_.open(4);
  }
  void TearDown() override { c_.close(); }
  static std::string image(const std::string& name) { return test::model_dir("qwen3_vl") + "/" + name + ".png"; }

  std::vector<int32_t> capi_generate(const std::string& prompt, int32_t chat) {
    std::vector<int32_t> got;
    auto cb = [](const char*, size_t, int32_t token, void* user) -> int32_t {
      static_cast<std::vector<int32_t>*>(user)->push_back(token);
      return 1;
    };
    EXPECT_EQ(pipit_session_generate(session_, prompt.c_str(), chat, &opt_, cb, &got), PIPIT_OK) << pipit_last_error();
    return got;
  }

  // The same through the C++ runtime on a fresh session: prompt ids -> placeholders filled -> greedy tokens.
  std::vector<int32_t> cpp_generate(const std::vector<int32_t>& ids, const std::vector<std::string>& images) {
    auto lm = load_model(dir_.string());
    EXPECT_TRUE(lm.is_ok()) << lm.status().message();
    Session s(*lm->model, SessionOptions{.n_threads = 2});
    auto mm = prepare_multimodal_prompt(*lm, ids, images, {}, s.pool());
    EXPECT_TRUE(mm.is_ok()) << mm.status().message();
    GenerateParams gp;
    gp.max_tokens = 4;
    gp.sampler.temperature = 0.0f;
    auto r = generate(s, lm->tokenizer.get(), *mm, gp);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r->tokens;
  }
  std::vector<int32_t> chat_ids(const std::string& messages) {
    auto lm = load_model(dir_.string());
    auto text = apply_chat_template(*lm->tokenizer, nlohmann::json::parse(messages), true);
    EXPECT_TRUE(text.is_ok()) << text.status().message();
    return *lm->tokenizer->encode(*text, false);
  }

  test::CapiGolden c_;
  fs::path& dir_ = c_.dir;
  pipit_model*& model_ = c_.model;
  pipit_session*& session_ = c_.session;
  pipit_generate_options& opt_ = c_.opt;
};

TEST_F(CapiImage, ChatTurnsKeepTheirImages) {
  const std::string turn1 = R"([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe."}]}])";
  ASSERT_EQ(pipit_session_attach_image(session_, image("img_150x90").c_str()), PIPIT_OK) << pipit_last_error();
  const auto got1 = capi_generate(turn1, 1);
  ASSERT_EQ(got1.size(), 4u);
  EXPECT_EQ(got1, cpp_generate(chat_ids(turn1), {image("img_150x90")}));
  // the second turn repeats the first turn's image part and adds a new image
  const std::string turn2 = R"([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe."}]},)"
                            R"({"role": "assistant", "content": "abc"},)"
                            R"({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "And?"}]}])";
  ASSERT_EQ(pipit_session_attach_image(session_, image("img_256x160").c_str()), PIPIT_OK);
  const auto got2 = capi_generate(turn2, 1);
  EXPECT_EQ(got2, cpp_generate(chat_ids(turn2), {image("img_150x90"), image("img_256x160")}));
  // and keeps the first turn's KV, its image rows included: only the answer and the new turn are evaluated
  int32_t n_prompt = 0, n_reused = 0, n_evaluated = 0;
  ASSERT_EQ(pipit_session_prompt_stats(session_, &n_prompt, &n_reused, &n_evaluated), PIPIT_OK);
  EXPECT_GT(n_reused, int32_t(chat_ids(turn1).size())) << "the first image's rows are reused";
  EXPECT_EQ(n_evaluated, n_prompt - n_reused);
  // a placeholder without an image: one clear error, and the session stays usable
  const std::string turn3 = turn2.substr(0, turn2.size() - 1) +
                            R"(,{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "?"}]}])";
  EXPECT_EQ(pipit_session_generate(session_, turn3.c_str(), 1, &opt_, nullptr, nullptr), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pipit_last_error()).find("3 image tokens for 2 image(s)"), std::string::npos)
      << pipit_last_error();
  ASSERT_EQ(pipit_session_reset(session_), PIPIT_OK);
  EXPECT_EQ(capi_generate(R"([{"role": "user", "content": "hi"}])", 1).size(), 4u);
}

TEST_F(CapiImage, RawPromptPutsTheImageFirst) {
  ASSERT_EQ(pipit_session_attach_image(session_, image("img_256x160").c_str()), PIPIT_OK);
  const auto got = capi_generate("Describe", 0);
  auto lm = load_model(dir_.string());
  std::vector<int32_t> ids = *lm->tokenizer->encode("Describe", true);
  const auto marks = image_placeholder_tokens(*lm->model);
  const bool bos = !ids.empty() && ids[0] == lm->model->info().bos_id;
  ids.insert(ids.begin() + (bos ? 1 : 0), marks.begin(), marks.end());
  EXPECT_EQ(got, cpp_generate(ids, {image("img_256x160")}));
}

TEST_F(CapiImage, TextOnlyModelRefusesImages) {
  pipit_model* text = nullptr;
  ASSERT_EQ(pipit_model_load(test::model_dir("stories260k").c_str(), nullptr, &text), PIPIT_OK) << pipit_last_error();
  pipit_session* s = nullptr;
  ASSERT_EQ(pipit_session_create(text, nullptr, &s), PIPIT_OK);
  EXPECT_EQ(pipit_session_attach_image(s, image("img_150x90").c_str()), PIPIT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(pipit_last_error()).find("no vision tower"), std::string::npos) << pipit_last_error();
  EXPECT_EQ(pipit_session_attach_image(s, nullptr), PIPIT_ERR_INVALID_ARGUMENT);
  pipit_session_destroy(s);
  pipit_model_destroy(text);
  // a broken image path is named at the generation that needs it, and dropped
  ASSERT_EQ(pipit_session_attach_image(session_, (dir_ / "missing.png").c_str()), PIPIT_OK);
  EXPECT_NE(pipit_session_generate(session_, "x", 0, &opt_, nullptr, nullptr), PIPIT_OK);
  EXPECT_NE(std::string(pipit_last_error()).find("missing.png"), std::string::npos) << pipit_last_error();
  EXPECT_EQ(capi_generate("x", 0).size(), 4u);
}

// DeepSeek-OCR through the C API: the tiny checkpoint of tests/reference/deepseek_ocr_vision.py (with its toy
// tokenizer) plus a preprocessor_config.json that selects Base mode (base_size = image_size = 1024, no crops); the raw
// prompt "\nFree OCR." with one attached image gets its placeholder after BOS (the remote code's plain format), and
// the greedy tokens are the reference's.
TEST(CapiImageDeepseekOcr, RawPromptGivesTheGoldenTokens) {
  const std::string d = test::deepseek_ocr_goldens();
  ASSERT_FALSE(d.empty()) << "the DeepSeek-OCR goldens could not be made (see stderr)";
  const fs::path m = fs::temp_directory_path() / ("pipit_capi_dsocr_" + std::to_string(::getpid()));
  fs::remove_all(m);
  fs::create_directories(m);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    fs::create_symlink(d + "/model/" + f, m / f);
  std::ofstream(m / "preprocessor_config.json") << R"({"base_size": 1024, "image_size": 1024, "crop_mode": false})";
  auto g = SafetensorsFile::open(d + "/golden_base.safetensors");
  ASSERT_TRUE(g.is_ok());
  Tensor gi = *g->get("greedy_ids");
  const std::vector<int32_t> want(gi.ptr<int32_t>(), gi.ptr<int32_t>() + gi.numel());

  pipit_model* model = nullptr;
  pipit_session* session = nullptr;
  ASSERT_EQ(pipit_model_load(m.c_str(), nullptr, &model), PIPIT_OK) << pipit_last_error();
  pipit_session_options so;  // the f32 cache the goldens were made for
  pipit_session_options_default(&so);
  so.n_threads = 2;
  so.kv_type = PIPIT_KV_F32;
  ASSERT_EQ(pipit_session_create(model, &so, &session), PIPIT_OK) << pipit_last_error();
  pipit_generate_options opt;
  pipit_generate_options_default(&opt);
  opt.temperature = 0.0f;
  opt.max_tokens = int32_t(want.size());
  ASSERT_EQ(pipit_session_attach_image(session, (d + "/img_base_700x500.png").c_str()), PIPIT_OK)
      << pipit_last_error();
  std::vector<int32_t> got;
  auto cb = [](const char*, size_t, int32_t token, void* user) -> int32_t {
    static_cast<std::vector<int32_t>*>(user)->push_back(token);
    return 1;
  };
  EXPECT_EQ(pipit_session_generate(session, "\nFree OCR.", 0, &opt, cb, &got), PIPIT_OK) << pipit_last_error();
  EXPECT_EQ(got, want);
  pipit_session_destroy(session);
  pipit_model_destroy(model);
  fs::remove_all(m);
}

// Gemma 4 through the C API: the tiny checkpoint with the toy tokenizer of tests/data/gemma4_tokenizer; the golden
// image prompt as raw text with its <bos> (the toy tokenizer adds none; its <|image|> placeholder takes the attached image: <|image> + 63 soft tokens +
// <image|>) gives the golden 32 greedy ids.
TEST(CapiImageGemma4, RawPromptGivesTheGoldenTokens) {
  const fs::path m = fs::temp_directory_path() / ("pipit_capi_gemma4_" + std::to_string(::getpid()));
  fs::remove_all(m);
  fs::create_directories(m);
  for (const char* f : {"config.json", "generation_config.json", "preprocessor_config.json", "model.safetensors"})
    fs::create_symlink(test::model_dir("gemma4") + "/" + f, m / f);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(std::string(PIPIT_SOURCE_DIR) + "/tests/data/gemma4_tokenizer/" + f, m / f);
  auto g = SafetensorsFile::open(test::model_dir("gemma4") + "/golden.safetensors");
  ASSERT_TRUE(g.is_ok());
  Tensor gi = *g->get("image.greedy_ids");
  const std::vector<int32_t> want(gi.ptr<int32_t>(), gi.ptr<int32_t>() + gi.numel());

  pipit_model* model = nullptr;
  pipit_session* session = nullptr;
  ASSERT_EQ(pipit_model_load(m.c_str(), nullptr, &model), PIPIT_OK) << pipit_last_error();
  pipit_session_options so;  // the f32 cache the goldens were made for
  pipit_session_options_default(&so);
  so.n_threads = 2;
  so.kv_type = PIPIT_KV_F32;
  ASSERT_EQ(pipit_session_create(model, &so, &session), PIPIT_OK) << pipit_last_error();
  pipit_generate_options opt;
  pipit_generate_options_default(&opt);
  opt.temperature = 0.0f;
  opt.max_tokens = int32_t(want.size());
  ASSERT_EQ(pipit_session_attach_image(session, (test::model_dir("gemma4") + "/img_200x150.png").c_str()), PIPIT_OK)
      << pipit_last_error();
  std::vector<int32_t> got;
  auto cb = [](const char*, size_t, int32_t token, void* user) -> int32_t {
    static_cast<std::vector<int32_t>*>(user)->push_back(token);
    return 1;
  };
  EXPECT_EQ(pipit_session_generate(session, "<bos><|turn>user\n<|image|>Describe this image.<turn|>\n<|turn>model\nSure, here",
                                   0, &opt, cb, &got), PIPIT_OK) << pipit_last_error();
  EXPECT_EQ(got, want);
  pipit_session_destroy(session);
  pipit_model_destroy(model);
  fs::remove_all(m);
}

}  // namespace
}  // namespace pipit
