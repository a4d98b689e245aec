// Qwen's M-RoPE positions for a prompt with images and video frames (HF get_rope_index), used by every member of the
// Qwen VL family (models/qwen2_vl.cpp: Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5) as its Model::media_positions.
//
// Three position streams (temporal, height, width). A text token advances all three by one. An image's tokens are
// its merged grid (t, h / merge, w / merge) in row-major order, at (start + t, start + y, start + x) where `start`
// is the position the next text token would have taken; the text after it continues from the image's largest
// position + 1, so positions fall behind token indexes (delta < 0). A video reaches here split into its temporal
// patches, one span of grid (1, h, w) each (HF's Qwen3-VL / Qwen3.5 get_rope_index splits the grid so, since each
// patch sits between timestamp text of its own: runtime/multimodal_video.h).
// reference: HF modeling_qwen2_vl.py / modeling_qwen3_5.py (get_rope_index).
#pragma once

#include <span>

#include "models/model.h"

namespace pipit {

Result<MediaPositions> qwen_rope_index(int64_t n_tokens, std::span<const MediaSpan> media, int merge_size);

}  // namespace pipit
