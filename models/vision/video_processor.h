// HF's Qwen3VLVideoProcessor (Qwen3-VL, Qwen3.5) on decoded frames: sample frames at `fps` from the clip's own
// frame rate, smart_resize with the pixel budget counted over all sampled frames, rescale + normalize fused as HF's
// fast processors do ((x - mean / r) / (std / r) in float32), pad to whole temporal patches with the last frame, and
// flatten into the rows a Qwen vision tower takes, as an image's (t > 1). Also the timestamps of the temporal
// patches that the processor writes into the prompt ("<0.2 seconds>").
// Not here (yet): decoding video files, and the prompt expansion / front ends (see the Qwen3.5 notes of issue 37).
// Limits: at most max_frames sampled frames (HF default 768) and the longest_edge pixel budget over all of them.
// reference: HF video_processing_qwen3_vl.py (sample_frames, smart_resize, _preprocess), processing_qwen3_vl.py
// (_calculate_timestamps).
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

struct VideoProcessorConfig {  // Qwen3VLVideoProcessor defaults
  bool do_sample_frames = true, do_resize = true, do_rescale = true, do_normalize = true;
  double fps = 2.0;  // frames sampled per second of video
  int64_t min_frames = 4, max_frames = 768;
  int64_t min_pixels = 128 * 32 * 32, max_pixels = 768 * 32 * 32;  // size.shortest_edge / longest_edge: all frames
  int patch_size = 16, merge_size = 2, temporal_patch_size = 2;
  double rescale_factor = 1.0 / 255.0;
  std::array<float, 3> mean = {0.5f, 0.5f, 0.5f}, std = {0.5f, 0.5f, 0.5f};
  ResampleFilter resample = ResampleFilter::kBicubic;
};

// Fields of a video_preprocessor_config.json over `base`; wrong types and impossible values are errors.
Result<VideoProcessorConfig> parse_video_processor(const nlohmann::json& vpp, VideoProcessorConfig base = {});

struct ProcessedVideo {
  ProcessedImage patches;              // pixel_values [t * h * w, 3 * tps * P * P] and grid_thw (t, h, w)
  std::vector<int32_t> frame_indices;  // the sampled frames of the clip
  std::vector<double> timestamps;      // seconds per temporal patch (mean of its first and last frame)
};

// frames: the decoded clip (all the same size) at video_fps frames per second.
Result<ProcessedVideo> preprocess_video(std::span<const Image> frames, double video_fps, const VideoProcessorConfig& c);
// The same for a clip of n_frames whose frame i `frame(i)` decodes: only the sampled frames are decoded, one at a
// time, so a long clip costs its sampled frames, not its length.
using FrameSource = std::function<Result<Image>(int32_t index)>;
Result<ProcessedVideo> preprocess_video(int64_t n_frames, const FrameSource& frame, double video_fps,
                                        const VideoProcessorConfig& c);

// The prompt text before a temporal patch's tokens: Python's f"<{seconds:.1f} seconds>" (0.25 -> "<0.2 seconds>").
std::string video_timestamp_text(double seconds);

}  // namespace pipit
