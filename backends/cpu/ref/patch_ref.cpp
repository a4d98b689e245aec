// Reference kernels of the patch-grid ops (backends/ops.h; CPU: backends/cpu/ops_patch.cpp): clamp, shift-and-scale, multidimensional RoPE
// of one head row, and the average of one k x k block of a patch grid. Plain loops; the ops thread them over rows.
#include <algorithm>

#include "backends/cpu/ref/ref.h"

namespace pipit::ref {

// torch.clamp(x, lo, hi): max then min, so a NaN stays NaN
void clamp(float* x, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(x[i], lo), hi);
}

// (x + shift) * scale, two float roundings as torch's `scale * (x + shift)` (Gemma 4: 2 * (pixel - 0.5))
void shift_scale(float* x, int64_t n, float shift, float scale) {
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] + shift) * scale;
}

// HF apply_multidimensional_rope: the head row v (head_dim floats) is split into n_part equal parts; part d is
// rotated with rotate_half inside the part, i.e. pairs (i, i + half) with half = head_dim / n_part / 2, by the angle
// whose cos / sin are cs[d * 2 * half + i] / cs[d * 2 * half + half + i].
void rope_parts(float* v, int64_t head_dim, int64_t n_part, const float* cs) {
  const int64_t part = head_dim / n_part, half = part / 2;
  for (int64_t d = 0; d < n_part; ++d) {
    float* p = v + d * part;
    const float* c = cs + d * 2 * half;
    for (int64_t i = 0; i < half; ++i) {  // x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1)
      const float x1 = p[i], x2 = p[i + half];
      p[i] = x1 * c[i] - x2 * c[half + i];
      p[i + half] = x2 * c[i] + x1 * c[half + i];
    }
  }
}

// One output row of the grid pooling: y = sum over the k x k block of w * x_row, rows taken row-major (dy, then
// dx). x points at the block's top-left row of a grid `grid_w` rows wide, rows of d floats; w = 1 / k^2 in float as
// HF's one-hot weights (Gemma4VisionPooler).
void pool_block(const float* x, int64_t grid_w, int64_t d, int64_t k, float w, float* y) {
  for (int64_t j = 0; j < d; ++j) y[j] = 0.0f;
  for (int64_t dy = 0; dy < k; ++dy)
    for (int64_t dx = 0; dx < k; ++dx) {
      const float* r = x + (dy * grid_w + dx) * d;
      for (int64_t j = 0; j < d; ++j) y[j] += w * r[j];
    }
}

}  // namespace pipit::ref
