// Video and audio processors are records registered by name (issue 31 item 3): a test-only video processor and a
// test-only audio record, registered here as a family's file registers its own, are reached by the runtime through
// the model that names them: takes_video / video_processor_for / the placeholder / encode_video / the prompt
// expansion for video, takes_audio / audio_encoder_of / add_audio / the memory bound for audio. No runtime code
// knows either name.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/audio/audio_model.h"
#include "models/vision/video_processor.h"
#include "models/vision/vision_model.h"
#include "runtime/audio_input.h"
#include "runtime/loader.h"
#include "runtime/multimodal_video.h"

namespace pipit {
namespace {

constexpr int32_t kImage = 50, kVideo = 51, kBefore = 7, kAfter = 8;
constexpr int64_t kEmbd = 4;

// A processor that keeps every frame as one temporal patch of one row (the frame's first pixel), writes "t<i>" and
// kBefore before each frame's row and kAfter after it, and reads a field of its own ("test_max_frames").
class TestVideoProcessor : public VideoProcessorKind {
 public:
  static inline int parsed = 0;
  Status parse(const nlohmann::json& vpp, VideoProcessorConfig& c) const override {
    ++parsed;
    if (vpp.contains("test_max_frames")) c.max_frames = vpp["test_max_frames"].get<int64_t>();
    return Status::ok();
  }
  Status check(const VideoProcessorConfig& c, const VideoProcessorConfig&) const override {
    if (c.max_frames > 10) return Error::invalid_argument("[test video] at most 10 frames, not {}", c.max_frames);
    return Status::ok();
  }
  Result<ProcessedVideo> preprocess(int64_t n, const FrameSource& frame, double, const VideoProcessorConfig& c)
      const override {
    if (n > c.max_frames) return Error::invalid_argument("[test video] {} frames, max_frames {}", n, c.max_frames);
    ProcessedVideo v;
    v.patches.grid_thw = {int32_t(n), 1, 1};
    v.patches.pixel_values = Tensor::empty(DType::F32, {n, 1});
    for (int32_t i = 0; i < int32_t(n); ++i) {
      PIPIT_ASSIGN_OR_RETURN(Image img, frame(i));
      v.patches.pixel_values.ptr<float>()[i] = float(img.rgb[0]);
      v.frame_indices.push_back(i);
      v.timestamps.push_back(double(i));
    }
    return v;
  }
  std::vector<int32_t> placeholder(const VisionTokens& t) const override { return {kBefore, t.video_token_id}; }
  Result<std::vector<VideoSegment>> expand(const ProcessedVideo& v, const VisionTokens&,
                                           const TextEncoder& encode_text) const override {
    std::vector<VideoSegment> out;
    for (size_t i = 0; i < v.frame_indices.size(); ++i) {
      VideoSegment s;
      std::string text = "t";  // appended, not "t" + string: GCC 12 warns falsely (-Wrestrict) on the latter
      text += std::to_string(i);
      PIPIT_ASSIGN_OR_RETURN(s.before, encode_text(text));
      s.before.push_back(kBefore);
      s.rows = 1;
      s.grid = {1, 1, 1};
      s.after = {kAfter};
      out.push_back(std::move(s));
    }
    return out;
  }
  ImageProcessorKind::Extent max_extent(const VideoProcessorConfig& c) const override {
    return {double(c.max_frames), double(c.max_frames)};
  }
};
PIPIT_REGISTER_VIDEO_PROCESSOR("test_frames", TestVideoProcessor);

// A model whose tower names that processor; its "features" of a patch row are 100 + the pixel value.
class TestVideoModel : public Model, public VisionLanguageModel {
 public:
  explicit TestVideoModel(std::string video_kind) : video_kind_(std::move(video_kind)) {
    info_.arch = "test_video_model";
    info_.n_embd = kEmbd;
    info_.n_vocab = 100;
    tokens_.image_token_id = kImage;
    tokens_.video_token_id = kVideo;
  }
  const VisionLanguageModel* vision() const override { return this; }
  Status forward(Ctx&, const Batch&, KvCache&, Tensor*) override { return Error::unsupported("no decoder"); }
  OpSet ops_used() const override { return {}; }
  ImageProcessorConfig default_processor() const override { return {}; }
  Status check_processor(const ImageProcessorConfig&) const override { return Status::ok(); }
  std::optional<VideoProcessorConfig> default_video_processor() const override {
    VideoProcessorConfig c;
    c.kind = video_kind_;
    c.max_frames = 5;
    return c;
  }
  int64_t n_image_tokens(const ProcessedImage& img) const override {
    return int64_t(img.grid_thw[0]) * img.grid_thw[1] * img.grid_thw[2];
  }
  Result<Tensor> encode_image(Ctx&, const ProcessedImage& img) const override {
    const int64_t n = n_image_tokens(img);
    Tensor f = Tensor::empty(DType::F32, {n, kEmbd});
    for (int64_t r = 0; r < n; ++r)
      std::fill_n(f.ptr<float>() + r * kEmbd, kEmbd, 100.0f + img.pixel_values.ptr<float>()[r]);
    return f;
  }

