// Multimodal prompts: processor selection, image encoding and placeholder expansion; the positions are the model's
// (Model::media_positions; Qwen's get_rope_index is models/qwen_rope_index.cpp).
// reference: HF processing_qwen2_vl.py / processing_llava.py / processing_gemma4.py (placeholder expansion).
#include "runtime/multimodal.h"

#include <algorithm>
#include <cstring>

#include "core/json_depth.h"
#include "core/optional_file.h"
#include "core/storage.h"
#include "models/media_note.h"
#include "models/vision/vision_model.h"
#include "runtime/loader.h"

namespace pipit {

namespace {

Result<const VisionLanguageModel*> vision_of(const Model& m) {
  const VisionLanguageModel* v = m.vision();
  if (!v)
    return Error::invalid_argument("[image] model '{}' is text-only and does not take images{}", m.info().arch,
                                   media_note_suffix(m.info().arch));
  return v;
}

}  // namespace

Result<ImageProcessorConfig> image_processor_for(const Model& m, const nlohmann::json& pp, const ImageOptions& opt) {
  PIPIT_ASSIGN_OR_RETURN(const VisionLanguageModel* v, vision_of(m));
  PIPIT_ASSIGN_OR_RETURN(ImageProcessorConfig p, parse_image_processor(pp, v->default_processor()));
  if (opt.max_pixels < 0) return Error::invalid_argument("[image] --image-max-pixels {} must be >= 0", opt.max_pixels);
  if (opt.max_pixels > 0) PIPIT_TRY(cap_image_pixels(p, opt.max_pixels));
  if (!opt.mode.empty()) PIPIT_TRY(apply_image_mode(p, opt.mode));
  PIPIT_TRY(v->check_processor(p));
  return p;
}

Result<nlohmann::json> preprocessor_config_of(const LoadedModel& lm) {
  if (!lm.preprocessor_config.is_null()) return lm.preprocessor_config;
  const std::string path = lm.path + "/preprocessor_config.json";
  if (!is_directory(lm.path)) return nlohmann::json();
  PIPIT_ASSIGN_OR_RETURN(bool present, optional_file(path));  // a directory, FIFO or device is an error, not absent
  if (!present) return nlohmann::json();
  PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  if (json_depth(text) > kMaxJsonDepth)
    return Error::format("[image] {}: JSON nested deeper than {} levels", path, kMaxJsonDepth);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::format("[image] {}: not a JSON object", path);
  return j;
}

Result<EncodedImage> encode_image(const Model& m, const ImageProcessorConfig& proc, const Image& img, ThreadPool& pool,
                                  const TensorHook& on_tensor) {
  PIPIT_ASSIGN_OR_RETURN(const VisionLanguageModel* v, vision_of(m));
  EncodedImage e;
  PIPIT_ASSIGN_OR_RETURN(e.processed, preprocess_image(img, proc));
  Arena arena(size_t(1) << 22);
  Ctx ctx{&arena, &pool, &kernels(), on_tensor};
  PIPIT_ASSIGN_OR_RETURN(e.features, v->encode_image(ctx, e.processed));
  const int64_t want = v->n_image_tokens(e.processed), width = m.info().n_embd * (1 + v->vision_tokens().deepstack);
  if (e.features.ndim() != 2 || e.features.dim(0) != want || e.features.dim(1) != width)
    return Error::internal("[image] vision tower returned {}, expected [{}, {}]", e.features.describe(), want, width);
  return e;
}

Result<MultimodalPrompt> build_multimodal_prompt(const Model& m, std::span<const int32_t> tokens,
                                                 const std::vector<EncodedImage>& images) {
  PIPIT_ASSIGN_OR_RETURN(const VisionLanguageModel* v, vision_of(m));
  const VisionTokens& vt = v->vision_tokens();
  const int64_t width = m.info().n_embd * (1 + vt.deepstack);  // image features, then DeepStack blocks
  int64_t n_marks = 0, n_feat = 0;
  for (int32_t t : tokens) n_marks += t == vt.image_token_id;
  for (const auto& im : images) n_feat += im.features.dim(0);
  const int64_t n_img = int64_t(images.size());
  // one placeholder per image (chat template output), or already expanded (HF processor output)
  const bool expanded = n_marks != n_img;
  if (n_marks != n_img && n_marks != n_feat)
    return Error::invalid_argument("[image] the prompt has {} image tokens for {} image(s): expected one placeholder "
                                   "per image ({}), or {} when already expanded", n_marks, n_img, n_img, n_feat);

  // the tower's rows: n_embd features, then one block per DeepStack layer; each goes to its own tensor
  MultimodalPrompt p;
  const int64_t E = m.info().n_embd, n_rows = std::max<int64_t>(n_feat, 1);
  p.embd = Tensor::empty(DType::F32, {n_rows, E});
  for (int k = 0; k < vt.deepstack; ++k) p.deepstack.push_back(Tensor::empty(DType::F32, {n_rows, E}));
  int64_t row = 0;
  for (const auto& im : images) {
    if (im.features.ndim() != 2 || im.features.dim(1) != width)
      return Error::invalid_argument("[image] image features {}, expected rows of {}", im.features.describe(), width);
    for (int64_t r = 0; r < im.features.dim(0); ++r, ++row) {
      const float* f = im.features.ptr<float>() + r * width;
      std::memcpy(p.embd.row_ptr(row), f, size_t(E) * 4);
      for (int k = 0; k < vt.deepstack; ++k)
        std::memcpy(p.deepstack[size_t(k)].row_ptr(row), f + (k + 1) * E, size_t(E) * 4);
    }
  }
  // expand: each image's run of tokens takes its feature rows
  std::vector<MediaSpan> media;
  size_t image = 0;
  for (size_t i = 0; i < tokens.size();) {
    if (tokens[i] != vt.image_token_id) {
      p.tokens.push_back(tokens[i++]);
      p.embd_row.push_back(-1);
      continue;
    }
    const EncodedImage& im = images[image];
    const int64_t n = im.features.dim(0);
    if (expanded)
      for (int64_t j = 0; j < n; ++j)
        if (i + size_t(j) >= tokens.size() || tokens[i + size_t(j)] != vt.image_token_id)
          return Error::invalid_argument("[image] image {} needs a run of {} image tokens at token {}, found {}",
                                         image + 1, n, i, j);
    int64_t first_row = 0;
    for (size_t k = 0; k < image; ++k) first_row += images[k].features.dim(0);
    // Gemma 4: the processor wraps the run in <|image> ... <image|> (an expanded prompt has them already)
    auto wrap = [&](int32_t id) {
      if (expanded || id < 0) return;
      p.tokens.push_back(id);
      p.embd_row.push_back(-1);
    };
    wrap(vt.image_begin_id);
    const int64_t begin = int64_t(p.tokens.size());
    for (int64_t j = 0; j < n; ++j) {
      p.tokens.push_back(vt.image_token_id);
      p.embd_row.push_back(int32_t(first_row + j));
    }
    media.push_back({begin, int64_t(p.tokens.size()), im.processed.grid_thw});
    wrap(vt.image_end_id);
    i += expanded ? size_t(n) : 1;
    ++image;
  }
  if (image != images.size()) return Error::internal("[image] placed {} of {} images", image, images.size());
  // the positions are the model's (M-RoPE: get_rope_index); plain positions need none
  PIPIT_ASSIGN_OR_RETURN(MediaPositions mp, m.media_positions(int64_t(p.tokens.size()), media));
  if (mp.n_stream > 0 && (mp.pos.size() != size_t(mp.n_stream) * p.tokens.size() ||
                          mp.delta_after.size() != media.size()))
    return Error::internal("[image] {} positions and {} span offsets for {} tokens and {} images", mp.pos.size(),
                           mp.delta_after.size(), p.tokens.size(), media.size());
  for (size_t k = 0; k < media.size(); ++k)
    p.image_spans.push_back({media[k].begin, media[k].end, mp.n_stream > 0 ? mp.delta_after[k] : 0});
  p.mrope_pos = std::move(mp.pos);
  p.rope_delta = mp.delta;
  return p;
}

Result<MultimodalPrompt> prepare_multimodal_prompt(const LoadedModel& lm, std::span<const int32_t> tokens,
                                                   const std::vector<std::string>& sources, const ImageOptions& opt,
                                                   ThreadPool& pool) {
  PIPIT_ASSIGN_OR_RETURN(nlohmann::json pp, preprocessor_config_of(lm));
  PIPIT_ASSIGN_OR_RETURN(ImageProcessorConfig proc, image_processor_for(*lm.model, pp, opt));
  std::vector<EncodedImage> images;
  for (const auto& src : sources) {
    PIPIT_ASSIGN_OR_RETURN(Image img, load_image(src));
    auto e = encode_image(*lm.model, proc, img, pool);
    if (!e.is_ok()) return e.status().with_context("[image] " + src.substr(0, 80));
    images.push_back(std::move(e).value());
  }
  return build_multimodal_prompt(*lm.model, tokens, images);
}

std::vector<int32_t> image_placeholder_tokens(const Model& m) {
  const VisionLanguageModel* v = m.vision();
  if (!v) return {};
  const VisionTokens& t = v->vision_tokens();
  if (t.vision_start_id >= 0 && t.vision_end_id >= 0) return {t.vision_start_id, t.image_token_id, t.vision_end_id};
  return {t.image_token_id};
}

}  // namespace pipit
