// The CPU device's small elementwise and row ops of decoders (contracts in backends/ops.h): the sigmoid gate of
// Qwen3.5's attention output, the final logit soft-cap, DeepStack's row adds. Scalar loops split across the pool, in
// the float order of the host loops they replaced in models/ (bit-identical goldens).
#include "backends/cpu/cpu_device.h"

#include <algorithm>
#include <cmath>

namespace pipit {

namespace {
// fn(row of x, row of y or null, n) over the rows of f32 x (and y of the same shape when defined).
template <class Fn>
void each_row(Ctx& ctx, Tensor& x, const Tensor* y, const char* op, Fn fn) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous(), "{}: x {}", op, x.describe());
  if (y) {
    PIPIT_ASSERT(y->dtype() == DType::F32 && y->rows_contiguous() && y->rows() == x.rows() &&
                     y->dim(-1) == x.dim(-1), "{}: {} with {}", op, x.describe(), y->describe());
  }
  const int64_t n = x.dim(-1);
  ctx.pool->parallel_for(x.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      fn(reinterpret_cast<float*>(x.row_ptr(r)), y ? reinterpret_cast<const float*>(y->row_ptr(r)) : nullptr, n);
  }, 16);
}
}  // namespace

void CpuDevice::sigmoid_mul_(Ctx& ctx, Tensor& x, const Tensor& gate) {
  each_row(ctx, x, &gate, "sigmoid_mul_", [](float* r, const float* g, int64_t n) {
    for (int64_t i = 0; i < n; ++i) r[i] *= 1.0f / (1.0f + std::exp(-g[i]));
  });
}

void CpuDevice::softcap_(Ctx& ctx, Tensor& x, float cap) {
  PIPIT_ASSERT(cap > 0.0f, "softcap_ {}", cap);
  each_row(ctx, x, nullptr, "softcap_", [cap](float* r, const float*, int64_t n) {
    for (int64_t i = 0; i < n; ++i) r[i] = std::tanh(r[i] / cap) * cap;
  });
}

void CpuDevice::add_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) {
  PIPIT_ASSERT(dst.dtype() == DType::F32 && dst.rows_contiguous() && int64_t(src_row.size()) == dst.rows() &&
               src.dtype() == DType::F32 && src.rows_contiguous() && src.dim(-1) >= dst.dim(-1),
               "add_rows_ {} rows into {} from {}", src_row.size(), dst.describe(), src.describe());
  const int64_t n = dst.dim(-1);
  ctx.pool->parallel_for(dst.rows(), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int32_t s = src_row[size_t(i)];
      if (s < 0) continue;
      PIPIT_ASSERT(s < src.rows(), "source row {} of {}", s, src.rows());
      float* d = reinterpret_cast<float*>(dst.row_ptr(i));
      const float* a = reinterpret_cast<const float*>(src.row_ptr(s));
      for (int64_t e = 0; e < n; ++e) d[e] += a[e];
    }
  }, 16);
}

}  // namespace pipit
