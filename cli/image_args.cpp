// --image handling for the CLI.
#include "cli/image_args.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "models/vision/video_file.h"
#include "models/vision/vision_model.h"
#include "runtime/multimodal_video.h"

namespace pipit::cli {

void add_image_options(Args& a) {
  a.multi({"--image"}, "image file (PNG/JPEG) or data: URL; repeatable, in prompt order");
  a.option({"--image-max-pixels"}, "cap the pixels an image is resized to (Qwen2-VL: fewer image tokens)");
  a.option({"--image-mode"}, "DeepSeek-OCR resolution mode: tiny, small, base, large, gundam (default gundam)");
}

bool has_images(const Args& a) { return !a.get_all("--image").empty(); }

Result<ImageOptions> image_options(const Args& a) {
  ImageOptions o;
  if (a.has("--image-max-pixels")) {
    PIPIT_ASSIGN_OR_RETURN(int64_t v, a.get_int("--image-max-pixels"));
    if (v < 1) return Error::invalid_argument("--image-max-pixels {}: must be >= 1", v);
    o.max_pixels = v;
  }
  if (a.has("--image-mode")) o.mode = a.get("--image-mode");
  return o;
}

Result<MultimodalPrompt> image_prompt(const Args& a, const LoadedModel& lm, std::span<const int32_t> tokens,
                                      ThreadPool& pool) {
  PIPIT_ASSIGN_OR_RETURN(ImageOptions opt, image_options(a));
  return prepare_multimodal_prompt(lm, tokens, a.get_all("--image"), opt, pool);
}

void add_video_options(Args& a) {
  a.option({"--video"}, "a video file (MP4, WebM, MKV, MOV, AVI, ...; decoded with FFmpeg) or its frames (PNG/JPEG) "
                        "in order: a directory (sorted by name) or a comma-separated list; models with video input");
  a.option({"--video-fps"}, "frame rate of --video frames given as images (a video file has its own)", "2");
}

bool has_video(const Args& a) { return a.has("--video"); }

namespace {

// The --video frame files: a directory's PNG/JPEG files by name, or a comma-separated list.
Result<std::vector<std::string>> video_frame_files(const std::string& spec) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    for (const auto& e : fs::directory_iterator(spec, ec)) {
      std::string ext = e.path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
      if (e.is_regular_file() && (ext == ".png" || ext == ".jpg" || ext == ".jpeg")) files.push_back(e.path().string());
    }
    if (ec) return Error::invalid_argument("--video {}: {}", spec, ec.message());
    std::sort(files.begin(), files.end());
  } else {
    for (size_t b = 0; b <= spec.size();) {
      const size_t e = std::min(spec.find(',', b), spec.size());
      if (e > b) files.push_back(spec.substr(b, e - b));
      b = e + 1;
    }
    if (files.size() == 1 && !fs::is_regular_file(files[0], ec))
      return Error::invalid_argument("--video {}: not a video file, a directory of frames nor a frame file", spec);
  }
  if (files.empty()) return Error::invalid_argument("--video {}: no PNG/JPEG frames", spec);
  constexpr size_t kMaxFrames = 1000000;  // only the sampled ones are decoded: a bound on the list of names
  if (files.size() > kMaxFrames)
    return Error::invalid_argument("--video {}: {} frames, more than {}", spec, files.size(), kMaxFrames);
  return files;
}

}  // namespace

namespace {

// A single file that is not a PNG/JPEG frame (by its first bytes), or a data:video URL: a video file.
bool is_video_file(const std::string& spec) {
  if (is_video_data_url(spec)) return true;
  std::error_code ec;
  if (spec.find(',') != std::string::npos || !std::filesystem::is_regular_file(spec, ec)) return false;
  unsigned char head[8] = {};
  FILE* f = std::fopen(spec.c_str(), "rb");
  if (!f) return false;
  const size_t n = std::fread(head, 1, sizeof(head), f);
  std::fclose(f);
  const bool png = n >= 8 && std::memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0;
  const bool jpeg = n >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF;
  return !png && !jpeg;
}

}  // namespace

