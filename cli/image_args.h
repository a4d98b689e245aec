// Image options shared by the commands that take images (run, logits, vision): --image (repeatable: a path or a
// data: URL) and --image-max-pixels, and the step from those to a multimodal prompt. `pipit run` also takes one
// video as its decoded frames (--video, --video-fps) for models with video input.
#pragma once

#include <span>
#include <vector>

#include "cli/args.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "runtime/multimodal_video.h"
#include "tokenizer/tokenizer.h"

namespace pipit::cli {

void add_image_options(Args& a);
bool has_images(const Args& a);
Result<ImageOptions> image_options(const Args& a);

// The --image files decoded, processed and encoded, and `tokens` expanded around them.
Result<MultimodalPrompt> image_prompt(const Args& a, const LoadedModel& lm, std::span<const int32_t> tokens,
                                      ThreadPool& pool);

// --video: the frames of one clip in order, a directory of PNG/JPEG files (sorted by name) or a comma-separated list;
// --video-fps: their frame rate (default 2, the processor's sampling rate: every frame is kept).
void add_video_options(Args& a);
bool has_video(const Args& a);
// The --image files and the --video frames decoded, processed and encoded, and `tokens` expanded around them
// (video timestamps tokenized with `tok`).
Result<MultimodalPrompt> media_prompt(const Args& a, const LoadedModel& lm, const Tokenizer& tok,
                                      std::span<const int32_t> tokens, ThreadPool& pool);
// The clip of a --video value (a video file or data URL at its own frame rate, or a frames directory or list at
// `fps`), decoded as sampled, processed and encoded.
Result<EncodedVideo> encode_video_frames(const LoadedModel& lm, const std::string& spec, double fps, ThreadPool& pool,
                                         const TensorHook& on_tensor = {});
// Raw mode: a prompt without a video placeholder gets one at its start (after BOS, before image placeholders).
std::vector<int32_t> with_video_placeholder(const Model& m, std::span<const int32_t> ids);

// A prompt without any image placeholder (raw mode, no chat template) gets one per image at its start (after BOS),
// written as the model's chat template would ("<|vision_start|><|image_pad|><|vision_end|>", "<image>").
std::vector<int32_t> with_image_placeholders(const Model& m, std::span<const int32_t> ids, size_t n_images);

// Where the prompt's tokens sit for the model: M-RoPE models [3, 1, T] (t, h, w rows), others [1, T] (I32), as the
// goldens and HF name them position_ids.
Tensor position_ids_tensor(const MultimodalPrompt& p);

}  // namespace pipit::cli
