// CLIPImageProcessor (LLaVA): shortest edge to `size`, PIL resize, center crop, rescale, normalize.
// reference: HF image_processing_clip.py + image_transforms.py (get_resize_output_image_size, center_crop, rescale,
// normalize).
#include <cmath>
#include <cstring>

#include "models/vision/image_processor.h"
#include "models/vision/image_processor_fields.h"

namespace pipit {

namespace {

using namespace image_fields;

Result<ProcessedImage> preprocess_clip(const Image& img, const ImageProcessorConfig& c) {
  Image cur = img;
  if (c.do_resize) {
    // get_resize_output_image_size(default_to_square=False): short side -> size, long side int()-truncated
    const bool portrait = img.width <= img.height;
    const int64_t short_side = portrait ? img.width : img.height, long_side = portrait ? img.height : img.width;
    const int64_t new_long = int64_t(double(c.shortest_edge * long_side) / double(short_side));
    // an extreme aspect ratio would ask for a huge intermediate image (HF would try): refuse it instead
    if (new_long < 1 || new_long * c.shortest_edge > kMaxImagePixels)
      return Error::invalid_argument("[image processor] image {}x{}: aspect ratio too extreme to resize its short side "
                                     "to {}", img.width, img.height, c.shortest_edge);
    const int out_w = int(portrait ? c.shortest_edge : new_long), out_h = int(portrait ? new_long : c.shortest_edge);
    if (out_w != cur.width || out_h != cur.height) cur = resize_image(cur, out_w, out_h, c.resample);
  }
  ProcessedImage out;
  out.resized_height = cur.height;
  out.resized_width = cur.width;
  if (c.do_center_crop) {
    // image_transforms.center_crop: top/left = (size - crop) // 2; an image smaller than the crop is zero-padded
    const int ch = c.crop_height, cw = c.crop_width;
    const int top = int(std::floor((cur.height - ch) / 2.0)), left = int(std::floor((cur.width - cw) / 2.0));
    Image crop;
    crop.width = cw;
    crop.height = ch;
    crop.rgb.assign(size_t(cw) * size_t(ch) * 3, 0);
    for (int y = 0; y < ch; ++y)
      for (int x = 0; x < cw; ++x) {
        const int sy = top + y, sx = left + x;
        if (sy >= 0 && sy < cur.height && sx >= 0 && sx < cur.width) std::memcpy(crop.px(x, y), cur.px(sx, sy), 3);
      }
    cur = std::move(crop);
  }
  out.pixel_values = Tensor::empty(DType::F32, {3, cur.height, cur.width});
  rescale_normalize(cur, c, out.pixel_values.ptr<float>());
  out.grid_thw = {1, 0, 0};
  return out;
}

class ClipImageProcessor : public ImageProcessorKind {
 public:
  Status parse(const nlohmann::json& pp, const nlohmann::json& size, ImageProcessorConfig& c) const override {
    if (size.contains("height") || size.contains("width"))
      return Error::unsupported("[image processor] CLIP resize to a fixed height/width is not supported (only "
                                "size.shortest_edge)");
    PIPIT_TRY(read_int(size, "shortest_edge", 1, 1 << 16, &c.shortest_edge));
    if (pp.contains("size") && pp["size"].is_number_integer())
      PIPIT_TRY(read_int(pp, "size", 1, 1 << 16, &c.shortest_edge));
    if (pp.contains("crop_size") && pp["crop_size"].is_object()) {
      PIPIT_TRY(read_int(pp["crop_size"], "height", 1, 1 << 16, &c.crop_height));
      PIPIT_TRY(read_int(pp["crop_size"], "width", 1, 1 << 16, &c.crop_width));
    } else if (pp.contains("crop_size") && pp["crop_size"].is_number_integer()) {
      PIPIT_TRY(read_int(pp, "crop_size", 1, 1 << 16, &c.crop_height));
      c.crop_width = c.crop_height;
    }
    if (int64_t(c.crop_height) * c.crop_width > kMaxImagePixels)
      return Error::invalid_argument("[image processor] crop_size {}x{} is more than the limit of {} pixels",
                                     c.crop_width, c.crop_height, kMaxImagePixels);
    bool do_pad = false;
    PIPIT_TRY(read_bool(pp, "do_pad", &do_pad));
    if (do_pad) return Error::unsupported("[image processor] do_pad (pad to square) is not supported yet");
    return Status::ok();
  }
  Result<ProcessedImage> preprocess(const Image& img, const ImageProcessorConfig& c) const override {
    return preprocess_clip(img, c);
  }
  Extent max_extent(const ImageProcessorConfig& c) const override {
    const double pixels = double(c.crop_height) * c.crop_width * 3;
    return {pixels / 3 / 196, pixels};  // patch 14
  }
};

}  // namespace

PIPIT_REGISTER_IMAGE_PROCESSOR("clip", ClipImageProcessor);

}  // namespace pipit
