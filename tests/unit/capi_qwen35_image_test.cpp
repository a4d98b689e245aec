// Images through the C API on Qwen3.5 (pipit_session_attach_image, the path every front end takes): the tiny
// qwen3_5_vl checkpoint has no tokenizer, so stories260k's (the same 512 ids) goes next to it with the Qwen
// special tokens added at the checkpoint's ids (<|im_start|> 481, <|vision_start|> 489, <|image_pad|> 492, ...) and
// the Qwen-VL chat template of tests/data/vl_tokenizer. Greedy tokens over two chat turns with an image each (the
// second reuses the first turn's prefix: KV rows and recurrent state), and of a turn with a video given as frames
// (pipit_session_attach_video_frames), equal those of the C++ path on a fresh session.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "pipit/pipit.h"
#include "runtime/generator.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "runtime/multimodal_video.h"
#include "models/vision/video_file.h"
#include "tests/test_util.h"
#include "tests/unit/capi_test_util.h"
#include "tests/test_video_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace pipit {
namespace {

using nlohmann::json;

class CapiQwen35Image : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.make_dir("capi_qwen35_image", "qwen3_5_vl", {"config.json", "generation_config.json",
                                                    "preprocessor_config.json", "video_preprocessor_config.json",
                                                    "model.safetensors"});
    // HF's tokenizer gives an added token the vocab's id for its content: the special tokens take the places of
    // the vocab pieces at those ids (single characters, which then fall back to bytes), merges using them dropped
    std::ifstream tin(test::model_dir("stories260k") + "/tokenizer.json");
    json tok = json::parse(tin);
    json& vocab = tok["model"]["vocab"];
    std::set<std::string> gone;
    for (const auto& [id, content] : std::vector<std::pair<int, const char*>>{
             {480, "<|endoftext|>"}, {481, "<|im_start|>"}, {482, "<|im_end|>"}, {489, "<|vision_start|>"},
             {490, "<|vision_end|>"}, {492, "<|image_pad|>"}, {493, "<|video_pad|>"}}) {
      for (auto it = vocab.begin(); it != vocab.end(); ++it)
        if (it.value() == id) {
          gone.insert(it.key());
          vocab.erase(it);
          break;
        }
      vocab[content] = id;
      tok["added_tokens"].push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                                     {"rstrip", false}, {"normalized", false}, {"special", true}});
    }
    json merges = json::array();
    for (const auto& m : tok["model"]["merges"]) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (!gone.count(s.substr(0, sp)) && !gone.count(s.substr(sp + 1))) merges.push_back(m);
    }
    tok["model"]["merges"] = merges;
    std::ofstream(dir_ / "tokenizer.json") << tok.dump();
    std::ifstream cfg_in(std::string(PIPIT_SOURCE_DIR) + "/tests/data/vl_tokenizer/tokenizer_config.json");
    const json vl = json::parse(cfg_in);
    std::ofstream(dir_ / "tokenizer_config.json")
        << json{{"bos_token", nullptr}, {"eos_token", "<|im_end|>"}, {"chat_template", vl["chat_template"]}}.dump();
    c_.open(6);
  }
  void TearDown() override { c_.close(); }
  static std::string image(const std::string& name) { return test::model_dir("qwen3_5_vl") + "/" + name + ".png"; }

  std::vector<int32_t> capi_generate(const std::string& prompt, int32_t chat) {
    std::vector<int32_t> got;
    auto cb = [](const char*, size_t, int32_t token, void* user) -> int32_t {
      if (token >= 0) static_cast<std::vector<int32_t>*>(user)->push_back(token);
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
    if (!mm.is_ok()) return {};
    EXPECT_LT(mm->rope_delta, 0);  // the image's 3-D positions are in use
    GenerateParams gp;
    gp.max_tokens = opt_.max_tokens;
    gp.sampler.temperature = 0.0f;
    auto r = generate(s, lm->tokenizer.get(), *mm, gp);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? r->tokens : std::vector<int32_t>{};
  }
  std::vector<int32_t> chat_ids(const std::string& messages) {
    auto lm = load_model(dir_.string());
    auto text = apply_chat_template(*lm->tokenizer, json::parse(messages), true);
    EXPECT_TRUE(text.is_ok()) << text.status().message();
    return *lm->tokenizer->encode(*text, false);
  }

  test::CapiGolden c_;
  fs::path& dir_ = c_.dir;
  pipit_model*& model_ = c_.model;
  pipit_session*& session_ = c_.session;
  pipit_generate_options& opt_ = c_.opt;
};

