// DeepSeek-OCR's image preparation (the remote code's infer(), no HF processor class): a global view (ImageOps.pad to
// base_size, or a plain resize for image_size <= 640 without crop mode) and, in crop mode ("Gundam"), 640x640 tiles
// of the image resized to the grid dynamic_preprocess picks; ToTensor + Normalize(0.5, 0.5).
// reference: DeepSeek-OCR's modeling_deepseekocr.py (infer, dynamic_preprocess, find_closest_aspect_ratio,
// BasicImageTransform) with Pillow 9's ImageOps.pad / contain.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "models/vision/image_processor.h"
#include "models/vision/image_processor_fields.h"

namespace pipit {

namespace {

using namespace image_fields;

constexpr int kOcrTile = 640;  // infer() calls dynamic_preprocess(image) with its default image_size: always 640

Image solid_image(int w, int h, const std::array<uint8_t, 3>& rgb) {
  Image out;
  out.width = w;
  out.height = h;
  out.rgb.resize(size_t(w) * size_t(h) * 3);
  for (size_t i = 0; i < out.rgb.size(); i += 3) std::memcpy(out.rgb.data() + i, rgb.data(), 3);
  return out;
}

// PIL ImageOps.pad(image, (S, S), BICUBIC, color): ImageOps.contain (the long side to S, the short side
// round(short / long * S), Python rounding), then pasted centred at round((S - side) * 0.5) on a `color` canvas.
Result<Image> pad_square(const Image& img, int S, const std::array<uint8_t, 3>& color, ResampleFilter f) {
  int w = S, h = S;
  const double im_ratio = double(img.width) / double(img.height);
  if (im_ratio != 1.0) {
    if (im_ratio > 1.0) h = int(py_round(double(img.height) / double(img.width) * S));
    else w = int(py_round(double(img.width) / double(img.height) * S));
  }
  if (w < 1 || h < 1)  // PIL's resize refuses a zero side: so does infer()
    return Error::invalid_argument("[image processor] image {}x{} is too elongated for DeepSeek-OCR's {}x{} view "
                                   "(a side would shrink to 0 pixels)", img.width, img.height, S, S);
  Image resized = (w == img.width && h == img.height) ? img : resize_image(img, w, h, f);
  if (w == S && h == S) return resized;
  Image out = solid_image(S, S, color);
  const int x0 = w != S ? int(py_round((S - w) * 0.5)) : 0, y0 = w != S ? 0 : int(py_round((S - h) * 0.5));
  for (int y = 0; y < h; ++y) std::memcpy(out.px(x0, y0 + y), resized.px(0, y), size_t(w) * 3);
  return out;
}

// dynamic_preprocess's grid (cols, rows): of the grids with 2 <= cols * rows <= 9 (ordered by cols * rows, as the
// remote code's sorted() of its set; equal products never tie on the aspect ratio), the one closest to the image's
// aspect ratio; on a tie, the later one when the image's area exceeds half the grid's.
std::pair<int, int> ocr_grid(int width, int height) {
  std::vector<std::pair<int, int>> ratios;
  for (int i = 1; i <= 9; ++i)
    for (int j = 1; j <= 9; ++j)
      if (i * j >= 2 && i * j <= 9) ratios.push_back({i, j});
  std::stable_sort(ratios.begin(), ratios.end(),
                   [](const auto& a, const auto& b) { return a.first * a.second < b.first * b.second; });
  const double aspect = double(width) / double(height), area = double(width) * double(height);
  double best_diff = INFINITY;
  std::pair<int, int> best = {1, 1};
  for (const auto& r : ratios) {
    const double diff = std::fabs(aspect - double(r.first) / double(r.second));
    if (diff < best_diff) {
      best_diff = diff;
      best = r;
    } else if (diff == best_diff && area > 0.5 * kOcrTile * kOcrTile * r.first * r.second) {
      best = r;
    }
  }
  return best;
}

// ToTensor (byte / 255 in float) then Normalize: (x - mean) / std in float, into [3, H, W].
void ocr_normalize(const Image& img, const ImageProcessorConfig& c, float* out) {
  const size_t plane = size_t(img.width) * size_t(img.height);
  for (size_t i = 0; i < plane; ++i)
    for (int ch = 0; ch < 3; ++ch) {
      float v = float(img.rgb[i * 3 + size_t(ch)]) / 255.0f;
      if (c.do_normalize) v = (v - c.mean[size_t(ch)]) / c.std[size_t(ch)];
      out[size_t(ch) * plane + i] = v;
    }
}

Result<ProcessedImage> preprocess_deepseek_ocr(const Image& img, const ImageProcessorConfig& c) {
  // pad colour: tuple(int(x * 255) for x in mean)
  std::array<uint8_t, 3> color{};
  for (size_t i = 0; i < 3; ++i) color[i] = uint8_t(std::clamp(int(c.mean[i] * 255.0f), 0, 255));
  ProcessedImage out;
  Image global;
  if (c.crop_mode) {
    if (img.width > kOcrTile || img.height > kOcrTile) {
      const auto [cols, rows] = ocr_grid(img.width, img.height);
      const Image big = resize_image(img, kOcrTile * cols, kOcrTile * rows, c.resample);
      out.crops = Tensor::empty(DType::F32, {int64_t(cols) * rows, 3, kOcrTile, kOcrTile});
      Image tile;
      tile.width = tile.height = kOcrTile;
      tile.rgb.resize(size_t(kOcrTile) * kOcrTile * 3);
      for (int t = 0; t < cols * rows; ++t) {
        const int x0 = (t % cols) * kOcrTile, y0 = (t / cols) * kOcrTile;
        for (int y = 0; y < kOcrTile; ++y) std::memcpy(tile.px(0, y), big.px(x0, y0 + y), size_t(kOcrTile) * 3);
        ocr_normalize(tile, c, out.crops.ptr<float>() + int64_t(t) * 3 * kOcrTile * kOcrTile);
      }
      out.crop_cols = cols;
      out.crop_rows = rows;
    }
    PIPIT_ASSIGN_OR_RETURN(global, pad_square(img, c.base_size, color, c.resample));
  } else {
    Image src = img;
    if (c.image_size <= 640 && (img.width != c.image_size || img.height != c.image_size))
      src = resize_image(img, c.image_size, c.image_size, c.resample);  // aspect ratio not kept, as infer()
    PIPIT_ASSIGN_OR_RETURN(global, pad_square(src, c.image_size, color, c.resample));
  }
  out.resized_width = global.width;
  out.resized_height = global.height;
  out.pixel_values = Tensor::empty(DType::F32, {3, global.height, global.width});
  ocr_normalize(global, c, out.pixel_values.ptr<float>());
  out.grid_thw = {1, out.crop_rows, out.crop_cols};
  return out;
}

class DeepseekOcrImageProcessor : public ImageProcessorKind {
 public:
  Status parse(const nlohmann::json& pp, const nlohmann::json&, ImageProcessorConfig& c) const override {
    // infer()'s arguments, when a preprocessor config spells them out
    PIPIT_TRY(read_int(pp, "base_size", 16, 4096, &c.base_size));
    PIPIT_TRY(read_int(pp, "image_size", 16, 4096, &c.image_size));
    PIPIT_TRY(read_bool(pp, "crop_mode", &c.crop_mode));
    return Status::ok();
  }
  Result<ProcessedImage> preprocess(const Image& img, const ImageProcessorConfig& c) const override {
    return preprocess_deepseek_ocr(img, c);
  }
  Status apply_mode(ImageProcessorConfig& c, const std::string& mode) const override {
    return apply_deepseek_ocr_mode(c, mode);
  }
  Extent max_extent(const ImageProcessorConfig& c) const override {
    const double pixels = double(c.base_size) * c.base_size * 3;
    return {pixels / 3 / 256, pixels};  // patch 16, the global view (tiles are encoded one at a time)
  }
};

}  // namespace

Status apply_deepseek_ocr_mode(ImageProcessorConfig& c, const std::string& mode) {
  struct Mode {
    const char* name;
    int base, image;
    bool crop;
  };
  static constexpr Mode kModes[] = {{"tiny", 512, 512, false}, {"small", 640, 640, false},
                                    {"base", 1024, 1024, false}, {"large", 1280, 1280, false},
                                    {"gundam", 1024, 640, true}};
  for (const Mode& m : kModes)
    if (mode == m.name) {
      c.base_size = m.base;
      c.image_size = m.image;
      c.crop_mode = m.crop;
      return Status::ok();
    }
  return Error::invalid_argument("[image processor] unknown DeepSeek-OCR mode '{}' (tiny, small, base, large, gundam)",
                                 mode);
}

PIPIT_REGISTER_IMAGE_PROCESSOR("deepseek_ocr", DeepseekOcrImageProcessor);

}  // namespace pipit
