// Videos in a prompt (Qwen3.5): decoded frames -> the model's video processor (models/vision/video_processor.h) ->
// its vision tower (a video is an image of t temporal patches, each attended within itself) -> the prompt's video
// placeholder expanded as HF's Qwen3VLProcessor does: per temporal patch, its timestamp as text ("<0.2 seconds>"),
// <|vision_start|>, h * w / merge^2 <|video_pad|>, <|vision_end|>. Each temporal patch then sits in the prompt as a
// (1, h, w) image would (HF's get_rope_index splits a video's grid so: models/qwen_rope_index.h), so
// build_multimodal_prompt places it.
// Video files and data URLs are decoded with FFmpeg's libraries (models/vision/video_file.h) where the build has them.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/vision/video_processor.h"
#include "runtime/multimodal.h"

namespace pipit {

struct EncodedVideo {
  ProcessedVideo processed;  // pixel values, grid (t, h, w), sampled frames, timestamps
  Tensor features;           // [t * h * w / merge^2, n_embd] f32, temporal patches in order
};

// The model's video processor: HF's Qwen3VLVideoProcessor defaults with the tower's patch sizes, then
// video_preprocessor_config.json (may be null) over them. Errors for models that take no video.
Result<VideoProcessorConfig> video_processor_for(const Model& m, const nlohmann::json& video_preprocessor_config);

// The video_preprocessor_config.json next to a loaded checkpoint's config.json (null when there is none, or for a
// .pipit file: the defaults apply).
Result<nlohmann::json> video_preprocessor_config_of(const LoadedModel& lm);

// frames: the decoded clip at `fps` frames per second. Sampled, processed and encoded on `pool`.
Result<EncodedVideo> encode_video(const Model& m, const VideoProcessorConfig& proc, std::span<const Image> frames,
                                  double fps, ThreadPool& pool, const TensorHook& on_tensor = {});
// A clip of n_frames decoded by `frame` (only the sampled frames are).
Result<EncodedVideo> encode_video(const Model& m, const VideoProcessorConfig& proc, int64_t n_frames,
                                  const FrameSource& frame, double fps, ThreadPool& pool,
                                  const TensorHook& on_tensor = {});
// A clip as image files / data URLs, decoded as sampled (at most max_frames of them).
Result<EncodedVideo> encode_video_files(const Model& m, const VideoProcessorConfig& proc,
                                        const std::vector<std::string>& frames, double fps, ThreadPool& pool,
                                        const TensorHook& on_tensor = {});

// A video file (MP4, WebM, MKV, ...) or a data:video/...;base64 URL, decoded as sampled at the file's own frame
// rate (only the sampled frames are converted). An error naming the source for files FFmpeg cannot read, and in
// builds without FFmpeg.
Result<EncodedVideo> encode_video_source(const Model& m, const VideoProcessorConfig& proc, const std::string& source,
                                         ThreadPool& pool, const TensorHook& on_tensor = {});
class VideoFile;
// The same for an opened file (models/vision/video_file.h; e.g. bytes in memory).
Result<EncodedVideo> encode_video_file(const Model& m, const VideoProcessorConfig& proc, VideoFile& file,
                                       ThreadPool& pool, const TensorHook& on_tensor = {});

// Tokenizes a timestamp's text ("<0.2 seconds>").
using TextEncoder = std::function<Result<std::vector<int32_t>>(const std::string& text)>;

// build_multimodal_prompt with videos too: each video placeholder of `tokens`, in prompt order, takes the next video
// (<|vision_start|><|video_pad|><|vision_end|> as chat templates write it, or a lone <|video_pad|>), images as
// there (one placeholder each, or already expanded). image_spans then has one span per image and per temporal patch.
Result<MultimodalPrompt> build_multimodal_prompt(const Model& m, std::span<const int32_t> tokens,
                                                 const std::vector<EncodedImage>& images,
                                                 const std::vector<EncodedVideo>& videos,
                                                 const TextEncoder& encode_text);

}  // namespace pipit
