// JPEG pixels exactly as PIL gives them: libjpeg-turbo set up the way Pillow's JpegDecode.c and JpegImagePlugin.py
// leave it (accurate integer IDCT, fancy upsampling, no draft scaling; CMYK read with Adobe's inverted convention)
// and then Pillow's convert("RGB"). Built without libjpeg (cross builds), jpeg_decoder_available() is false and
// decode_image falls back to stb, which is close to libjpeg but not bit-identical.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "models/vision/image.h"

namespace pipit {

bool jpeg_decoder_available();

// The pixels of a whole JPEG file as PIL.Image.open(f).convert("RGB") has them (EXIF orientation not applied).
// Greyscale, YCbCr, RGB (Adobe transform 0), CMYK and YCCK; every libjpeg error becomes a Status naming `what`.
// The caller has checked the size limit (kMaxImagePixels) from the header; it is checked again here.
Result<Image> decode_jpeg(std::span<const uint8_t> bytes, const std::string& what);

}  // namespace pipit
