// Audio clips into a prompt (audio_input.h): the model's audio record (models/audio/audio_model.h) says how a clip's
// placeholder expands; nothing here knows a family.
#include "runtime/audio_input.h"

#include <algorithm>
#include <cstring>

#include "core/json_depth.h"
#include "core/optional_file.h"
#include "core/storage.h"
#include "runtime/loader.h"

namespace pipit {

namespace {

// processor_config.json next to config.json (null when absent: the Hub defaults apply).
Result<nlohmann::json> processor_config_of(const LoadedModel& lm) {
  const std::string path = lm.path + "/processor_config.json";
  if (!is_directory(lm.path)) return nlohmann::json();
  PIPIT_ASSIGN_OR_RETURN(bool present, optional_file(path));  // a directory, FIFO or device is an error, not absent
  if (!present) return nlohmann::json();
  PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  if (json_depth(text) > kMaxJsonDepth)
    return Error::format("[audio] {}: JSON nested deeper than {} levels", path, kMaxJsonDepth);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::format("[audio] {}: not a JSON object", path);
  return j;
}

}  // namespace

Result<std::unique_ptr<AudioEncoder>> audio_encoder_of(const LoadedModel& lm) {
  if (!takes_audio(lm.config.model_type()))
    return Error::invalid_argument("[audio] model type '{}' does not take audio", lm.model->info().arch);
  PIPIT_ASSIGN_OR_RETURN(nlohmann::json proc, processor_config_of(lm));
  return make_audio_encoder(lm.config, *lm.weights, proc);
}

Result<Tensor> encode_audio(const AudioEncoder& enc, std::span<const float> samples, ThreadPool& pool,
                            const TensorHook& on_tensor) {
  Arena arena(size_t(1) << 22);
  Ctx ctx{&arena, &pool, &kernels(), on_tensor};
  return enc.encode(ctx, samples);
}

Result<std::vector<float>> load_audio(const AudioSource& src, double max_seconds) {
  const std::string what = !src.what.empty() ? src.what : !src.path.empty() ? src.path : "audio";
  if (!src.pcm.empty() || (src.path.empty() && src.bytes.empty())) {
    PIPIT_TRY(check_pcm(src.pcm, max_seconds, what));
    return src.pcm;
  }
  Result<AudioClip> clip = !src.path.empty() ? decode_audio_file(src.path, max_seconds)
                                             : decode_audio_bytes(src.bytes, src.format, max_seconds, what);
  if (!clip.is_ok()) return clip.status();
  return std::move(clip->samples);
}

MultimodalPrompt text_prompt(std::span<const int32_t> tokens) {
  MultimodalPrompt p;
  p.tokens.assign(tokens.begin(), tokens.end());
  return p;
}

Status splice_audio(MultimodalPrompt& p, const AudioTokens& t, const std::vector<Tensor>& clips) {
  if (!p.mrope_pos.empty()) return Error::unsupported("[audio] audio in an M-RoPE prompt is not supported");
  int64_t n_marks = 0, n_feat = 0;
  for (int32_t id : p.tokens) n_marks += id == t.audio_token_id;
  for (const auto& c : clips) n_feat += c.dim(0);
  const int64_t n_clip = int64_t(clips.size());
  if (n_clip == 0) {
    if (n_marks == 0) return Status::ok();
    return Error::invalid_argument("[audio] the prompt has {} audio tokens but no audio clip was given", n_marks);
  }
  const bool expanded = n_marks != n_clip;  // one placeholder per clip (template output) or the processor's runs
  if (n_marks != n_clip && n_marks != n_feat)
    return Error::invalid_argument("[audio] the prompt has {} audio tokens for {} clip(s): expected one placeholder "
                                   "per clip ({}), or {} when already expanded", n_marks, n_clip, n_clip, n_feat);
  // the rows already in p.embd (images), then the clips'
  int64_t width = 0, used = 0;
  for (int32_t r : p.embd_row) used = std::max<int64_t>(used, r + 1);
  for (const auto& c : clips) {
    if (c.ndim() != 2 || (width && c.dim(1) != width))
      return Error::invalid_argument("[audio] clip features {}", c.describe());
    width = c.dim(1);
  }
  if (used > 0 && p.embd.dim(1) != width)
    return Error::unsupported("[audio] image rows of width {} and audio rows of width {} in one prompt",
                              p.embd.dim(1), width);
  Tensor embd = Tensor::empty(DType::F32, {used + n_feat, width});
  if (used > 0) std::memcpy(embd.data(), p.embd.data(), size_t(used * width) * sizeof(float));
  int64_t row = used;
  std::vector<int64_t> first_row;
  for (const auto& c : clips) {
    first_row.push_back(row);
    std::memcpy(embd.row_ptr(row), c.data(), c.nbytes());
    row += c.dim(0);
  }
  MultimodalPrompt out;
  out.embd = embd;
  const bool had_rows = !p.embd_row.empty();
  size_t clip = 0;
  std::vector<std::pair<int64_t, int64_t>> shift;  // (old token index, new index) for carrying image spans over
  for (size_t i = 0; i < p.tokens.size();) {
    if (p.tokens[i] != t.audio_token_id) {
      shift.push_back({int64_t(i), int64_t(out.tokens.size())});
      out.tokens.push_back(p.tokens[i]);
      out.embd_row.push_back(had_rows ? p.embd_row[i] : -1);
      ++i;
      continue;
    }
    const int64_t n = clips[clip].dim(0);
    if (expanded) {
      for (int64_t j = 0; j < n; ++j)
        if (i + size_t(j) >= p.tokens.size() || p.tokens[i + size_t(j)] != t.audio_token_id)
          return Error::invalid_argument("[audio] clip {} needs a run of {} audio tokens at token {}, found {}",
                                         clip + 1, n, i, j);
    } else {  // the placeholder -> the processor's tokens before, n x the placeholder, its tokens after
      out.tokens.insert(out.tokens.end(), t.before.begin(), t.before.end());
      out.embd_row.insert(out.embd_row.end(), t.before.size(), -1);
    }
    const int64_t begin = int64_t(out.tokens.size());
    for (int64_t j = 0; j < n; ++j) {
      out.tokens.push_back(t.audio_token_id);
      out.embd_row.push_back(int32_t(first_row[clip] + j));
    }
    // recorded with the images' spans: a session never keeps half a clip when it rewinds
    out.image_spans.push_back({begin, int64_t(out.tokens.size()), 0});
    if (!expanded) {
      out.tokens.insert(out.tokens.end(), t.after.begin(), t.after.end());
      out.embd_row.insert(out.embd_row.end(), t.after.size(), -1);
    }
    i += expanded ? size_t(n) : 1;
    ++clip;
  }
  for (const auto& sp : p.image_spans) {  // image spans move with the tokens before them
    int64_t b = sp.begin, e = sp.end;
    for (const auto& [o, nw] : shift) {
      if (o == sp.begin) b = nw;
      if (o == sp.end - 1) e = nw + 1;
    }
    out.image_spans.push_back({b, e, sp.delta_after});
  }
  std::sort(out.image_spans.begin(), out.image_spans.end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  p = std::move(out);
  return Status::ok();
}

Status add_audio(const LoadedModel& lm, MultimodalPrompt& p, const std::vector<AudioSource>& sources,
                 ThreadPool& pool) {
  PIPIT_ASSIGN_OR_RETURN(auto enc, audio_encoder_of(lm));
  std::vector<Tensor> clips;
  for (const auto& src : sources) {
    PIPIT_ASSIGN_OR_RETURN(std::vector<float> pcm, load_audio(src, enc->max_seconds()));
    auto e = encode_audio(*enc, pcm, pool);
    if (!e.is_ok()) return e.status().with_context("[audio] " + (src.what.empty() ? src.path : src.what));
    clips.push_back(std::move(e).value());
  }
  return splice_audio(p, enc->tokens(), clips);
}

std::vector<int32_t> audio_placeholder_tokens(const AudioEncoder& enc) { return {enc.tokens().audio_token_id}; }

}  // namespace pipit
