// `pipit run --audio` on the tiny Gemma 4 checkpoint with the toy tokenizer of tests/data/gemma4_tokenizer (every
// id a token, the golden prompt pieces under their text): the golden audio prompt in raw mode gives the golden
// greedy ids; the chat template puts the clip where its audio item is; bad audio gets one clear error each, and a
// model without audio input says so.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "format/safetensors.h"
#include "models/audio/audio_decode.h"
#include "tests/e2e/cli_run_util.h"
#include "tests/test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

namespace fs = std::filesystem;

class CliAudio : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!audio_decode_available()) GTEST_SKIP() << "built without libsndfile / libsoxr";
    fs::copy(test::model_dir("gemma4"), m_, fs::copy_options::recursive);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(std::string(PIPIT_SOURCE_DIR) + "/tests/data/gemma4_tokenizer/" + f, fs::path(m_) / f);
  }
  // The ids of "<tN>" pieces in the output, in order.
  static std::vector<int> ids_in(const std::string& out) {
    std::vector<int> v;
    static const std::regex re("<t([0-9]+)>");
    for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) v.push_back(std::stoi((*it)[1]));
    return v;
  }
  std::string wav() const { return m_ + "/tone_1200ms.wav"; }
  test::ScratchDir dir_{"cli_audio"};
  std::string m_ = dir_.path("gemma4");
};

TEST_F(CliAudio, RawGoldenPromptGivesTheGoldenGreedyIds) {
  const std::string prompt = "'<bos><|turn>user\n<|audio|>Transcribe this audio.<turn|>\n<|turn>model\nSure, here'";
  auto r = test::run_cli("run -m " + m_ + " --no-template --no-echo -q --temp 0 -n 32 -p " + prompt + " --audio " +
                         wav(), /*with_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<int> want = {490, 210, 210, 210, 210, 210, 210, 210, 210, 210, 210, 210, 210, 239, 94, 291,
                                 234, 210, 210, 210, 210, 239, 66,  309, 255, 392, 66,  66,  66,  66,  66,  66};
  EXPECT_EQ(ids_in(r.out), want) << r.out;  // golden audio.greedy_ids
}

// `pipit logits --audio` (no tokenizer involved): the audio case's unexpanded ids in, the golden expanded input_ids
// and prefill logits out.
TEST_F(CliAudio, LogitsWithAudioFillsThePlaceholder) {
  std::vector<int32_t> ids = {2, 105, 135, 423, 503, 82, 406, 463, 298, 106, 423, 105, 405, 423, 364, 478, 149};
  const std::string in = dir_.path("in.safetensors"), out = dir_.path("out.safetensors");
  ASSERT_TRUE(write_safetensors(in, {{"input_ids", Tensor::from_data(DType::I32, {1, int64_t(ids.size())},
                                                                     ids.data(), nullptr)}}).is_ok());
  auto r = test::run_cli("logits -m " + test::model_dir("gemma4") + " -t 2 --kv-type f32 --input " + in +
                         " --output " + out + " --audio " + wav());
  ASSERT_EQ(r.code, 0) << r.out;
  auto got = SafetensorsFile::open(out);
  auto golden = SafetensorsFile::open(test::model_dir("gemma4") + "/golden.safetensors");
  ASSERT_TRUE(got.is_ok() && golden.is_ok());
  Tensor gi = *got->get("input_ids"), wi = *golden->get("audio.input_ids");
  ASSERT_EQ(gi.numel(), wi.numel());
  EXPECT_EQ(std::vector<int32_t>(gi.ptr<int32_t>(), gi.ptr<int32_t>() + gi.numel()),
            std::vector<int32_t>(wi.ptr<int32_t>(), wi.ptr<int32_t>() + wi.numel()));
  Tensor gl = *got->get("logits"), wl = *golden->get("audio.logits");
  ASSERT_EQ(gl.numel(), wl.numel());
  double worst = 0;
  for (int64_t i = 0; i < gl.numel(); ++i)
    worst = std::max(worst, std::fabs(double(gl.ptr<float>()[i]) - double(wl.ptr<float>()[i])));
  std::printf("[ measure  ] pipit logits --audio: max abs vs golden %.3g\n", worst);
  EXPECT_LE(worst, 1e-3);
}

// Both towers in one prompt (the image_audio case): `pipit logits --image --audio` fills the image placeholder with
// <|image> + soft tokens + <image|> and the audio one with <|audio> + soft tokens + <audio|>, from the files, and
// `pipit run` with both gives the golden greedy ids.
TEST_F(CliAudio, ImageAndAudioInOnePrompt) {
  std::vector<int32_t> ids = {2, 105, 135, 423, 502, 503, 336, 140, 231, 203, 140, 296, 298, 106, 423, 105, 405, 423};
  const std::string in = dir_.path("ia_in.safetensors"), out = dir_.path("ia_out.safetensors");
  ASSERT_TRUE(write_safetensors(in, {{"input_ids", Tensor::from_data(DType::I32, {1, int64_t(ids.size())},
                                                                     ids.data(), nullptr)}}).is_ok());
  const std::string img = test::model_dir("gemma4") + "/img_200x150.png";
  auto r = test::run_cli("logits -m " + test::model_dir("gemma4") + " -t 2 --kv-type f32 --input " + in +
                         " --output " + out + " --image " + img + " --audio " + wav());
  ASSERT_EQ(r.code, 0) << r.out;
  auto got = SafetensorsFile::open(out);
  auto golden = SafetensorsFile::open(test::model_dir("gemma4") + "/golden.safetensors");
  ASSERT_TRUE(got.is_ok() && golden.is_ok());
  Tensor gi = *got->get("input_ids"), wi = *golden->get("image_audio.input_ids");
  EXPECT_EQ(std::vector<int32_t>(gi.ptr<int32_t>(), gi.ptr<int32_t>() + gi.numel()),
            std::vector<int32_t>(wi.ptr<int32_t>(), wi.ptr<int32_t>() + wi.numel()));
  Tensor gl = *got->get("logits"), wl = *golden->get("image_audio.logits");
  ASSERT_EQ(gl.numel(), wl.numel());
  double worst = 0;
  for (int64_t i = 0; i < gl.numel(); ++i)
    worst = std::max(worst, std::fabs(double(gl.ptr<float>()[i]) - double(wl.ptr<float>()[i])));
  std::printf("[ measure  ] pipit logits --image --audio: max abs vs golden %.3g\n", worst);
  EXPECT_LE(worst, 1e-3);
  const std::string prompt =
      "'<bos><|turn>user\n<|image|><|audio|>Describe the image and the sound.<turn|>\n<|turn>model\n'";
  auto g = test::run_cli("run -m " + m_ + " --no-template --no-echo -q --temp 0 -n 16 --kv-type f32 -p " + prompt +
                         " --image " + img + " --audio " + wav(), /*with_stderr=*/false);
  ASSERT_EQ(g.code, 0) << g.out;
  Tensor wg = *golden->get("image_audio.greedy_ids");
  std::vector<int> want(wg.ptr<int32_t>(), wg.ptr<int32_t>() + std::min<int64_t>(16, wg.numel()));
  EXPECT_EQ(ids_in(g.out), want) << g.out;
}

