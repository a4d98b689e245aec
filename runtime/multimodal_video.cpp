// Videos in a prompt: processor selection, encoding, and the placeholder replaced by the processor's segments (see
// multimodal_video.h). Every family decision is the VideoProcessorKind's (models/vision/video_processor.h).
#include "runtime/multimodal_video.h"

#include <algorithm>
#include <cstring>

#include "core/json_depth.h"
#include "core/optional_file.h"
#include "core/storage.h"
#include "models/vision/video_file.h"
#include "models/vision/vision_model.h"
#include "runtime/loader.h"

namespace pipit {

namespace {

Result<const VisionLanguageModel*> video_model(const Model& m) {
  if (!takes_video(m)) return Error::invalid_argument("[video] model '{}' does not take video input", m.info().arch);
  return m.vision();
}

}  // namespace

bool takes_video(const Model& m) {
  const VisionLanguageModel* v = m.vision();
  return v && v->vision_tokens().video_token_id >= 0 && v->default_video_processor().has_value();
}

std::vector<int32_t> video_placeholder_tokens(const Model& m) {
  if (!takes_video(m)) return {};
  auto kind = find_video_processor(m.vision()->default_video_processor()->kind);
  if (!kind.is_ok()) return {};
  return (*kind)->placeholder(m.vision()->vision_tokens());
}

Result<VideoProcessorConfig> video_processor_for(const Model& m, const nlohmann::json& vpp) {
  PIPIT_ASSIGN_OR_RETURN(const VisionLanguageModel* v, video_model(m));
  const VideoProcessorConfig model = *v->default_video_processor();
  PIPIT_ASSIGN_OR_RETURN(VideoProcessorConfig c, parse_video_processor(vpp, model));
  PIPIT_ASSIGN_OR_RETURN(const VideoProcessorKind* kind, find_video_processor(c.kind));
  PIPIT_TRY(kind->check(c, model));
  return c;
}

Result<nlohmann::json> video_preprocessor_config_of(const LoadedModel& lm) {
  const std::string path = lm.path + "/video_preprocessor_config.json";
  if (!is_directory(lm.path)) return nlohmann::json();
  PIPIT_ASSIGN_OR_RETURN(bool present, optional_file(path));  // a directory, FIFO or device is an error, not absent
  if (!present) return nlohmann::json();
  PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  if (json_depth(text) > kMaxJsonDepth)
    return Error::format("[video] {}: JSON nested deeper than {} levels", path, kMaxJsonDepth);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::format("[video] {}: not a JSON object", path);
  return j;
}

Result<EncodedVideo> encode_video(const Model& m, const VideoProcessorConfig& proc, std::span<const Image> frames,
                                  double fps, ThreadPool& pool, const TensorHook& on_tensor) {
  const FrameSource get = [&frames](int32_t i) -> Result<Image> { return frames[size_t(i)]; };
  return encode_video(m, proc, int64_t(frames.size()), get, fps, pool, on_tensor);
}

Result<EncodedVideo> encode_video_files(const Model& m, const VideoProcessorConfig& proc,
                                        const std::vector<std::string>& frames, double fps, ThreadPool& pool,
                                        const TensorHook& on_tensor) {
  const FrameSource get = [&frames](int32_t i) -> Result<Image> {
    auto img = load_image(frames[size_t(i)]);
    if (!img.is_ok()) return img.status().with_context("[video] frame " + std::to_string(i));
    return img;
  };
  return encode_video(m, proc, int64_t(frames.size()), get, fps, pool, on_tensor);
}

Result<EncodedVideo> encode_video_source(const Model& m, const VideoProcessorConfig& proc, const std::string& source,
                                         ThreadPool& pool, const TensorHook& on_tensor) {
  PIPIT_TRY(video_model(m).status());  // a model without video input: no decoding
  PIPIT_ASSIGN_OR_RETURN(std::unique_ptr<VideoFile> file, open_video(source));
  return encode_video_file(m, proc, *file, pool, on_tensor);
}

Result<EncodedVideo> encode_video_file(const Model& m, const VideoProcessorConfig& proc, VideoFile& file,
                                       ThreadPool& pool, const TensorHook& on_tensor) {
  const FrameSource get = [&file](int32_t i) { return file.frame(i); };
  return encode_video(m, proc, file.n_frames(), get, file.fps(), pool, on_tensor);
}

Result<EncodedVideo> encode_video(const Model& m, const VideoProcessorConfig& proc, int64_t n_frames,
                                  const FrameSource& frame, double fps, ThreadPool& pool, const TensorHook& on_tensor) {
  PIPIT_ASSIGN_OR_RETURN(const VisionLanguageModel* v, video_model(m));
  EncodedVideo e;
  PIPIT_ASSIGN_OR_RETURN(e.processed, preprocess_video(n_frames, frame, fps, proc));
  Arena arena(size_t(1) << 22);
  Ctx ctx{&arena, &pool, &kernels(), on_tensor};
  PIPIT_ASSIGN_OR_RETURN(e.features, v->encode_image(ctx, e.processed.patches));
  const int64_t want = v->n_image_tokens(e.processed.patches), width = m.info().n_embd;
  if (e.features.ndim() != 2 || e.features.dim(0) != want || e.features.dim(1) != width)
    return Error::internal("[video] vision tower returned {}, expected [{}, {}]", e.features.describe(), want, width);
  return e;
}

Result<MultimodalPrompt> build_multimodal_prompt(const Model& m, std::span<const int32_t> tokens,
                                                 const std::vector<EncodedImage>& images,
                                                 const std::vector<EncodedVideo>& videos,
                                                 const TextEncoder& encode_text) {
  if (videos.empty()) return build_multimodal_prompt(m, tokens, images);
  PIPIT_ASSIGN_OR_RETURN(const VisionLanguageModel* v, video_model(m));
  const VisionTokens& vt = v->vision_tokens();
  PIPIT_ASSIGN_OR_RETURN(const VideoProcessorKind* kind, find_video_processor(v->default_video_processor()->kind));
  const std::vector<int32_t> mark = kind->placeholder(vt);
  int64_t n_vmarks = 0, n_imarks = 0, n_ifeat = 0;
  for (int32_t t : tokens) n_vmarks += t == vt.video_token_id, n_imarks += t == vt.image_token_id;
  for (const auto& im : images) n_ifeat += im.features.dim(0);
  if (n_vmarks != int64_t(videos.size()))
    return Error::invalid_argument("[video] the prompt has {} video tokens for {} video(s): expected one placeholder "
                                   "per video", n_vmarks, videos.size());
  const bool images_expanded = n_imarks != int64_t(images.size());
  if (images_expanded && n_imarks != n_ifeat)
    return Error::invalid_argument("[image] the prompt has {} image tokens for {} image(s): expected one placeholder "
                                   "per image ({}), or {} when already expanded", n_imarks, images.size(),
                                   images.size(), n_ifeat);
  // Everything expanded, each run of a video as an image of the segment's grid in prompt order; its tokens marked
  // as image tokens until build_multimodal_prompt has placed them
  std::vector<int32_t> ids;
  std::vector<EncodedImage> parts;
  std::vector<bool> is_video;
  size_t image = 0, video = 0;
  for (size_t i = 0; i < tokens.size();) {
    if (tokens[i] == vt.image_token_id) {
      if (image >= images.size()) return Error::invalid_argument("[image] more image placeholders than images");
      const EncodedImage& im = images[image++];
      const size_t n = size_t(im.features.dim(0)), run = images_expanded ? n : 1;
      for (size_t j = 0; j < run; ++j)
        if (i + j >= tokens.size() || tokens[i + j] != vt.image_token_id)
          return Error::invalid_argument("[image] image {} needs a run of {} image tokens at token {}, found {}",
                                         image, n, i, j);
      ids.insert(ids.end(), n, vt.image_token_id);
      parts.push_back(im);
      is_video.push_back(false);
      i += run;
      continue;
    }
    if (tokens[i] != vt.video_token_id) {
      ids.push_back(tokens[i++]);
      continue;
    }
    const EncodedVideo& vd = videos[video++];
    // the template's whole placeholder (the processor's: the video token and its framing) is replaced by the
    // processor's segments, each framed by the processor itself; a lone video token likewise
    const size_t k = size_t(std::find(mark.begin(), mark.end(), vt.video_token_id) - mark.begin());
    bool framed = mark.size() > 1 && k < mark.size() && ids.size() >= k && i + (mark.size() - k) <= tokens.size();
    for (size_t j = 0; framed && j < mark.size(); ++j)
      if (j < k ? ids[ids.size() - k + j] != mark[j] : j > k && tokens[i + j - k] != mark[j]) framed = false;
    if (framed) ids.resize(ids.size() - k);
    const int64_t E = m.info().n_embd;
    PIPIT_ASSIGN_OR_RETURN(std::vector<VideoSegment> segments, kind->expand(vd.processed, vt, encode_text));
    int64_t rows = 0;
    for (const auto& sg : segments) {
      if (sg.rows < 1) return Error::internal("[video] the processor laid out a segment of {} rows", sg.rows);
      rows += sg.rows;
    }
    if (vd.features.ndim() != 2 || vd.features.dim(0) != rows || vd.features.dim(1) != E)
      return Error::internal("[video] features {} for {} rows in {} segments", vd.features.describe(), rows,
                             segments.size());
    int64_t row = 0;
    for (const auto& sg : segments) {
      ids.insert(ids.end(), sg.before.begin(), sg.before.end());
      ids.insert(ids.end(), size_t(sg.rows), vt.image_token_id);
      ids.insert(ids.end(), sg.after.begin(), sg.after.end());
      EncodedImage part;
      part.processed.grid_thw = sg.grid;
      part.features = Tensor::empty(DType::F32, {sg.rows, E});
      std::memcpy(part.features.data(), vd.features.row_ptr(row), size_t(sg.rows * E) * 4);
      row += sg.rows;
      parts.push_back(std::move(part));
      is_video.push_back(true);
    }
    i += framed ? mark.size() - k : 1;
  }
  if (image != images.size())
    return Error::invalid_argument("[image] the prompt has placeholders for {} of {} image(s)", image, images.size());
  PIPIT_ASSIGN_OR_RETURN(MultimodalPrompt p, build_multimodal_prompt(m, ids, parts));
  if (p.image_spans.size() != parts.size())
    return Error::internal("[video] {} spans for {} images and video runs", p.image_spans.size(), parts.size());
  for (size_t k = 0; k < parts.size(); ++k)  // HF's ids: the video token at the video rows
    if (is_video[k])
      for (int64_t r = p.image_spans[k].begin; r < p.image_spans[k].end; ++r) p.tokens[size_t(r)] = vt.video_token_id;
  return p;
}

}  // namespace pipit
