// Audio decode (models/audio/audio_decode.h): WAV / FLAC / OGG / MP3 through libsndfile, stereo averaged to mono,
// 44.1 kHz resampled to 16 kHz by libsoxr (fixtures: tests/data/make_audio_fixtures.py); and every bad input gets
// one clear error at a bounded cost: a truncated file, a header declaring 10 hours, 0 samples, a text file named
// .wav, a clip past the cap, raw PCM that is empty / not finite / too long.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>

#include <unistd.h>

#include "models/audio/audio_decode.h"
#include "tests/test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

std::string fixture(const std::string& ext) {
  return std::string(PIPIT_SOURCE_DIR) + "/tests/data/audio/tone440_stereo_44k." + ext;
}

// A 16-bit PCM WAV header declaring `frames` frames (the data that follows is up to the caller).
std::string wav_header(int64_t frames, int rate = 16000, int channels = 1) {
  const uint32_t data = uint32_t(frames * 2 * channels);
  std::string h = "RIFF";
  auto u32 = [&](uint32_t v) { h.append(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](uint16_t v) { h.append(reinterpret_cast<const char*>(&v), 2); };
  u32(36 + data);
  h += "WAVEfmt ";
  u32(16), u16(1), u16(uint16_t(channels)), u32(uint32_t(rate)), u32(uint32_t(rate * 2 * channels));
  u16(uint16_t(2 * channels)), u16(16);
  h += "data";
  u32(data);
  return h;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// Zero crossings per second / 2 and RMS of a 16 kHz clip.
std::pair<double, double> tone_stats(const std::vector<float>& s) {
  int64_t crossings = 0;
  double sq = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    sq += double(s[i]) * s[i];
    if (i && (s[i - 1] < 0) != (s[i] < 0)) ++crossings;
  }
  return {double(crossings) / 2.0 / (double(s.size()) / kAudioSampleRate), std::sqrt(sq / double(s.size()))};
}

class AudioDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!audio_decode_available()) GTEST_SKIP() << "built without libsndfile / libsoxr";
  }
  test::ScratchDir dir{"audio"};
};

TEST_F(AudioDecode, FormatsDownmixAndResample) {
  auto wav = decode_audio_file(fixture("wav"), 30.0);
  ASSERT_TRUE(wav.is_ok()) << wav.status().message();
  EXPECT_EQ(wav->source_rate, 44100);
  EXPECT_EQ(wav->source_channels, 2);
  EXPECT_EQ(wav->samples.size(), 8000u);  // 22050 frames at 44.1 kHz -> 0.5 s at 16 kHz
  auto [f0, rms] = tone_stats(wav->samples);
  EXPECT_NEAR(f0, 440.0, 5.0);
  EXPECT_NEAR(rms, 0.75 * 0.5 / std::sqrt(2.0), 0.01);  // mean of the channels: (1 + 0.5) / 2 of the left
  auto flac = decode_audio_file(fixture("flac"), 30.0);  // lossless: the very same samples
  ASSERT_TRUE(flac.is_ok()) << flac.status().message();
  EXPECT_EQ(flac->samples, wav->samples);
  for (const char* lossy : {"ogg", "mp3"}) {
    auto c = decode_audio_file(fixture(lossy), 30.0);
    ASSERT_TRUE(c.is_ok()) << lossy << ": " << c.status().message();
    EXPECT_EQ(c->source_rate, 44100) << lossy;
    EXPECT_NEAR(double(c->samples.size()), 8000.0, 1200.0) << lossy;  // MP3 adds encoder delay / padding
    auto [f, r] = tone_stats(c->samples);
    EXPECT_NEAR(f, 440.0, 15.0) << lossy;
    EXPECT_NEAR(r, 0.75 * 0.5 / std::sqrt(2.0), 0.03) << lossy;
  }
  // bytes in memory decode as the file does
  const std::string bytes = test::read_bytes(fixture("mp3"));
  auto mem = decode_audio_bytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "mp3", 30.0, "mp3");
  ASSERT_TRUE(mem.is_ok()) << mem.status().message();
  EXPECT_EQ(mem->samples, decode_audio_file(fixture("mp3"), 30.0)->samples);
}

TEST_F(AudioDecode, BadFilesGetOneClearError) {
  const std::string good = test::read_bytes(test::model_dir("gemma4") + "/tone_1200ms.wav");
  ASSERT_GT(good.size(), 44u);
  auto expect_error = [&](const std::string& name, const std::string& bytes, const std::string& want) {
    write(dir.path(name), bytes);
    auto r = decode_audio_file(dir.path(name), 30.0);
    ASSERT_FALSE(r.is_ok()) << name;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find(name), std::string::npos) << "names the file: " << r.status().message();
  };
  expect_error("truncated.wav", good.substr(0, good.size() / 2), "truncated");
  std::string huge = good;  // the data chunk declares 10 hours; the file holds 1.2 s
  const uint32_t ten_hours = 16000u * 2u * 36000u;
  std::memcpy(huge.data() + 40, &ten_hours, 4);
  expect_error("huge_header.wav", huge, "truncated or its header is wrong");
  expect_error("empty.wav", wav_header(0), "0 samples");
  expect_error("notes.wav", "this is a text file, not audio\n", "cannot read it as audio");
  expect_error("zero_bytes.wav", "", "cannot read it as audio");
  std::string long_clip = wav_header(16000 * 31) + std::string(size_t(16000 * 31 * 2), '\0');
  expect_error("long.wav", long_clip, "at most 30.0 s");
  auto missing = decode_audio_file(dir.path("missing.wav"), 30.0);
  ASSERT_FALSE(missing.is_ok());
}

// A real 10-hour file (its header and its length agree: a sparse file) is refused from the header, before a sample
// is read or a buffer allocated for it.
TEST_F(AudioDecode, TenHourFileRefusedFromTheHeader) {
  const int64_t frames = int64_t(16000) * 36000;
  const std::string path = dir.path("ten_hours.wav");
  write(path, wav_header(frames));
  ASSERT_EQ(::truncate(path.c_str(), off_t(44 + frames * 2)), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = decode_audio_file(path, 30.0);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("36000.0 s long; at most 30.0 s"), std::string::npos) << r.status().message();
  EXPECT_LT(ms, 1000.0);
}

TEST(AudioPcm, RawPcmChecks) {
  EXPECT_TRUE(check_pcm(std::vector<float>(16000, 0.1f), 30.0, "pcm").is_ok());
  auto empty = check_pcm({}, 30.0, "pcm");
  EXPECT_NE(empty.message().find("0 samples"), std::string::npos) << empty.message();
  std::vector<float> nan(100, 0.0f);
  nan[7] = NAN;
  auto bad = check_pcm(nan, 30.0, "pcm");
  EXPECT_NE(bad.message().find("sample 7 is not a finite number"), std::string::npos) << bad.message();
  auto long_pcm = check_pcm(std::vector<float>(16000 * 31, 0.0f), 30.0, "pcm");
  EXPECT_NE(long_pcm.message().find("at most 30.0 s"), std::string::npos) << long_pcm.message();
}

// Built without the libraries, a file is a clear error and raw PCM still works.
TEST(AudioPcm, WithoutLibrariesFilesSaySo) {
  if (audio_decode_available()) GTEST_SKIP() << "built with libsndfile / libsoxr";
  auto r = decode_audio_file("clip.wav", 30.0);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("built without libsndfile"), std::string::npos);
}

}  // namespace
}  // namespace pipit
