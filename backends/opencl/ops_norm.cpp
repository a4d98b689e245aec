// rms_norm (a new tensor), rms_norm_heads_ (in place over every head_dim row: Qwen3's q/k norm) and softmax_ on
// the device: one work-group per row (kernels/norm.cl); attention's softmax with sinks (softmax_rows_sinks).
#include "backends/opencl/cl_device.h"

namespace pipit::opencl {

namespace {
constexpr size_t kGroup = 64;  // NORM_WG

void norm_rows(OpenclDevice& d, const Tensor& x, const Tensor& w, const Tensor& y, int64_t rows, int64_t n,
               int x_stride, int y_stride, float eps, float w_offset) {
  PIPIT_ASSERT(w.dtype() == DType::F32 && w.numel() == n, "opencl rms_norm: weight {} for rows of {}", w.describe(),
               n);
  d.launch("rms_norm", size_t(rows) * kGroup, 1, kGroup, 1, buf(x), x_stride, buf(w), buf(y), y_stride, int(n), eps,
           w_offset);
}
}  // namespace

Tensor OpenclDevice::rms_norm(Ctx& ctx, const Tensor& x, const Tensor& w, float eps, float w_offset) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous(), "opencl rms_norm of {}", x.describe());
  Tensor y = ctx.alloc(DType::F32, x.shape());
  norm_rows(*this, x, w, y, x.rows(), x.dim(-1), int(x.row_stride() / 4), int(y.row_stride() / 4), eps, w_offset);
  return y;
}

void OpenclDevice::rms_norm_heads_(Ctx& ctx, Tensor& x, const Tensor& w, float eps, float w_offset) {
  PIPIT_ASSERT(x.ndim() == 3 && x.is_contiguous());
  const int64_t hd = x.dim(2);
  norm_rows(*this, x, w, x, x.dim(0) * x.dim(1), hd, int(hd), int(hd), eps, w_offset);
}

void OpenclDevice::softmax_(Ctx& ctx, Tensor& x) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous(), "opencl softmax of {}", x.describe());
  launch("softmax_rows", size_t(x.rows()) * kGroup, 1, kGroup, 1, buf(x), int(x.row_stride() / 4), int(x.dim(-1)),
         buf(x), 0, 1);
}

void softmax_rows_sinks(OpenclDevice& d, Tensor& scores, const Tensor& sinks, int64_t n_head) {
  PIPIT_ASSERT(scores.dtype() == DType::F32 && scores.rows_contiguous() && scores.rows() % n_head == 0 &&
               sinks.numel() >= n_head, "opencl softmax with sinks: {} for {} heads", scores.describe(), n_head);
  d.launch("softmax_rows", size_t(scores.rows()) * kGroup, 1, kGroup, 1, buf(scores), int(scores.row_stride() / 4),
           int(scores.dim(-1)), buf(sinks), 1, int(n_head));
}

}  // namespace pipit::opencl
