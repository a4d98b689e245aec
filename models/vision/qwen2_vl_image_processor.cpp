// Qwen2VLImageProcessor (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5): smart_resize to multiples of patch * merge within
// [min_pixels, max_pixels], PIL resize, rescale, normalize, the still image repeated temporal_patch_size times, then
// patches flattened in (t, h/m, w/m, m, m) row order with (c, t, py, px) columns.
// reference: HF image_processing_qwen2_vl.py (smart_resize, _preprocess).
#include <cstring>

#include "models/vision/image_processor.h"
#include "models/vision/image_processor_fields.h"
#include "models/vision/qwen_patch_rows.h"

namespace pipit {

namespace {

using namespace image_fields;

Result<ProcessedImage> preprocess_qwen(const Image& img, const ImageProcessorConfig& c) {
  const int64_t p = c.patch_size, m = c.merge_size, tps = c.temporal_patch_size;
  int64_t rh = img.height, rw = img.width;
  if (c.do_resize) {
    PIPIT_ASSIGN_OR_RETURN(auto hw, smart_resize(img.height, img.width, p * m, c.min_pixels, c.max_pixels));
    rh = hw.first;
    rw = hw.second;
  }
  if (rh % (p * m) || rw % (p * m))
    return Error::invalid_argument("[image processor] image {}x{} is not a multiple of patch * merge = {} "
                                   "(do_resize is off)", rw, rh, p * m);
  const Image resized = (rh == img.height && rw == img.width) ? img : resize_image(img, int(rw), int(rh), c.resample);
  std::vector<float> chw(size_t(3 * rh * rw));
  rescale_normalize(resized, c, chw.data());

  const int64_t gh = rh / p, gw = rw / p, cols = 3 * tps * p * p;
  ProcessedImage out;
  out.grid_thw = {1, int32_t(gh), int32_t(gw)};  // a still image: one temporal patch of tps identical frames
  out.resized_height = int(rh);
  out.resized_width = int(rw);
  out.pixel_values = Tensor::empty(DType::F32, {gh * gw, cols});
  qwen_patch_rows(out.pixel_values.ptr<float>(), gh, gw, m, p, tps, rh, rw, [&](int64_t) { return chw.data(); });
  return out;
}

class Qwen2VlImageProcessor : public ImageProcessorKind {
 public:
  Status parse(const nlohmann::json& pp, const nlohmann::json& size, ImageProcessorConfig& c) const override {
    // Pixel counts beyond the decoder's limit would only make the resized image (and the vision tower's patches)
    // too large to allocate: the same bound as a decoded image's.
    const int64_t kBig = kMaxImagePixels;
    // newer HF: size {shortest_edge: min_pixels, longest_edge: max_pixels}; min_pixels / max_pixels override it
    PIPIT_TRY(read_int(size, "shortest_edge", 1, kBig, &c.min_pixels));
    PIPIT_TRY(read_int(size, "longest_edge", 1, kBig, &c.max_pixels));
    PIPIT_TRY(read_int(pp, "min_pixels", 1, kBig, &c.min_pixels));
    PIPIT_TRY(read_int(pp, "max_pixels", 1, kBig, &c.max_pixels));
    PIPIT_TRY(read_int(pp, "patch_size", 1, 1024, &c.patch_size));
    PIPIT_TRY(read_int(pp, "merge_size", 1, 64, &c.merge_size));
    PIPIT_TRY(read_int(pp, "temporal_patch_size", 1, 64, &c.temporal_patch_size));
    if (c.min_pixels > c.max_pixels)
      return Error::invalid_argument("[image processor] min_pixels {} > max_pixels {}", c.min_pixels, c.max_pixels);
    return Status::ok();
  }
  Result<ProcessedImage> preprocess(const Image& img, const ImageProcessorConfig& c) const override {
    return preprocess_qwen(img, c);
  }
  Status cap_pixels(ImageProcessorConfig& c, int64_t max_pixels) const override {
    const int64_t factor = int64_t(c.patch_size) * c.merge_size;
    if (max_pixels < factor * factor)
      return Error::invalid_argument("[image] --image-max-pixels {} is below one merged patch ({}x{} = {} pixels)",
                                     max_pixels, factor, factor, factor * factor);
    c.max_pixels = std::min(c.max_pixels, max_pixels);
    c.min_pixels = std::min(c.min_pixels, c.max_pixels);
    return Status::ok();
  }
  Extent max_extent(const ImageProcessorConfig& c) const override {
    return {double(c.max_pixels) / double(c.patch_size * c.patch_size),
            double(c.max_pixels) * 3 * c.temporal_patch_size};
  }
  bool concatenates_patches() const override { return true; }
};

}  // namespace

PIPIT_REGISTER_IMAGE_PROCESSOR("qwen2_vl", Qwen2VlImageProcessor);

}  // namespace pipit
