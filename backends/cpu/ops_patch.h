// Ops over vision patches that the older towers did not need (Gemma 4's vision tower): clamping (its clippable
// linears), an elementwise shift-and-scale (pixels to [-1, 1]), RoPE over several position streams, each rotating
// its own part of the head (2-D RoPE: x, then y), and average pooling of k x k blocks of a patch grid. CPU only:
// encode_image runs towers on the host (a device refuses nothing here because none is ever handed these).
// Scalar kernels in ref/patch_ref.cpp, threaded over rows; no SIMD level: each is one pass over the activations next
// to matmuls with ~hidden times more work (Gemma 4 E2B's tower: 768), and `perf record` of `pipit vision` on the test
// checkpoint sampled none of them (0.4% resolution). Tests: tests/kernels/patch_ops_test.cpp.
#pragma once

#include <span>

#include "backends/cpu/ops.h"

namespace pipit {

// In place, f32 rows (may be strided between rows): x = min(max(x, lo), hi) (torch.clamp).
void clamp_(Ctx& ctx, Tensor& x, float lo, float hi);
// In place, f32 rows: x = (x + shift) * scale.
void shift_scale_(Ctx& ctx, Tensor& x, float shift, float scale);
// x [n_tokens, n_head, head_dim] f32 contiguous, in place: head_dim is split into n_part equal parts and part d of
// token t is rotated (HF rotate_half inside the part) by pos[d * n_tokens + t] * inv_freq[i], i < head_dim / n_part
// / 2 (HF apply_multidimensional_rope; Gemma 4 vision: n_part 2, x then y). cos / sin in float32 as HF.
void rope_parts_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, int n_part, std::span<const float> inv_freq);
// x [grid_h * grid_w, d] f32 (row-major grid) -> [(grid_h / k) * (grid_w / k), d]: each output row the mean of a
// k x k block (sum of x / k^2 terms, HF Gemma4VisionPooler's one-hot matmul), output blocks row-major. grid_h and
// grid_w must be multiples of k.
Tensor pool_grid(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t k);

}  // namespace pipit
