// libFuzzer target: image decoding (PNG/JPEG headers, EXIF, stb for PNG, libjpeg-turbo for JPEG) on arbitrary
// bytes; decoded images go through the PIL resampler and the Qwen, CLIP and Gemma 4 processors at small sizes.
// build and run: scripts/fuzz.sh 300 build-fuzz image
#include <cstddef>
#include <cstdint>

#include "models/vision/image.h"
#include "models/vision/image_processor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto img = pipit::decode_image(std::span<const uint8_t>(data, size), "fuzz");
  if (!img.is_ok() || int64_t(img->width) * img->height > (1 << 20)) return 0;
  pipit::ImageProcessorConfig q;
  q.min_pixels = 28 * 28;
  q.max_pixels = 56 * 56;
  (void)pipit::preprocess_image(*img, q);
  pipit::ImageProcessorConfig c;
  c.kind = "clip";
  c.shortest_edge = 17;
  c.crop_height = 19;
  c.crop_width = 13;
  (void)pipit::preprocess_image(*img, c);
  pipit::ImageProcessorConfig g;  // Gemma 4: aspect-preserving resize within 70 x 9 patches of 16
  g.kind = "gemma4";
  g.do_normalize = false;
  g.patch_size = 16;
  g.max_soft_tokens = 70;
  (void)pipit::preprocess_image(*img, g);
  return 0;
}
