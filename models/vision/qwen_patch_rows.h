// The patch rows Qwen2-VL's image processor and Qwen3-VL's video processor both write (HF's flatten of patches,
// processing_qwen2_vl.py / video_processing_qwen3_vl.py): for one temporal patch, rows (block row, block col, row in
// block, col in block) of the gh x gw patch grid with merge m, columns (channel, frame in the temporal patch, py, px).
#pragma once

#include <cstdint>
#include <cstring>

namespace pipit {

// frame(k) is frame k of the temporal patch as CHW planes of rh x rw floats (a still image: the same frame for every
// k). Writes gh * gw rows of 3 * tps * p * p floats at dst and returns the end of them.
template <class Frame>
float* qwen_patch_rows(float* dst, int64_t gh, int64_t gw, int64_t m, int64_t p, int64_t tps, int64_t rh, int64_t rw,
                       Frame&& frame) {
  const int64_t cols = 3 * tps * p * p, plane = rh * rw;
  for (int64_t bh = 0; bh < gh / m; ++bh)
    for (int64_t bw = 0; bw < gw / m; ++bw)
      for (int64_t mh = 0; mh < m; ++mh)
        for (int64_t mw = 0; mw < m; ++mw, dst += cols) {
          const int64_t y0 = (bh * m + mh) * p, x0 = (bw * m + mw) * p;
          for (int64_t ch = 0; ch < 3; ++ch)
            for (int64_t k = 0; k < tps; ++k) {
              const float* f = frame(k) + ch * plane;
              for (int64_t py = 0; py < p; ++py)
                std::memcpy(dst + ((ch * tps + k) * p + py) * p, f + (y0 + py) * rw + x0, size_t(p) * 4);
            }
        }
  return dst;
}

}  // namespace pipit
