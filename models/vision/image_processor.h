// The HF image processors the vision-language models were trained with, exact to the slow (PIL) versions:
//  - Qwen2VLImageProcessor (Qwen2-VL, Qwen2.5-VL): smart_resize to multiples of patch * merge within
//    [min_pixels, max_pixels], PIL resize, rescale, normalize, the still image repeated temporal_patch_size times,
//    then patches flattened in (t, h/m, w/m, m, m) row order with (c, t, py, px) columns;
//  - CLIPImageProcessor (LLaVA): shortest edge to `size`, PIL resize, center crop, rescale, normalize;
//  - DeepSeek-OCR (the remote code's infer(), no HF processor class): a global view (ImageOps.pad to base_size, or a
//    plain resize for image_size <= 640 without crop mode) and, in crop mode ("Gundam"), 640x640 tiles of the image
//    resized to the grid dynamic_preprocess picks; ToTensor + Normalize(0.5, 0.5);
//  - Gemma4ImageProcessor (Gemma 4; the PIL backend): an aspect-preserving resize to multiples of pooling * patch
//    within max_soft_tokens * pooling^2 patches, rescale to [0, 1] (no normalize), patches in row-major grid order
//    with (py, px, c) columns, zero rows up to max_soft_tokens * pooling^2.
// Numerics as HF: uint8 resize, x * rescale_factor in double cast to float, (x - mean) / std in float.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "models/vision/image.h"
#include "models/vision/resample.h"

namespace pipit {

struct ImageProcessorConfig {
  enum class Kind { kQwen2VL, kClip, kDeepseekOcr, kGemma4 };
  Kind kind = Kind::kQwen2VL;
  ResampleFilter resample = ResampleFilter::kBicubic;
  bool do_resize = true, do_rescale = true, do_normalize = true, do_center_crop = true;
  double rescale_factor = 1.0 / 255.0;
  std::array<float, 3> mean = {0.48145466f, 0.4578275f, 0.40821073f};  // OPENAI_CLIP_MEAN
  std::array<float, 3> std = {0.26862954f, 0.26130258f, 0.27577711f};  // OPENAI_CLIP_STD
  // Qwen2-VL
  int64_t min_pixels = 56 * 56, max_pixels = 28 * 28 * 1280;
  int patch_size = 14, merge_size = 2, temporal_patch_size = 2;
  // CLIP
  int shortest_edge = 224, crop_height = 224, crop_width = 224;
  // DeepSeek-OCR: infer(base_size, image_size, crop_mode); the default is infer()'s own (Gundam)
  int base_size = 1024, image_size = 640;
  bool crop_mode = true;
  // Gemma 4 (patch_size above): soft tokens per image at most (70, 140, 280, 560 or 1120), pooled k x k patches each
  int max_soft_tokens = 280, pooling_kernel_size = 3;
};

// DeepSeek-OCR's named modes (README of deepseek-ai/DeepSeek-OCR): tiny 512/512, small 640/640, base 1024/1024,
// large 1280/1280 without crops; gundam 1024 global + 640 tiles. Errors for any other name.
Status apply_deepseek_ocr_mode(ImageProcessorConfig& c, const std::string& mode);

// Gemma 4's soft-token budgets (Gemma4ImageProcessor's supported max_soft_tokens): an error for any other.
Status check_gemma4_soft_tokens(int64_t n);

// Fields of a preprocessor_config.json over `base` (the model's defaults). Unknown fields are ignored; wrong types
// and impossible values are errors.
Result<ImageProcessorConfig> parse_image_processor(const nlohmann::json& pp, ImageProcessorConfig base);

struct ProcessedImage {
  // Qwen: [grid_t * grid_h * grid_w, 3 * temporal_patch * patch * patch]; CLIP: [3, crop_height, crop_width];
  // DeepSeek-OCR: the global view [3, S, S]; Gemma 4: [max_soft_tokens * pooling^2, 3 * patch * patch], the first
  // grid_h * grid_w rows the patches (row-major), the rest zero.
  Tensor pixel_values;
  // DeepSeek-OCR crop mode: the tiles [crop_rows * crop_cols, 3, 640, 640], row-major (undefined: no tiles).
  Tensor crops;
  int crop_cols = 1, crop_rows = 1;
  std::array<int32_t, 3> grid_thw{};  // Qwen: (t, h, w) in patches. CLIP, Gemma 4: (1, H / patch, W / patch)
  int resized_height = 0, resized_width = 0;  // after resize (before the CLIP crop)
};

Result<ProcessedImage> preprocess_image(const Image& img, const ImageProcessorConfig& cfg);

// HF's smart_resize: (height, width) rounded to multiples of `factor` with the area kept in [min_pixels,
// max_pixels] and the aspect ratio about the same. Python round() (half to even) as HF. Errors for an aspect
// ratio above 200 (as HF). Unlike older HF versions it never returns 0: tiny sides become `factor`.
Result<std::pair<int64_t, int64_t>> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                                 int64_t max_pixels);

}  // namespace pipit
