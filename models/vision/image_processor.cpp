// Qwen2-VL, CLIP and DeepSeek-OCR image preprocessing. reference: HF image_processing_qwen2_vl.py (smart_resize,
// _preprocess), image_processing_clip.py + image_transforms.py (get_resize_output_image_size, center_crop, rescale,
// normalize); DeepSeek-OCR's remote code modeling_deepseekocr.py (infer, dynamic_preprocess,
// find_closest_aspect_ratio, BasicImageTransform) with Pillow 9's ImageOps.pad / contain; Gemma 4:
// image_processing_pil_gemma4.py (get_aspect_ratio_preserving_size, _preprocess) and ../shared/testdata/reference/
// gemma4_vision.py.
#include "models/vision/image_processor.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstring>

namespace pipit {

namespace {

// Python round(): half to even (the default rounding mode of nearbyint).
int64_t py_round(double x) { return int64_t(std::nearbyint(x)); }

Status read_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, auto* out) {
  if (!j.contains(key) || j[key].is_null()) return Status::ok();
  const auto& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    return Error::invalid_argument("[image processor] {}: {} must be an integer in [{}, {}]", key, v.dump(), lo, hi);
  *out = decltype(+*out)(v.get<int64_t>());
  return Status::ok();
}

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

// CHW float planes from 8-bit RGB: rescale (double multiply, cast to float) then normalize (float), as HF.
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
  float* dst = out.pixel_values.ptr<float>();
  // rows: (block row, block col, row in block, col in block); columns: (channel, frame, py, px)
  int64_t row = 0;
  for (int64_t bh = 0; bh < gh / m; ++bh)
    for (int64_t bw = 0; bw < gw / m; ++bw)
      for (int64_t mh = 0; mh < m; ++mh)
        for (int64_t mw = 0; mw < m; ++mw, ++row) {
          const int64_t y0 = (bh * m + mh) * p, x0 = (bw * m + mw) * p;
          float* r = dst + row * cols;
          for (int64_t ch = 0; ch < 3; ++ch)
            for (int64_t t = 0; t < tps; ++t)
              for (int64_t py = 0; py < p; ++py) {
                const float* src = chw.data() + (ch * rh + y0 + py) * rw + x0;
                std::memcpy(r + ((ch * tps + t) * p + py) * p, src, size_t(p) * 4);
              }
        }
  return out;
}

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

// ---- DeepSeek-OCR ----

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

// ---- Gemma 4 ----

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

}  // namespace

Status check_gemma4_soft_tokens(int64_t n) {
  for (int64_t ok : {70, 140, 280, 560, 1120})
    if (n == ok) return Status::ok();
  return Error::invalid_argument("[image processor] max_soft_tokens {} (Gemma 4 supports 70, 140, 280, 560, 1120)", n);
}

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
  // Pixel counts beyond the decoder's limit would only make the resized image (and the vision tower's patches)
  // too large to allocate: the same bound as a decoded image's.
  const int64_t kBig = kMaxImagePixels;
  const nlohmann::json size = pp.contains("size") && pp["size"].is_object() ? pp["size"] : nlohmann::json::object();
  if (c.kind == ImageProcessorConfig::Kind::kQwen2VL) {
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
  } else if (c.kind == ImageProcessorConfig::Kind::kGemma4) {
    PIPIT_TRY(read_int(pp, "patch_size", 1, 1024, &c.patch_size));
    PIPIT_TRY(read_int(pp, "pooling_kernel_size", 1, 64, &c.pooling_kernel_size));
    PIPIT_TRY(read_int(pp, "max_soft_tokens", 1, 1 << 20, &c.max_soft_tokens));
    PIPIT_TRY(check_gemma4_soft_tokens(c.max_soft_tokens));
  } else if (c.kind == ImageProcessorConfig::Kind::kDeepseekOcr) {
    // infer()'s arguments, when a preprocessor config spells them out
    PIPIT_TRY(read_int(pp, "base_size", 16, 4096, &c.base_size));
    PIPIT_TRY(read_int(pp, "image_size", 16, 4096, &c.image_size));
    PIPIT_TRY(read_bool(pp, "crop_mode", &c.crop_mode));
  } else {
    if (size.contains("height") || size.contains("width"))
      return Error::unsupported("[image processor] CLIP resize to a fixed height/width is not supported (only "
                                "size.shortest_edge)");
    PIPIT_TRY(read_int(size, "shortest_edge", 1, 1 << 16, &c.shortest_edge));
    if (pp.contains("size") && pp["size"].is_number_integer()) PIPIT_TRY(read_int(pp, "size", 1, 1 << 16, &c.shortest_edge));
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
  }
  return c;
}

Result<ProcessedImage> preprocess_image(const Image& img, const ImageProcessorConfig& cfg) {
  if (img.width < 1 || img.height < 1) return Error::invalid_argument("[image processor] empty image");
  if (cfg.kind == ImageProcessorConfig::Kind::kQwen2VL) return preprocess_qwen(img, cfg);
  if (cfg.kind == ImageProcessorConfig::Kind::kDeepseekOcr) return preprocess_deepseek_ocr(img, cfg);
  if (cfg.kind == ImageProcessorConfig::Kind::kGemma4) return preprocess_gemma4(img, cfg);
  return preprocess_clip(img, cfg);
}

}  // namespace pipit