TEST_F(CliAudio, ChatTemplateAndRawPlaceholder) {
  // the template writes <|audio|> for the audio item; raw mode without one gets it after BOS
  auto t = test::run_cli("run -m " + m_ + " -q --temp 0 -n 4 -p 'Transcribe this audio.' --audio " + wav());
  EXPECT_EQ(t.code, 0) << t.out;
  EXPECT_EQ(ids_in(t.out).size(), 4u) << t.out;
  auto raw = test::run_cli("run -m " + m_ + " --no-template -q --temp 0 -n 4 -p '<bos>Transcribe' --audio " + wav());
  EXPECT_EQ(raw.code, 0) << raw.out;
  // two clips: two placeholders, each expanded
  // <bos> <|turn> user \n, 2 x (<|audio> + 30 x <|audio|> + <audio|>), 4 text pieces, <turn|> \n <|turn> model \n
  auto two = test::run_cli("run -m " + m_ + " --json --temp 0 -n 2 -p 'Transcribe this audio.' --audio " + wav() +
                           " --audio " + wav(), /*with_stderr=*/false);
  EXPECT_EQ(two.code, 0) << two.out;
  EXPECT_NE(two.out.find("\"prompt_tokens\":77"), std::string::npos) << two.out;
  // the clips' decode and encode before the prompt are timed apart (audio to first token = media_ms + prompt_ms);
  // a text-only run has no such key
  EXPECT_NE(two.out.find("\"media_ms\":"), std::string::npos) << two.out;
  auto text = test::run_cli("run -m " + m_ + " --json --temp 0 -n 1 -p 'Hello.'", /*with_stderr=*/false);
  EXPECT_EQ(text.code, 0) << text.out;
  EXPECT_EQ(text.out.find("\"media_ms\""), std::string::npos) << text.out;
}

// `pipit chat`: /audio attaches a clip to the next message (a bad one is refused at once, the chat goes on).
TEST_F(CliAudio, ChatAudioCommand) {
  const std::string truncated = dir_.path("cut.wav");
  const std::string good = test::read_bytes(wav());
  std::ofstream(truncated, std::ios::binary).write(good.data(), std::streamsize(good.size() / 2));
  const std::string in = "/audio " + wav() + "\nTranscribe this audio.\n/audio " + truncated +
                         "\nTranscribe this audio.\n";
  auto r = test::run_sh("printf '" + in + "' | " + test::pipit_binary() + " chat -m " + m_ + " --temp 0 -n 3");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[audio " + wav() + ": 1.2 s, attached to your next message]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error: [audio] " + truncated + ": the file is truncated"), std::string::npos) << r.out;
  EXPECT_EQ(ids_in(r.out).size(), 6u) << r.out;  // two answers of 3 tokens
}

TEST_F(CliAudio, BadAudioGivesOneClearError) {
  const std::string good = test::read_bytes(wav());
  auto put = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir_.path(name), std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return dir_.path(name);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {put("truncated.wav", good.substr(0, good.size() / 2)), "truncated"},
      {put("notes.wav", "not audio at all\n"), "cannot read it as audio"},
      {put("empty.wav", good.substr(0, 36) + "data" + std::string(4, '\0')), "0 samples"},
      {dir_.path("missing.wav"), "cannot read it as audio"},
  };
  for (const auto& [path, want] : cases) {
    auto r = test::run_cli("run -m " + m_ + " -q -n 2 -p hi --audio " + path);
    EXPECT_EQ(r.code, 1) << path << ": " << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << path << ": " << r.out;
    EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
  }
}

// (the tiny Qwen2-VL with the toy tokenizer of tests/data/vl_tokenizer: a model with images but no audio)
TEST_F(CliAudio, ModelWithoutAudioSaysSo) {
  const std::string q = dir_.path("qwen2_vl");
  fs::copy(test::model_dir("qwen2_vl"), q, fs::copy_options::recursive);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(std::string(PIPIT_SOURCE_DIR) + "/tests/data/vl_tokenizer/" + f, fs::path(q) / f);
  auto r = test::run_cli("run -m " + q + " -q -n 2 -p hi --audio " + wav());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("does not take audio"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pipit