 private:
  std::string video_kind_;
};

Image frame_of(uint8_t value) {
  Image img;
  img.width = img.height = 2;
  img.rgb.assign(12, value);
  return img;
}

TEST(MediaRegistry, TestVideoProcessorReachedByName) {
  const TestVideoModel m("test_frames");
  EXPECT_TRUE(takes_video(m));
  EXPECT_EQ(video_placeholder_tokens(m), (std::vector<int32_t>{kBefore, kVideo}));

  // the model's default, the file's fields read by the processor, the processor's check
  const int parsed = TestVideoProcessor::parsed;
  auto proc = video_processor_for(m, nlohmann::json{{"test_max_frames", 3}, {"fps", 4.0}});
  ASSERT_TRUE(proc.is_ok()) << proc.status().message();
  EXPECT_EQ(TestVideoProcessor::parsed, parsed + 1);
  EXPECT_EQ(proc->kind, "test_frames");
  EXPECT_EQ(proc->max_frames, 3);
  EXPECT_EQ(proc->fps, 4.0);  // a common field, read by the shared parser
  auto refused = video_processor_for(m, nlohmann::json{{"test_max_frames", 11}});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("at most 10 frames"), std::string::npos) << refused.status().message();

  // preprocessing and the tower through the runtime
  ThreadPool pool(1);
  const std::vector<Image> frames = {frame_of(1), frame_of(2), frame_of(3)};
  auto v = encode_video(m, *proc, frames, 1.0, pool);
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_EQ(v->processed.patches.grid_thw, (std::array<int32_t, 3>{3, 1, 1}));
  ASSERT_EQ(v->features.dim(0), 3);
  const std::vector<Image> four = {frame_of(1), frame_of(2), frame_of(3), frame_of(4)};
  EXPECT_FALSE(encode_video(m, *proc, four, 1.0, pool).is_ok());  // the processor's max_frames

  // the processor's placeholder (kBefore kVideo) replaced by its segments: "t<i>" kBefore, the row, kAfter
  const TextEncoder encode = [](const std::string& s) -> Result<std::vector<int32_t>> {
    return std::vector<int32_t>{60 + (s.back() - '0')};
  };
  for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{1, kBefore, kVideo, 2},
                                             std::vector<int32_t>{1, kVideo, 2}}) {
    auto p = build_multimodal_prompt(m, prompt, {}, {*v}, encode);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    EXPECT_EQ(p->tokens, (std::vector<int32_t>{1, 60, kBefore, kVideo, kAfter, 61, kBefore, kVideo, kAfter, 62,
                                               kBefore, kVideo, kAfter, 2}));
    ASSERT_EQ(p->image_spans.size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      const auto& sp = p->image_spans[k];
      ASSERT_EQ(sp.end - sp.begin, 1);
      const int32_t row = p->embd_row[size_t(sp.begin)];
      EXPECT_EQ(p->embd.ptr<float>()[row * kEmbd], 101.0f + float(k));  // frame k's row, in order
    }
  }
}