Result<EncodedVideo> encode_video_frames(const LoadedModel& lm, const std::string& spec, double fps, ThreadPool& pool,
                                         const TensorHook& on_tensor) {
  PIPIT_ASSIGN_OR_RETURN(nlohmann::json vpp, video_preprocessor_config_of(lm));
  PIPIT_ASSIGN_OR_RETURN(VideoProcessorConfig vproc, video_processor_for(*lm.model, vpp));
  if (is_video_file(spec)) {
    auto e = encode_video_source(*lm.model, vproc, spec, pool, on_tensor);
    if (!e.is_ok()) return e.status().with_context("--video");
    return e;
  }
  PIPIT_ASSIGN_OR_RETURN(std::vector<std::string> files, video_frame_files(spec));
  auto e = encode_video_files(*lm.model, vproc, files, fps, pool, on_tensor);  // decodes the sampled frames only
  if (!e.is_ok()) return e.status().with_context("--video");
  return e;
}

Result<MultimodalPrompt> media_prompt(const Args& a, const LoadedModel& lm, const Tokenizer& tok,
                                      std::span<const int32_t> tokens, ThreadPool& pool) {
  if (!has_video(a)) return image_prompt(a, lm, tokens, pool);
  PIPIT_ASSIGN_OR_RETURN(double fps, a.get_float("--video-fps"));
  PIPIT_ASSIGN_OR_RETURN(EncodedVideo video, encode_video_frames(lm, a.get("--video"), fps, pool));
  std::vector<EncodedImage> images;
  if (has_images(a)) {
    PIPIT_ASSIGN_OR_RETURN(ImageOptions opt, image_options(a));
    PIPIT_ASSIGN_OR_RETURN(nlohmann::json pp, preprocessor_config_of(lm));
    PIPIT_ASSIGN_OR_RETURN(ImageProcessorConfig proc, image_processor_for(*lm.model, pp, opt));
    for (const auto& src : a.get_all("--image")) {
      PIPIT_ASSIGN_OR_RETURN(Image img, load_image(src));
      PIPIT_ASSIGN_OR_RETURN(EncodedImage e, encode_image(*lm.model, proc, img, pool));
      images.push_back(std::move(e));
    }
  }
  const TextEncoder encode = [&tok](const std::string& text) { return tok.encode(text, /*add_special_tokens=*/false); };
  return build_multimodal_prompt(*lm.model, tokens, images, {video}, encode);
}

std::vector<int32_t> with_video_placeholder(const Model& m, std::span<const int32_t> ids) {
  std::vector<int32_t> out(ids.begin(), ids.end());
  const std::vector<int32_t> mark = video_placeholder_tokens(m);  // the model's video processor writes it
  if (mark.empty()) return out;
  if (std::find(out.begin(), out.end(), m.vision()->vision_tokens().video_token_id) != out.end()) return out;
  const bool bos = !out.empty() && out[0] == m.info().bos_id;
  out.insert(out.begin() + (bos ? 1 : 0), mark.begin(), mark.end());
  return out;
}

std::vector<int32_t> with_image_placeholders(const Model& m, std::span<const int32_t> ids, size_t n_images) {
  std::vector<int32_t> out(ids.begin(), ids.end());
  const std::vector<int32_t> mark = image_placeholder_tokens(m);
  if (mark.empty() || n_images == 0) return out;
  const int32_t image_id = mark.size() == 3 ? mark[1] : mark[0];
  if (std::find(out.begin(), out.end(), image_id) != out.end()) return out;
  std::vector<int32_t> marks;
  for (size_t i = 0; i < n_images; ++i) marks.insert(marks.end(), mark.begin(), mark.end());
  const bool bos = !out.empty() && out[0] == m.info().bos_id;
  out.insert(out.begin() + (bos ? 1 : 0), marks.begin(), marks.end());
  return out;
}

Tensor position_ids_tensor(const MultimodalPrompt& p) {
  const int64_t T = int64_t(p.tokens.size());
  if (!p.mrope_pos.empty()) {
    Tensor t = Tensor::empty(DType::I32, {3, 1, T});
    std::memcpy(t.data(), p.mrope_pos.data(), t.nbytes());
    return t;
  }
  Tensor t = Tensor::empty(DType::I32, {1, T});
  for (int64_t i = 0; i < T; ++i) t.ptr<int32_t>()[i] = int32_t(i);
  return t;
}

}  // namespace pipit::cli
