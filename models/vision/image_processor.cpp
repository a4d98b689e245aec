// What every image processor shares: the registry of ImageProcessorKind, the common preprocessor_config.json
// fields, the dispatch to a family's processor, and HF's smart_resize (Qwen's images and videos). The families'
// processors are beside it: qwen2_vl_image_processor.cpp, clip_image_processor.cpp, deepseek_ocr_image_processor.cpp,
// gemma4_image_processor.cpp.
#include "models/vision/image_processor.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <map>

#include "models/vision/image_processor_fields.h"

namespace pipit {

namespace image_fields {

Status read_bool(const nlohmann::json& j, const char* key, bool* out) {
  if (!j.contains(key) || j[key].is_null()) return Status::ok();
  if (!j[key].is_boolean()) return Error::invalid_argument("[image processor] {}: {} must be a boolean", key, j[key].dump());
  *out = j[key].get<bool>();
  return Status::ok();
}

Status read_triple(const nlohmann::json& j, const char* key, bool positive, std::array<float, 3>* out) {
  if (!j.contains(key) || j[key].is_null()) return Status::ok();
  const auto& v = j[key];
  if (v.is_number()) {  // one value for all channels
    out->fill(float(v.get<double>()));
  } else if (v.is_array() && v.size() == 3 && v[0].is_number() && v[1].is_number() && v[2].is_number()) {
    for (size_t c = 0; c < 3; ++c) (*out)[c] = float(v[c].get<double>());  // HF: np.array(mean, dtype=float32)
  } else {
    return Error::invalid_argument("[image processor] {}: {} must be a number or 3 numbers", key, v.dump());
  }
  for (float f : *out)
    if (!std::isfinite(f) || (positive && !(f > 0)))
      return Error::invalid_argument("[image processor] {}: {} must be finite{}", key, v.dump(), positive ? " and > 0" : "");
  return Status::ok();
}

void rescale_normalize(const Image& img, const ImageProcessorConfig& c, float* out) {
  const size_t plane = size_t(img.width) * size_t(img.height);
  for (size_t i = 0; i < plane; ++i)
    for (int ch = 0; ch < 3; ++ch) {
      const uint8_t u = img.rgb[i * 3 + size_t(ch)];
      float v = c.do_rescale ? float(double(u) * c.rescale_factor) : float(u);
      if (c.do_normalize) v = (v - c.mean[size_t(ch)]) / c.std[size_t(ch)];
      out[size_t(ch) * plane + i] = v;
    }
}

}  // namespace image_fields

using namespace image_fields;

namespace {

std::map<std::string, const ImageProcessorKind*>& registry() {
  static std::map<std::string, const ImageProcessorKind*> r;
  return r;
}

}  // namespace

void register_image_processor(const char* kind, const ImageProcessorKind* impl) { registry()[kind] = impl; }

Result<const ImageProcessorKind*> find_image_processor(const std::string& kind) {
  auto it = registry().find(kind);
  if (it != registry().end()) return it->second;
  std::string known;
  for (const auto& [k, _] : registry()) known += (known.empty() ? "" : ", ") + k;
  return Error::unsupported("[image processor] no image processor '{}' (this build has {})", kind, known);
}

Status ImageProcessorKind::cap_pixels(ImageProcessorConfig&, int64_t) const { return Status::ok(); }

Status ImageProcessorKind::apply_mode(ImageProcessorConfig& c, const std::string& mode) const {
  return Error::invalid_argument("[image] an image mode ('{}') is for processors with modes (DeepSeek-OCR's); the "
                                 "'{}' image processor has none", mode, c.kind);
}

Result<std::pair<int64_t, int64_t>> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                                 int64_t max_pixels) {
  if (height < 1 || width < 1) return Error::invalid_argument("[image processor] empty image {}x{}", width, height);
  if (double(std::max(height, width)) / double(std::min(height, width)) > 200)
    return Error::invalid_argument("[image processor] image {}x{}: aspect ratio above 200 (HF's limit)", width, height);
  if (std::fegetround() != FE_TONEAREST) std::fesetround(FE_TONEAREST);
  int64_t h = std::max(factor, py_round(double(height) / double(factor)) * factor);
  int64_t w = std::max(factor, py_round(double(width) / double(factor)) * factor);
  if (h * w > max_pixels) {
    const double beta = std::sqrt(double(height * width) / double(max_pixels));
    h = std::max(factor, int64_t(std::floor(double(height) / beta / double(factor))) * factor);
    w = std::max(factor, int64_t(std::floor(double(width) / beta / double(factor))) * factor);
  } else if (h * w < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / double(height * width));
    h = int64_t(std::ceil(double(height) * beta / double(factor))) * factor;
    w = int64_t(std::ceil(double(width) * beta / double(factor))) * factor;
  }
  return std::make_pair(h, w);
}

Result<ImageProcessorConfig> parse_image_processor(const nlohmann::json& pp, ImageProcessorConfig c) {
  if (pp.is_null()) return c;
  if (!pp.is_object()) return Error::invalid_argument("[image processor] preprocessor config must be a JSON object");
  int64_t resample = int64_t(c.resample);
  PIPIT_TRY(read_int(pp, "resample", 0, 5, &resample));
  PIPIT_ASSIGN_OR_RETURN(c.resample, resample_filter_from_pil(int(resample)));
  PIPIT_TRY(read_bool(pp, "do_resize", &c.do_resize));
  PIPIT_TRY(read_bool(pp, "do_rescale", &c.do_rescale));
  PIPIT_TRY(read_bool(pp, "do_normalize", &c.do_normalize));
  PIPIT_TRY(read_bool(pp, "do_center_crop", &c.do_center_crop));
  if (pp.contains("rescale_factor") && !pp["rescale_factor"].is_null()) {
    if (!pp["rescale_factor"].is_number())
      return Error::invalid_argument("[image processor] rescale_factor: {} must be a number", pp["rescale_factor"].dump());
    c.rescale_factor = pp["rescale_factor"].get<double>();
  }
  PIPIT_TRY(read_triple(pp, "image_mean", false, &c.mean));
  PIPIT_TRY(read_triple(pp, "image_std", true, &c.std));
  const nlohmann::json size = pp.contains("size") && pp["size"].is_object() ? pp["size"] : nlohmann::json::object();
  PIPIT_ASSIGN_OR_RETURN(const ImageProcessorKind* kind, find_image_processor(c.kind));
  PIPIT_TRY(kind->parse(pp, size, c));
  return c;
}

Status cap_image_pixels(ImageProcessorConfig& cfg, int64_t max_pixels) {
  PIPIT_ASSIGN_OR_RETURN(const ImageProcessorKind* kind, find_image_processor(cfg.kind));
  return kind->cap_pixels(cfg, max_pixels);
}

Status apply_image_mode(ImageProcessorConfig& cfg, const std::string& mode) {
  PIPIT_ASSIGN_OR_RETURN(const ImageProcessorKind* kind, find_image_processor(cfg.kind));
  return kind->apply_mode(cfg, mode);
}

Result<ProcessedImage> preprocess_image(const Image& img, const ImageProcessorConfig& cfg) {
  if (img.width < 1 || img.height < 1) return Error::invalid_argument("[image processor] empty image");
  PIPIT_ASSIGN_OR_RETURN(const ImageProcessorKind* kind, find_image_processor(cfg.kind));
  return kind->preprocess(img, cfg);
}

}  // namespace pipit
