// --audio for the commands that take audio (run, chat): repeatable, a file libsndfile reads (WAV, FLAC, OGG, MP3),
// and the step from a prompt to one with the clips' soft tokens spliced in (runtime/audio_input.h).
#pragma once

#include <span>
#include <vector>

#include "cli/args.h"
#include "runtime/audio_input.h"
#include "runtime/loader.h"

namespace pipit::cli {

void add_audio_options(Args& a);
bool has_audio(const Args& a);
// An error naming the model when it takes no audio.
Status check_takes_audio(const LoadedModel& lm);

// A prompt without any audio placeholder (raw mode, no chat template) gets one <|audio|> per clip at its start
// (after BOS); a prompt with them is returned as is.
Result<std::vector<int32_t>> with_audio_placeholders(const LoadedModel& lm, std::span<const int32_t> ids,
                                                     size_t n_clips);

// The --audio files decoded, encoded and spliced into `p` (a text prompt or one with images).
Status audio_prompt(const Args& a, const LoadedModel& lm, MultimodalPrompt& p, ThreadPool& pool);

}  // namespace pipit::cli
