// PIL-identical resizing of 8-bit RGB images: what HF's image processors get from Image.resize(size, resample,
// reducing_gap=None). A port of the algorithm of Pillow's ImagingResample (libImaging/Resample.c, Pillow 9.x):
//  - separable: a horizontal pass over the source rows the vertical pass needs, then a vertical pass;
//  - per output pixel, the filter is centred at in0 + (i + 0.5) * scale and its support is widened by the
//    downscale factor (scale = in / out when > 1), so downscaling averages instead of aliasing;
//  - coefficients are normalised to sum 1, then turned into fixed point with 22 fractional bits;
//  - each pass rounds (adds 1/2) and clips to 0..255, so the intermediate image is 8-bit, as in PIL.
// Bit-exact results are tested against Pillow's own output (tests/data/make_resize_fixtures.py).
#pragma once

#include <vector>

#include "core/status.h"
#include "models/vision/image.h"

namespace pipit {

// PIL's resample codes (Image.Resampling): NEAREST = 0 is not supported.
enum class ResampleFilter { kLanczos = 1, kBilinear = 2, kBicubic = 3, kBox = 4, kHamming = 5 };
Result<ResampleFilter> resample_filter_from_pil(int code);

// Resize to out_w x out_h (both >= 1). Same size returns a copy, as PIL does.
Image resize_image(const Image& in, int out_w, int out_h, ResampleFilter filter = ResampleFilter::kBicubic);

}  // namespace pipit
