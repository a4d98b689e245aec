// --audio handling for the CLI.
#include "cli/audio_args.h"

#include <algorithm>

namespace pipit::cli {

void add_audio_options(Args& a) {
  std::string types;  // the model types with an audio record in this build
  for (const auto& t : audio_model_types()) types += (types.empty() ? "" : ", ") + t;
  const std::string help = "audio file (WAV, FLAC, OGG, MP3; resampled to 16 kHz mono); repeatable, in prompt order "
                           "(models with audio input: " + types + ")";
  a.multi({"--audio"}, help.c_str());  // copied
}

bool has_audio(const Args& a) { return !a.get_all("--audio").empty(); }

Status check_takes_audio(const LoadedModel& lm) {
  if (!takes_audio(lm.config.model_type()))
    return Error::unsupported("--audio: model type '{}' does not take audio input", lm.model->info().arch);
  return Status::ok();
}

Result<std::vector<int32_t>> with_audio_placeholders(const LoadedModel& lm, std::span<const int32_t> ids,
                                                     size_t n_clips) {
  std::vector<int32_t> out(ids.begin(), ids.end());
  if (n_clips == 0) return out;
  PIPIT_ASSIGN_OR_RETURN(auto enc, audio_encoder_of(lm));
  const int32_t mark = enc->tokens().audio_token_id;
  if (std::find(out.begin(), out.end(), mark) != out.end()) return out;
  const bool bos = !out.empty() && out[0] == lm.model->info().bos_id;
  out.insert(out.begin() + (bos ? 1 : 0), n_clips, mark);
  return out;
}

Status audio_prompt(const Args& a, const LoadedModel& lm, MultimodalPrompt& p, ThreadPool& pool) {
  std::vector<AudioSource> sources;
  for (const auto& path : a.get_all("--audio")) {
    AudioSource s;
    s.path = path;
    sources.push_back(std::move(s));
  }
  return add_audio(lm, p, sources, pool);
}

}  // namespace pipit::cli
