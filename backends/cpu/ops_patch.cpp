// The CPU device's patch-grid ops (contracts in backends/ops.h): shape checks, then the ref/ row kernels split across the
// thread pool. Scalar only: each is one pass over the activations beside matmuls with ~hidden times more work
// (Gemma 4 E2B's tower: 768), and `perf record` of `pipit vision` on the test checkpoint sampled none of them.
#include "backends/cpu/cpu_device.h"

#include <cmath>
#include <vector>

#include "backends/cpu/ref/ref.h"

namespace pipit {

namespace {
void rows_(Ctx& ctx, Tensor& x, const char* op, const std::function<void(float*, int64_t)>& fn) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous(), "{}: x {}", op, x.describe());
  const int64_t n = x.dim(-1);
  ctx.pool->parallel_for(x.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(reinterpret_cast<float*>(x.row_ptr(r)), n);
  }, 16);
}
}  // namespace

void CpuDevice::clamp_(Ctx& ctx, Tensor& x, float lo, float hi) {
  rows_(ctx, x, "clamp_", [lo, hi](float* r, int64_t n) { ref::clamp(r, n, lo, hi); });
}

void CpuDevice::shift_scale_(Ctx& ctx, Tensor& x, float shift, float scale) {
  rows_(ctx, x, "shift_scale_", [shift, scale](float* r, int64_t n) { ref::shift_scale(r, n, shift, scale); });
}

void CpuDevice::rope_parts_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, int n_part, std::span<const float> inv_freq) {
  PIPIT_ASSERT(x.ndim() == 3 && x.is_contiguous() && x.dtype() == DType::F32 && n_part >= 1);
  const int64_t n = x.dim(0), n_head = x.dim(1), hd = x.dim(2), half = int64_t(inv_freq.size());
  PIPIT_ASSERT(hd == 2 * half * n_part, "rope_parts_: head_dim {} for {} parts of {} frequencies", hd, n_part, half);
  PIPIT_ASSERT(int64_t(pos.size()) == n * n_part, "rope_parts_: {} positions for {} tokens x {} parts", pos.size(),
               n, n_part);
  ctx.pool->parallel_for(n, [&](int64_t t0, int64_t t1) {
    std::vector<float> cs(size_t(2 * half * n_part));
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t d = 0; d < n_part; ++d)
        for (int64_t i = 0; i < half; ++i) {  // float32 angle = position * inv_freq, as HF
          const float f = float(pos[size_t(d * n + t)]) * inv_freq[size_t(i)];
          cs[size_t(d * 2 * half + i)] = std::cos(f);
          cs[size_t(d * 2 * half + half + i)] = std::sin(f);
        }
      for (int64_t h = 0; h < n_head; ++h) ref::rope_parts(x.ptr<float>() + (t * n_head + h) * hd, hd, n_part, cs.data());
    }
  }, 8);
}

Tensor CpuDevice::pool_grid(Ctx& ctx, const Tensor& x, int64_t gh, int64_t gw, int64_t k) {
  PIPIT_ASSERT(x.ndim() == 2 && x.is_contiguous() && x.dtype() == DType::F32 && k >= 1);
  PIPIT_ASSERT(x.dim(0) == gh * gw && gh % k == 0 && gw % k == 0, "pool_grid: {} rows for a {}x{} grid, k {}",
               x.dim(0), gh, gw, k);
  const int64_t d = x.dim(1), oh = gh / k, ow = gw / k;
  const float w = 1.0f / float(k * k);
  Tensor y = ctx.alloc(DType::F32, {oh * ow, d});
  ctx.pool->parallel_for(oh * ow, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t by = b / ow, bx = b % ow;
      ref::pool_block(x.ptr<float>() + (by * k * gw + bx * k) * d, gw, d, k, w, y.ptr<float>() + b * d);
    }
  }, 4);
  return y;
}

}  // namespace pipit
