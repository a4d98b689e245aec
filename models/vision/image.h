// Image input for the vision-language models: decode PNG and JPEG from a path, bytes in memory or a
// base64 data URL into 8-bit RGB, the way HF's load_image does it with PIL: EXIF orientation applied
// (ImageOps.exif_transpose), then convert("RGB") (grey replicated, alpha dropped without compositing, palette
// looked up). Every failure is an error naming the input; nothing here trusts a byte of the file.
//
// PNG pixels come from stb_image, JPEG pixels from libjpeg-turbo set up as PIL sets it (jpeg_decode.h): both are
// bit-identical with PIL. Built without libjpeg (cross builds), JPEG falls back to stb: close, not identical.
// Non-goals: other formats (GIF, WebP, ...), 16-bit precision (16-bit PNGs are reduced to 8 bits).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace pipit {

// 8-bit RGB, rows top to bottom, 3 bytes per pixel.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3
  uint8_t* px(int x, int y) { return rgb.data() + (size_t(y) * size_t(width) + size_t(x)) * 3; }
  const uint8_t* px(int x, int y) const { return rgb.data() + (size_t(y) * size_t(width) + size_t(x)) * 3; }
};

// Larger images are refused before any pixel is decoded: PIL's decompression-bomb limit (2 * MAX_IMAGE_PIXELS),
// so what HF refuses we refuse too. A 20000x20000 image (4e8 pixels) is rejected with an error.
constexpr int64_t kMaxImagePixels = 178956970;

// `what` names the input in errors (a path, "data URL", "image 2").
Result<Image> decode_image(std::span<const uint8_t> bytes, const std::string& what);
// A file path, or a "data:image/...;base64,..." URL.
Result<Image> load_image(const std::string& source);

// Standard or URL-safe base64; whitespace is skipped, padding optional.
Result<std::vector<uint8_t>> decode_base64(std::string_view text);

// The EXIF orientation (1..8) of a JPEG's APP1 segment; 1 when there is none or it is malformed.
int jpeg_exif_orientation(std::span<const uint8_t> bytes);
// Applies an EXIF orientation as PIL's ImageOps.exif_transpose does (2 mirror, 3 rotate 180, 4 flip, 5 transpose,
// 6 rotate 90 clockwise, 7 transverse, 8 rotate 90 counter-clockwise).
Image apply_exif_orientation(const Image& in, int orientation);

}  // namespace pipit
