// The HF image processors the vision-language models were trained with, exact to the slow (PIL) versions. Each
// family's is an ImageProcessorKind registered under its name, in its own file: qwen2_vl_image_processor.cpp
// (Qwen2VLImageProcessor: Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5), clip_image_processor.cpp (CLIPImageProcessor:
// LLaVA), deepseek_ocr_image_processor.cpp (DeepSeek-OCR's infer()), gemma4_image_processor.cpp
// (Gemma4ImageProcessor). image_processor.cpp has the registry, the fields all of them read, and smart_resize.
// Numerics as HF: uint8 resize, x * rescale_factor in double cast to float, (x - mean) / std in float.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/tensor.h"
#include "models/vision/image.h"
#include "models/vision/resample.h"

namespace pipit {

// The settings of one image processor: the fields every HF processor has (resize filter, rescale, normalize), and
// those of each family's. `kind` names the processor (ImageProcessorKind, registered by its file beside the models
// that use it); a model's default_processor() sets it with the config's sizes, preprocessor_config.json is read over.
struct ImageProcessorConfig {
  std::string kind = "qwen2_vl";  // a registered ImageProcessorKind: "qwen2_vl", "clip", "deepseek_ocr", "gemma4"
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

struct ProcessedImage;

// What one family's processor does with those settings. Each implementation registers itself under its kind
// (PIPIT_REGISTER_IMAGE_PROCESSOR in its own file), so the runtime, the CLI and the memory estimate reach every
// processor through this interface and a new family's processor is a models/vision/ file.
class ImageProcessorKind {
 public:
  virtual ~ImageProcessorKind() = default;
  // The preprocessor_config.json fields of this processor; the common ones (resample, do_resize / rescale /
  // normalize / center_crop, rescale_factor, image_mean / std) are read before. `size` is the "size" object ({}
  // when absent or not an object). Wrong types and impossible values are errors.
  virtual Status parse(const nlohmann::json& pp, const nlohmann::json& size, ImageProcessorConfig& c) const = 0;
  virtual Result<ProcessedImage> preprocess(const Image& img, const ImageProcessorConfig& c) const = 0;
  // A pixel budget from the user (--image-max-pixels, the server's): lowers what the processor resizes to. The
  // default ignores it (processors with a fixed size).
  virtual Status cap_pixels(ImageProcessorConfig& c, int64_t max_pixels) const;
  // A named set of settings (--image-mode: DeepSeek-OCR's tiny .. gundam). The default: an error, no modes.
  virtual Status apply_mode(ImageProcessorConfig& c, const std::string& mode) const;
  // The largest image these settings give: the tower's patches and the pixel values' floats (memory estimate).
  struct Extent {
    double patches = 0, pixels = 0;
  };
  virtual Extent max_extent(const ImageProcessorConfig& c) const = 0;
  // Several images' pixel values are one list of patch rows with a (t, h, w) grid per image (HF's Qwen processors:
  // pixel_values + image_grid_thw), rather than a batch of images (`pipit vision` writes them the HF way).
  virtual bool concatenates_patches() const { return false; }
};

void register_image_processor(const char* kind, const ImageProcessorKind* impl);
// The registered processor of that kind, or an error naming the registered ones.
Result<const ImageProcessorKind*> find_image_processor(const std::string& kind);

struct ImageProcessorRegistrar {
  ImageProcessorRegistrar(const char* kind, const ImageProcessorKind* impl) { register_image_processor(kind, impl); }
};
#define PIPIT_REGISTER_IMAGE_PROCESSOR(kind, Type)                  \
  static const Type PIPIT_CONCAT(_pipit_image_processor_, __LINE__); \
  static ::pipit::ImageProcessorRegistrar PIPIT_CONCAT(_pipit_image_processor_reg_, __LINE__)( \
      kind, &PIPIT_CONCAT(_pipit_image_processor_, __LINE__))

// DeepSeek-OCR's named modes (README of deepseek-ai/DeepSeek-OCR): tiny 512/512, small 640/640, base 1024/1024,
// large 1280/1280 without crops; gundam 1024 global + 640 tiles. Errors for any other name.
Status apply_deepseek_ocr_mode(ImageProcessorConfig& c, const std::string& mode);

// Gemma 4's soft-token budgets (Gemma4ImageProcessor's supported max_soft_tokens): an error for any other.
Status check_gemma4_soft_tokens(int64_t n);

// Fields of a preprocessor_config.json over `base` (the model's defaults; its kind picks the processor). Unknown
// fields are ignored; wrong types and impossible values are errors.
Result<ImageProcessorConfig> parse_image_processor(const nlohmann::json& pp, ImageProcessorConfig base);
// The user's options through the processor of cfg.kind (ImageProcessorKind::cap_pixels / apply_mode).
Status cap_image_pixels(ImageProcessorConfig& cfg, int64_t max_pixels);
Status apply_image_mode(ImageProcessorConfig& cfg, const std::string& mode);

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
