// Gemma4ImageProcessor (Gemma 4; the PIL backend): an aspect-preserving resize to multiples of pooling * patch
// within max_soft_tokens * pooling^2 patches, rescale to [0, 1] (no normalize), patches in row-major grid order with
// (py, px, c) columns, zero rows up to max_soft_tokens * pooling^2.
// reference: HF image_processing_pil_gemma4.py (get_aspect_ratio_preserving_size, _preprocess) and
// ../shared/testdata/reference/gemma4_vision.py.
#include <algorithm>
#include <cmath>

#include "models/vision/image_processor.h"
#include "models/vision/image_processor_fields.h"

namespace pipit {

namespace {

using namespace image_fields;

// get_aspect_ratio_preserving_size: the largest (height, width), both multiples of pooling * patch, with the image's
// aspect ratio and at most max_patches patches; a side that would round to 0 gets one block and the other side
// floor(long / short) blocks, capped at max_side. Python float arithmetic (double), as HF.
Result<std::pair<int64_t, int64_t>> gemma4_target_size(int64_t height, int64_t width, int64_t patch, int64_t max_patches,
                                                       int64_t pooling) {
  const double total_px = double(height) * double(width), target_px = double(max_patches) * double(patch * patch);
  const double factor = std::sqrt(target_px / total_px);
  const int64_t side = pooling * patch;
  int64_t th = int64_t(std::floor(factor * double(height) / double(side))) * side;
  int64_t tw = int64_t(std::floor(factor * double(width) / double(side))) * side;
  if (th == 0 && tw == 0)
    return Error::invalid_argument("[image processor] image {}x{}: the resize target is 0 x 0", width, height);
  const int64_t max_side = (max_patches / (pooling * pooling)) * side;
  if (th == 0) {
    th = side;
    tw = std::min(int64_t(std::floor(double(width) / double(height))) * side, max_side);
  } else if (tw == 0) {
    tw = side;
    th = std::min(int64_t(std::floor(double(height) / double(width))) * side, max_side);
  }
  if (double(th) * double(tw) > target_px)
    return Error::invalid_argument("[image processor] image {}x{}: resized to {}x{} it exceeds the budget of {} "
                                   "patches", width, height, tw, th, max_patches);
  return std::make_pair(th, tw);
}

Result<ProcessedImage> preprocess_gemma4(const Image& img, const ImageProcessorConfig& c) {
  const int64_t p = c.patch_size, k = c.pooling_kernel_size, max_patches = int64_t(c.max_soft_tokens) * k * k;
  int64_t th = img.height, tw = img.width;
  if (c.do_resize) {
    PIPIT_ASSIGN_OR_RETURN(auto hw, gemma4_target_size(img.height, img.width, p, max_patches, k));
    th = hw.first;
    tw = hw.second;
  } else if (th % (p * k) || tw % (p * k) || (th / p) * (tw / p) > max_patches) {
    return Error::invalid_argument("[image processor] image {}x{} is not a multiple of pooling * patch = {} within "
                                   "{} patches (do_resize is off)", tw, th, p * k, max_patches);
  }
  const Image resized = (th == img.height && tw == img.width) ? img : resize_image(img, int(tw), int(th), c.resample);
  const int64_t gh = th / p, gw = tw / p, cols = 3 * p * p;
  ProcessedImage out;
  out.grid_thw = {1, int32_t(gh), int32_t(gw)};
  out.resized_height = int(th);
  out.resized_width = int(tw);
  // patches row-major over the grid, columns (py, px, c): a patch row of p pixels is p * 3 consecutive bytes of
  // the image, each mapped as rescale_normalize maps it (a table per channel: the value depends on the byte alone);
  // rows past the image's patches are zero (HF's padding)
  float lut[3][256];
  for (int ch = 0; ch < 3; ++ch)
    for (int u = 0; u < 256; ++u) {
      float v = c.do_rescale ? float(double(u) * c.rescale_factor) : float(u);
      if (c.do_normalize) v = (v - c.mean[size_t(ch)]) / c.std[size_t(ch)];
      lut[ch][u] = v;
    }
  out.pixel_values = Tensor::empty(DType::F32, {max_patches, cols});
  float* dst = out.pixel_values.ptr<float>();
  for (int64_t gy = 0; gy < gh; ++gy)
    for (int64_t gx = 0; gx < gw; ++gx)
      for (int64_t py = 0; py < p; ++py) {
        const uint8_t* src = resized.px(int(gx * p), int(gy * p + py));
        float* r = dst + (gy * gw + gx) * cols + py * p * 3;
        for (int64_t x = 0; x < p; ++x)
          for (int ch = 0; ch < 3; ++ch) r[x * 3 + ch] = lut[ch][src[x * 3 + ch]];
      }
  std::fill(dst + gh * gw * cols, dst + max_patches * cols, 0.0f);
  return out;
}

class Gemma4ImageProcessor : public ImageProcessorKind {
 public:
  Status parse(const nlohmann::json& pp, const nlohmann::json&, ImageProcessorConfig& c) const override {
    PIPIT_TRY(read_int(pp, "patch_size", 1, 1024, &c.patch_size));
    PIPIT_TRY(read_int(pp, "pooling_kernel_size", 1, 64, &c.pooling_kernel_size));
    PIPIT_TRY(read_int(pp, "max_soft_tokens", 1, 1 << 20, &c.max_soft_tokens));
    PIPIT_TRY(check_gemma4_soft_tokens(c.max_soft_tokens));
    return Status::ok();
  }
  Result<ProcessedImage> preprocess(const Image& img, const ImageProcessorConfig& c) const override {
    return preprocess_gemma4(img, c);
  }
  Extent max_extent(const ImageProcessorConfig& c) const override {  // max_soft_tokens pooled blocks, padded rows
    const double patches = double(c.max_soft_tokens) * c.pooling_kernel_size * c.pooling_kernel_size;
    return {patches, patches * c.patch_size * c.patch_size * 3};
  }
};

}  // namespace

Status check_gemma4_soft_tokens(int64_t n) {
  for (int64_t ok : {70, 140, 280, 560, 1120})
    if (n == ok) return Status::ok();
  return Error::invalid_argument("[image processor] max_soft_tokens {} (Gemma 4 supports 70, 140, 280, 560, 1120)", n);
}

PIPIT_REGISTER_IMAGE_PROCESSOR("gemma4", Gemma4ImageProcessor);

}  // namespace pipit
