// Audio clips in a prompt, beside images (runtime/multimodal.h): an audio clip is one more kind of embedded span of
// a MultimodalPrompt. Each clip is decoded (models/audio/audio_decode.h), encoded by the model's audio record
// (models/audio/audio_model.h, found by model_type), and its placeholder is expanded as the record's AudioTokens
// say, its HF processor's way: the tokens before, the placeholder once per soft token (n from the clip's length),
// the tokens after; the placeholder rows take the clip's soft tokens. A prompt already expanded that way (the
// processor's output) is taken as is.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/threads.h"
#include "models/audio/audio_decode.h"
#include "models/audio/audio_model.h"
#include "runtime/multimodal.h"

namespace pipit {

struct LoadedModel;

// The audio tower of a loaded model (processor_config.json next to config.json when there is one); an error that
// says so for a model that takes no audio.
Result<std::unique_ptr<AudioEncoder>> audio_encoder_of(const LoadedModel& lm);

// Soft tokens of one clip (16 kHz mono) [n_tokens, n_embd] f32 on the heap, computed on `pool`. `on_tensor` sees
// the tower's named intermediates.
Result<Tensor> encode_audio(const AudioEncoder& enc, std::span<const float> samples, ThreadPool& pool,
                            const TensorHook& on_tensor = {});

// An audio source for the front ends: a file path, bytes (with a format hint: "wav", "mp3", ...) or raw PCM.
struct AudioSource {
  std::string path;
  std::vector<uint8_t> bytes;
  std::string format;
  std::vector<float> pcm;  // 16 kHz mono float
  std::string what;        // names it in errors
};
Result<std::vector<float>> load_audio(const AudioSource& src, double max_seconds);

// A prompt of plain tokens as a MultimodalPrompt without embedded rows (to splice audio into a text prompt).
MultimodalPrompt text_prompt(std::span<const int32_t> tokens);

// Expands the audio placeholders of `p` (a text prompt, or one with images already spliced in) around `clips`
// (encode_audio outputs, in prompt order): one placeholder per clip, or runs already expanded. Errors when the count
// fits neither, and for M-RoPE prompts (no model with those takes audio).
Status splice_audio(MultimodalPrompt& p, const AudioTokens& t, const std::vector<Tensor>& clips);

// The whole path: load each source, encode it, splice it into `p`.
Status add_audio(const LoadedModel& lm, MultimodalPrompt& p, const std::vector<AudioSource>& sources,
                 ThreadPool& pool);

// The placeholder a chat template writes for one clip (AudioTokens::audio_token_id), for prompts built without a
// template.
std::vector<int32_t> audio_placeholder_tokens(const AudioEncoder& enc);

}  // namespace pipit
