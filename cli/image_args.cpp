// --image handling for the CLI.
#include "cli/image_args.h"

#include <algorithm>
#include <cstring>

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