TEST_F(CapiQwen35Image, ChatTurnsWithImagesMatchTheRuntime) {
  const std::string turn1 = R"([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe."}]}])";
  const auto ids1 = chat_ids(turn1);
  ASSERT_EQ(std::count(ids1.begin(), ids1.end(), 492), 1) << "the template's <|image_pad|> is one token";
  ASSERT_EQ(pipit_session_attach_image(session_, image("img_200x130").c_str()), PIPIT_OK) << pipit_last_error();
  const auto got1 = capi_generate(turn1, 1);
  ASSERT_EQ(got1.size(), size_t(opt_.max_tokens));
  EXPECT_EQ(got1, cpp_generate(ids1, {image("img_200x130")}));
  // the second turn repeats the first turn's image part and adds a second image
  const std::string turn2 = R"([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe."}]},)"
                            R"({"role": "assistant", "content": "abc"},)"
                            R"({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "And?"}]}])";
  ASSERT_EQ(pipit_session_attach_image(session_, image("img_64x64").c_str()), PIPIT_OK);
  const auto got2 = capi_generate(turn2, 1);
  EXPECT_EQ(got2, cpp_generate(chat_ids(turn2), {image("img_200x130"), image("img_64x64")}));
}

TEST_F(CapiQwen35Image, VideoFramesMatchTheRuntime) {
  std::vector<std::string> files;
  for (int i = 0; i < 8; ++i) files.push_back(test::model_dir("qwen3_5_vl") + "/video_frame0" + std::to_string(i) + ".png");
  std::vector<const char*> paths;
  for (const auto& f : files) paths.push_back(f.c_str());
  const std::string turn = R"([{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What?"}]}])";
  ASSERT_EQ(pipit_session_attach_video_frames(session_, paths.data(), int32_t(paths.size()), 4.0), PIPIT_OK)
      << pipit_last_error();
  const auto got = capi_generate(turn, 1);
  ASSERT_EQ(got.size(), size_t(opt_.max_tokens));
  // the C++ path: frames -> video processor -> tower -> placeholder expanded with timestamps -> greedy
  auto lm = load_model(dir_.string());
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  Session s(*lm->model, SessionOptions{.n_threads = 2});
  std::vector<Image> frames;
  for (const auto& f : files) frames.push_back(*load_image(f));
  auto vpp = video_preprocessor_config_of(*lm);
  ASSERT_TRUE(vpp.is_ok() && vpp->is_object());
  auto vproc = video_processor_for(*lm->model, *vpp);
  ASSERT_TRUE(vproc.is_ok()) << vproc.status().message();
  auto ev = encode_video(*lm->model, *vproc, frames, 4.0, s.pool());
  ASSERT_TRUE(ev.is_ok()) << ev.status().message();
  EXPECT_EQ(ev->processed.frame_indices, std::vector<int32_t>({0, 2, 5, 7}));
  const Tokenizer& tok = *lm->tokenizer;
  auto mm = build_multimodal_prompt(*lm->model, chat_ids(turn), {}, {*ev},
                                    [&tok](const std::string& t) { return tok.encode(t, false); });
  ASSERT_TRUE(mm.is_ok()) << mm.status().message();
  EXPECT_EQ(std::count(mm->tokens.begin(), mm->tokens.end(), 493), 12);  // 2 temporal patches of 2x3 tokens
  GenerateParams gp;
  gp.max_tokens = opt_.max_tokens;
  gp.sampler.temperature = 0.0f;
  auto r = generate(s, lm->tokenizer.get(), *mm, gp);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(got, r->tokens);
  // errors: no frames, and a model without video input
  EXPECT_EQ(pipit_session_attach_video_frames(session_, paths.data(), 0, 4.0), PIPIT_ERR_INVALID_ARGUMENT);
  pipit_model* text = nullptr;
  ASSERT_EQ(pipit_model_load(test::model_dir("stories260k").c_str(), nullptr, &text), PIPIT_OK);
  pipit_session* ts = nullptr;
  ASSERT_EQ(pipit_session_create(text, nullptr, &ts), PIPIT_OK);
  EXPECT_EQ(pipit_session_attach_video_frames(ts, paths.data(), 8, 4.0), PIPIT_ERR_UNSUPPORTED);
  pipit_session_destroy(ts);
  pipit_model_destroy(text);
}

