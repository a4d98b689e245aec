// The HF video processors of the models that take video. Each family's is a VideoProcessorKind registered under its
// name, in its own file beside the image processors: qwen3_vl_video_processor.cpp (Qwen3VLVideoProcessor: Qwen3-VL,
// Qwen3.5). A model names its processor (VisionLanguageModel::default_video_processor, models/vision/vision_model.h);
// video_processor.cpp has the registry, the fields every video processor reads, and the dispatch, so the runtime,
// `pipit vision`, the server and the memory estimate reach a family's sampling, preprocessing, prompt expansion and
// size bound by its name only (runtime/multimodal_video.h).
#pragma once

#include <array>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/vision/image.h"
#include "models/vision/image_processor.h"

namespace pipit {

struct VisionTokens;  // models/vision/vision_model.h

// The settings of one video processor: those of HF's BaseVideoProcessor (frame sampling, resize filter, rescale,
// normalize), and each family's. `kind` names the processor (a registered VideoProcessorKind); a model's
// default_video_processor() sets it with the tower's sizes, video_preprocessor_config.json is read over. The defaults
// are Qwen3VLVideoProcessor's.
struct VideoProcessorConfig {
  std::string kind = "qwen3_vl";  // a registered VideoProcessorKind
  bool do_sample_frames = true, do_resize = true, do_rescale = true, do_normalize = true;
  double fps = 2.0;  // frames sampled per second of video
  int64_t min_frames = 4, max_frames = 768;
  double rescale_factor = 1.0 / 255.0;
  std::array<float, 3> mean = {0.5f, 0.5f, 0.5f}, std = {0.5f, 0.5f, 0.5f};
  ResampleFilter resample = ResampleFilter::kBicubic;
  // Qwen3-VL: the pixel budget of all sampled frames (size.shortest_edge / longest_edge), the tower's patch sizes
  int64_t min_pixels = 128 * 32 * 32, max_pixels = 768 * 32 * 32;
  int patch_size = 16, merge_size = 2, temporal_patch_size = 2;
};

struct ProcessedVideo {
  ProcessedImage patches;              // pixel values and grid (t, h, w) in the layout the model's tower takes
  std::vector<int32_t> frame_indices;  // the sampled frames of the clip
  std::vector<double> timestamps;      // seconds per temporal patch (Qwen: mean of its first and last frame)
};

// Frame i of a clip, decoded when asked (only the sampled frames are).
using FrameSource = std::function<Result<Image>(int32_t index)>;
// Tokenizes prompt text a processor writes around a video's tokens (Qwen's timestamps, "<0.2 seconds>").
using TextEncoder = std::function<Result<std::vector<int32_t>>(const std::string& text)>;

// One run of a video in the expanded prompt: the processor's text before it, `rows` of the video's feature rows
// (in order from its first), the run's grid for the model's positions (Model::media_positions), and the tokens after.
struct VideoSegment {
  std::vector<int32_t> before;
  int64_t rows = 0;
  std::array<int32_t, 3> grid{};
  std::vector<int32_t> after;
};

// What one family's processor does with those settings. Each implementation registers itself under its kind
// (PIPIT_REGISTER_VIDEO_PROCESSOR in its own file).
class VideoProcessorKind {
 public:
  virtual ~VideoProcessorKind() = default;
  // The video_preprocessor_config.json fields of this processor; the common ones (resample, do_resize / rescale /
  // normalize, rescale_factor, image_mean / std, fps, min / max_frames, do_sample_frames) are read before. Wrong
  // types and impossible values are errors.
  virtual Status parse(const nlohmann::json& vpp, VideoProcessorConfig& c) const = 0;
  // Errors when the settings read (c) differ from the model's (`model`, default_video_processor()) in what its
  // tower fixes (patch sizes).
  virtual Status check(const VideoProcessorConfig& c, const VideoProcessorConfig& model) const = 0;
  // Samples, resizes and patches a clip of n_frames at video_fps frames per second.
  virtual Result<ProcessedVideo> preprocess(int64_t n_frames, const FrameSource& frame, double video_fps,
                                            const VideoProcessorConfig& c) const = 0;
  // The tokens a chat template writes for one video (the video token with the family's framing); the runtime
  // replaces them, or a lone video token, by expand()'s segments.
  virtual std::vector<int32_t> placeholder(const VisionTokens& t) const = 0;
  // The prompt a processed video becomes, as HF's processor writes it: segments whose rows add up to the video's
  // feature rows (n_image_tokens of its patches). Their tokens are text; the runtime marks the rows.
  virtual Result<std::vector<VideoSegment>> expand(const ProcessedVideo& v, const VisionTokens& t,
                                                   const TextEncoder& encode_text) const = 0;
  // The largest clip these settings give: the tower's patches and the pixel values' floats (memory estimate).
  virtual ImageProcessorKind::Extent max_extent(const VideoProcessorConfig& c) const = 0;
};

void register_video_processor(const char* kind, const VideoProcessorKind* impl);
// The registered processor of that kind, or an error naming the registered ones.
Result<const VideoProcessorKind*> find_video_processor(const std::string& kind);

struct VideoProcessorRegistrar {
  VideoProcessorRegistrar(const char* kind, const VideoProcessorKind* impl) { register_video_processor(kind, impl); }
};
#define PIPIT_REGISTER_VIDEO_PROCESSOR(kind, Type)                  \
  static const Type PIPIT_CONCAT(_pipit_video_processor_, __LINE__); \
  static ::pipit::VideoProcessorRegistrar PIPIT_CONCAT(_pipit_video_processor_reg_, __LINE__)( \
      kind, &PIPIT_CONCAT(_pipit_video_processor_, __LINE__))

// Fields of a video_preprocessor_config.json over `base` (its kind picks the processor); wrong types and impossible
// values are errors.
Result<VideoProcessorConfig> parse_video_processor(const nlohmann::json& vpp, VideoProcessorConfig base = {});

// frames: the decoded clip (all the same size) at video_fps frames per second, through the processor of c.kind.
Result<ProcessedVideo> preprocess_video(std::span<const Image> frames, double video_fps, const VideoProcessorConfig& c);
// The same for a clip of n_frames whose frame i `frame(i)` decodes: only the sampled frames are decoded, one at a
// time, so a long clip costs its sampled frames, not its length.
Result<ProcessedVideo> preprocess_video(int64_t n_frames, const FrameSource& frame, double video_fps,
                                        const VideoProcessorConfig& c);

// Qwen3-VL's timestamp text before a temporal patch's tokens: Python's f"<{seconds:.1f} seconds>" (0.25 -> "<0.2
// seconds>"). Defined in qwen3_vl_video_processor.cpp.
std::string video_timestamp_text(double seconds);

}  // namespace pipit
