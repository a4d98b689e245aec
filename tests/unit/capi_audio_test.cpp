// Audio through the C API (pipit_session_attach_audio, _audio_bytes, _audio_pcm) on the tiny Gemma 4 with the toy
// tokenizer of tests/data/gemma4_tokenizer: the golden audio prompt in raw mode gives the golden greedy ids from
// the wav file, from its bytes and from its samples as float PCM; the chat template's audio item works; bad clips
// are refused at attach with the problem named, and a model without audio input says so.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "format/safetensors.h"
#include "models/audio/audio_decode.h"
#include "pipit/pipit.h"
#include "tests/test_util.h"
#include "tests/unit/capi_test_util.h"
#include "tests/unit/convert_test_util.h"

namespace fs = std::filesystem;

namespace pipit {
namespace {

const char* kRawPrompt = "<bos><|turn>user\n<|audio|>Transcribe this audio.<turn|>\n<|turn>model\nSure, here";
const std::vector<int32_t> kGolden = {490, 210, 210, 210, 210, 210, 210, 210, 210, 210, 210, 210, 210, 239, 94, 291,
                                      234, 210, 210, 210, 210, 239, 66,  309, 255, 392, 66,  66,  66,  66,  66,  66};

class CapiAudio : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.make_dir("capi_audio", "gemma4", {"config.json", "generation_config.json", "preprocessor_config.json",
                                         "processor_config.json", "model.safetensors"});
    c_.copy_tokenizer("gemma4_tokenizer");
    c_.open(32);
  }
  void TearDown() override { c_.close(); }
  std::vector<int32_t> generate(const std::string& prompt, int32_t chat) {
    std::vector<int32_t> got;
    auto cb = [](const char*, size_t, int32_t token, void* user) -> int32_t {
      static_cast<std::vector<int32_t>*>(user)->push_back(token);
      return 1;
    };
    EXPECT_EQ(pipit_session_generate(session_, prompt.c_str(), chat, &opt_, cb, &got), PIPIT_OK) << pipit_last_error();
    return got;
  }
  static std::string wav() { return test::model_dir("gemma4") + "/tone_1200ms.wav"; }

  test::CapiGolden c_;
  fs::path& dir_ = c_.dir;
  pipit_model*& model_ = c_.model;
  pipit_session*& session_ = c_.session;
  pipit_generate_options& opt_ = c_.opt;
};

TEST_F(CapiAudio, PcmGivesTheGoldenGreedyIds) {
  EXPECT_GE(pipit_api_version(), 3);
  auto g = SafetensorsFile::open(test::model_dir("gemma4") + "/golden.safetensors");
  ASSERT_TRUE(g.is_ok());
  auto w = g->get("audio.audio.waveform");
  ASSERT_TRUE(w.is_ok());
  ASSERT_EQ(pipit_session_attach_audio_pcm(session_, w->ptr<float>(), size_t(w->numel())), PIPIT_OK)
      << pipit_last_error();
  EXPECT_EQ(generate(kRawPrompt, 0), kGolden);
}

TEST_F(CapiAudio, FileAndBytesGiveTheGoldenGreedyIds) {
  if (!audio_decode_available()) GTEST_SKIP() << "built without libsndfile / libsoxr";
  ASSERT_EQ(pipit_session_attach_audio(session_, wav().c_str()), PIPIT_OK) << pipit_last_error();
  EXPECT_EQ(generate(kRawPrompt, 0), kGolden);
  ASSERT_EQ(pipit_session_reset(session_), PIPIT_OK);
  const std::string bytes = test::read_bytes(wav());
  ASSERT_EQ(pipit_session_attach_audio_bytes(session_, bytes.data(), bytes.size()), PIPIT_OK) << pipit_last_error();
  EXPECT_EQ(generate(kRawPrompt, 0), kGolden);
  // a second turn keeps the first clip (the conversation is evaluated again with its soft tokens)
  opt_.max_tokens = 2;
  EXPECT_EQ(generate("<turn|>\n<|turn>user\nTranscribe this audio.<turn|>\n", 0).size(), 2u);
}

TEST_F(CapiAudio, ChatTemplateAudioItem) {
  if (!audio_decode_available()) GTEST_SKIP() << "built without libsndfile / libsoxr";
  ASSERT_EQ(pipit_session_attach_audio(session_, wav().c_str()), PIPIT_OK) << pipit_last_error();
  opt_.max_tokens = 3;
  const std::string msgs =
      R"([{"role": "user", "content": [{"type": "audio"}, {"type": "text", "text": "Transcribe this audio."}]}])";
  EXPECT_EQ(generate(msgs, 1).size(), 3u);
}

TEST_F(CapiAudio, BadClipsRefusedAtAttach) {
  std::vector<float> nan(1000, 0.0f);
  nan[3] = NAN;
  EXPECT_EQ(pipit_session_attach_audio_pcm(session_, nan.data(), nan.size()), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pipit_last_error()).find("not a finite number"), std::string::npos) << pipit_last_error();
  EXPECT_EQ(pipit_session_attach_audio_pcm(session_, nan.data(), 0), PIPIT_ERR_INVALID_ARGUMENT);
  std::vector<float> long_clip(16000 * 31, 0.0f);
  EXPECT_EQ(pipit_session_attach_audio_pcm(session_, long_clip.data(), long_clip.size()), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pipit_last_error()).find("at most 30.0 s"), std::string::npos) << pipit_last_error();
  if (audio_decode_available()) {
    const std::string bytes = test::read_bytes(wav());
    EXPECT_EQ(pipit_session_attach_audio_bytes(session_, bytes.data(), bytes.size() / 2), PIPIT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(pipit_last_error()).find("truncated"), std::string::npos) << pipit_last_error();
    const char text[] = "not audio";
    EXPECT_EQ(pipit_session_attach_audio_bytes(session_, text, sizeof text), PIPIT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(pipit_session_attach_audio(session_, (dir_ / "missing.wav").c_str()), PIPIT_OK);
  }
  EXPECT_EQ(pipit_session_attach_audio(session_, nullptr), PIPIT_ERR_INVALID_ARGUMENT);
  // nothing was attached: a text prompt runs as text
  opt_.max_tokens = 1;
  EXPECT_EQ(generate("<bos>Transcribe", 0).size(), 1u);
}

// (the tiny Qwen2-VL with the toy tokenizer of tests/data/vl_tokenizer: images, no audio)
TEST(CapiAudioModels, ModelWithoutAudioSaysSo) {
  test::ScratchDir d("capi_no_audio");
  for (const char* f : {"config.json", "generation_config.json", "preprocessor_config.json", "model.safetensors"})
    fs::create_symlink(test::model_dir("qwen2_vl") + "/" + f, d.path(f));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(std::string(PIPIT_SOURCE_DIR) + "/tests/data/vl_tokenizer/" + f, d.path(f));
  pipit_model* m = nullptr;
  ASSERT_EQ(pipit_model_load(d.dir().c_str(), nullptr, &m), PIPIT_OK) << pipit_last_error();
  pipit_session* s = nullptr;
  ASSERT_EQ(pipit_session_create(m, nullptr, &s), PIPIT_OK) << pipit_last_error();
  const float pcm[4] = {0, 0, 0, 0};
  EXPECT_EQ(pipit_session_attach_audio_pcm(s, pcm, 4), PIPIT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(pipit_last_error()).find("does not take audio input"), std::string::npos);
  pipit_session_destroy(s);
  pipit_model_destroy(m);
}

}  // namespace
}  // namespace pipit