// A video file (the golden's frames as a lossless clip at 4 fps, decoded by FFmpeg's libraries at its own frame
// rate): the tokens of its frames, from a path, a data URL and bytes in memory; bad files fail at the generation.
TEST_F(CapiQwen35Image, VideoFileMatchesItsFrames) {
  if (!video_files_supported()) GTEST_SKIP() << "built without FFmpeg";
  std::vector<std::string> files;
  std::vector<Image> frames;
  for (int i = 0; i < 8; ++i) {
    files.push_back(test::model_dir("qwen3_5_vl") + "/video_frame0" + std::to_string(i) + ".png");
    frames.push_back(*load_image(files.back()));
  }
  const std::string clip = (dir_ / "clip.avi").string();
  ASSERT_TRUE(test::write_lossless_clip(clip, frames, 4));
  std::vector<const char*> paths;
  for (const auto& f : files) paths.push_back(f.c_str());
  const std::string turn = R"([{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What?"}]}])";
  ASSERT_EQ(pipit_session_attach_video_frames(session_, paths.data(), int32_t(paths.size()), 4.0), PIPIT_OK);
  const auto want = capi_generate(turn, 1);
  ASSERT_EQ(want.size(), size_t(opt_.max_tokens));
  std::ifstream in(clip, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 0u);
  for (int how = 0; how < 3; ++how) {
    pipit_session_reset(session_);
    if (how == 0) {
      ASSERT_EQ(pipit_session_attach_video(session_, clip.c_str()), PIPIT_OK) << pipit_last_error();
    } else if (how == 1) {
      static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      std::string url = "data:video/x-msvideo;base64,";
      for (size_t i = 0; i < bytes.size(); i += 3) {
        const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 |
                           (i + 1 < bytes.size() ? uint32_t(uint8_t(bytes[i + 1])) << 8 : 0) |
                           (i + 2 < bytes.size() ? uint32_t(uint8_t(bytes[i + 2])) : 0);
        url += kB64[v >> 18 & 63];
        url += kB64[v >> 12 & 63];
        url += i + 1 < bytes.size() ? kB64[v >> 6 & 63] : '=';
        url += i + 2 < bytes.size() ? kB64[v & 63] : '=';
      }
      ASSERT_EQ(pipit_session_attach_video(session_, url.c_str()), PIPIT_OK) << pipit_last_error();
    } else {
      ASSERT_EQ(pipit_session_attach_video_bytes(session_, bytes.data(), bytes.size()), PIPIT_OK);
    }
    EXPECT_EQ(capi_generate(turn, 1), want) << "attach " << how;
  }
  // bad input: at attach (no bytes), at the generation (not a video; its error names it), and no video input
  EXPECT_EQ(pipit_session_attach_video_bytes(session_, bytes.data(), 0), PIPIT_ERR_INVALID_ARGUMENT);
  pipit_session_reset(session_);
  ASSERT_EQ(pipit_session_attach_video_bytes(session_, bytes.data(), bytes.size() / 40), PIPIT_OK);
  EXPECT_EQ(pipit_session_generate(session_, turn.c_str(), 1, &opt_, nullptr, nullptr), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pipit_last_error()).find("[video]"), std::string::npos) << pipit_last_error();
  pipit_model* tm = nullptr;
  ASSERT_EQ(pipit_model_load(test::model_dir("stories260k").c_str(), nullptr, &tm), PIPIT_OK);
  pipit_session* ts = nullptr;
  ASSERT_EQ(pipit_session_create(tm, nullptr, &ts), PIPIT_OK);
  EXPECT_EQ(pipit_session_attach_video(ts, clip.c_str()), PIPIT_ERR_UNSUPPORTED);
  pipit_session_destroy(ts);
  pipit_model_destroy(tm);
}

}  // namespace
}  // namespace pipit