TEST(MediaRegistry, UnknownVideoProcessorNamesTheRegisteredOnes) {
  const TestVideoModel m("no_such_processor");
  auto p = video_processor_for(m, nullptr);
  ASSERT_FALSE(p.is_ok());
  const std::string msg = p.status().message();
  EXPECT_NE(msg.find("no video processor 'no_such_processor'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("qwen3_vl"), std::string::npos) << msg;  // the families' records are registered too
  EXPECT_NE(msg.find("test_frames"), std::string::npos) << msg;
  EXPECT_TRUE(video_placeholder_tokens(m).empty());
}

// A test-only audio record: n_samples / 100 soft tokens of value 1, the placeholder 90 expanded to 91 92 (run) 93,
// and a bound of 1234 bytes.
class TestAudioEncoder : public AudioEncoder {
 public:
  TestAudioEncoder() {
    tokens_ = {90, {91, 92}, {93}};
    max_seconds_ = 1.0;
  }
  Result<int64_t> n_audio_tokens(int64_t n) const override { return n / 100; }
  Result<Tensor> encode(Ctx&, std::span<const float> samples) const override {
    PIPIT_ASSIGN_OR_RETURN(int64_t n, n_audio_tokens(int64_t(samples.size())));
    Tensor t = Tensor::empty(DType::F32, {n, kEmbd});
    std::fill_n(t.ptr<float>(), n * kEmbd, 1.0f);
    return t;
  }
};
const AudioEncoderRegistrar kTestAudio(
    "test_audio_model",
    [](const HfConfig&, const WeightSource&, const nlohmann::json&) -> Result<std::unique_ptr<AudioEncoder>> {
      return std::unique_ptr<AudioEncoder>(std::make_unique<TestAudioEncoder>());
    },
    [](const HfConfig&, const nlohmann::json&) -> Result<double> { return 1234.0; });

TEST(MediaRegistry, TestAudioRecordReachedByModelType) {
  EXPECT_TRUE(takes_audio("test_audio_model"));
  const auto types = audio_model_types();
  EXPECT_NE(std::find(types.begin(), types.end(), "test_audio_model"), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), "gemma4"), types.end());

  LoadedModel lm;
  lm.config = HfConfig(nlohmann::json{{"model_type", "test_audio_model"}});
  lm.weights = std::make_shared<MapWeightSource>(std::map<std::string, Tensor>{});
  lm.model = std::make_unique<TestVideoModel>("test_frames");
  lm.path = "/nonexistent/test_audio_model";  // no processor_config.json
  auto bound = audio_encode_bytes(lm.config, nullptr);
  ASSERT_TRUE(bound.is_ok()) << bound.status().message();
  EXPECT_EQ(*bound, 1234.0);

  MultimodalPrompt p = text_prompt(std::vector<int32_t>{1, 90, 2});
  ThreadPool pool(1);
  AudioSource clip;
  clip.pcm.assign(300, 0.0f);
  clip.what = "test clip";
  auto st = add_audio(lm, p, {clip}, pool);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{1, 91, 92, 90, 90, 90, 93, 2}));  // the record's expansion
  EXPECT_EQ(p.embd_row, (std::vector<int32_t>{-1, -1, -1, 0, 1, 2, -1, -1}));

  lm.config = HfConfig(nlohmann::json{{"model_type", "no_audio_here"}});
  auto none = audio_encoder_of(lm);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("does not take audio"), std::string::npos) << none.status().message();
  EXPECT_FALSE(audio_encode_bytes(lm.config, nullptr).is_ok());
}

}  // namespace
}  // namespace pipit
