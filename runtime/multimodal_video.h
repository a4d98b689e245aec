// Videos in a prompt: decoded frames -> the model's video processor (the VideoProcessorKind its
// default_video_processor() names, models/vision/video_processor.h) -> its vision tower (a video is an image of t
// temporal patches) -> the prompt's video placeholder replaced by the segments the processor lays out, each a span
// of video rows that build_multimodal_prompt places as it places an image (the model's positions). Nothing here
// knows a family: sampling, sizes, the placeholder and its expansion are the processor's.
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
  Tensor features;           // [n_image_tokens(patches), n_embd] f32, in the order of the processor's runs
};

// Whether the model takes video: a vision tower that names a video processor.
bool takes_video(const Model& m);

// The model's video processor: its default_video_processor(), then video_preprocessor_config.json (may be null)
// over it, checked against the tower by the processor. Errors for models that take no video.
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

// The placeholder a chat template writes for one video (the processor's), for prompts built without a template;
// empty for a model that takes no video.
std::vector<int32_t> video_placeholder_tokens(const Model& m);

// build_multimodal_prompt with videos too: each video placeholder of `tokens`, in prompt order, takes the next video
// (the processor's placeholder as chat templates write it, or a lone video token), images as there (one placeholder
// each, or already expanded). `encode_text` tokenizes the text the processor writes around a video's runs.
// image_spans then has one span per image and per segment of a video.
Result<MultimodalPrompt> build_multimodal_prompt(const Model& m, std::span<const int32_t> tokens,
                                                 const std::vector<EncodedImage>& images,
                                                 const std::vector<EncodedVideo>& videos,
                                                 const TextEncoder& encode_text);

}  // namespace pipit
