// add_, scale_, the gated activations (swiglu / geglu) and to_f32 on the device: one work-item per element over
// contiguous f32 tensors (kernels/elementwise.cl); to_f32 also of f32 rows that are strided (a column view).
#include "backends/opencl/cl_device.h"

namespace pipit::opencl {

void OpenclDevice::add_(Ctx& ctx, Tensor& x, const Tensor& y) {
  PIPIT_ASSERT(x.shape() == y.shape() && x.is_contiguous() && y.is_contiguous() && x.dtype() == DType::F32,
               "opencl add {} {}", x.describe(), y.describe());
  launch("add_inplace", size_t(x.numel()), 1, 0, 0, buf(x), buf(y), int(x.numel()));
}

void OpenclDevice::scale_(Ctx& ctx, Tensor& x, float s) {
  PIPIT_ASSERT(x.is_contiguous() && x.dtype() == DType::F32, "opencl scale {}", x.describe());
  launch("scale_inplace", size_t(x.numel()), 1, 0, 0, buf(x), s, int(x.numel()));
}

Tensor OpenclDevice::gated(Ctx& ctx, const Tensor& gate, const Tensor& up, GateAct act) {
  PIPIT_ASSERT(gate.shape() == up.shape() && gate.dtype() == DType::F32 && up.dtype() == DType::F32 &&
               gate.rows_contiguous() && up.rows_contiguous(), "opencl gated {} {}", gate.describe(), up.describe());
  Tensor y = ctx.alloc(DType::F32, gate.shape());
  const int64_t n = gate.dim(-1);
  launch("gated_act", size_t(n), size_t(gate.rows()), 0, 0, buf(gate), int(gate.row_stride() / 4), buf(up),
         int(up.row_stride() / 4), buf(y), int(n), int(act == GateAct::kSilu ? 0 : 1));
  return y;
}

Tensor OpenclDevice::to_f32(Ctx& ctx, const Tensor& x) {
  const int wt = weight_code(x.dtype());
  Tensor y = ctx.alloc(DType::F32, x.shape());
  if (x.dtype() == DType::F32 && !x.is_contiguous() && x.rows_contiguous()) {  // a view of f32 rows: a copy
    launch("strided_rows_f32", size_t(x.dim(-1)), size_t(x.rows()), 0, 0, buf(x), int(x.row_stride() / 4),
           int(x.dim(-1)), buf(y));
    return y;
  }
  PIPIT_ASSERT(wt >= 0 && x.is_contiguous(), "opencl to_f32 of {}", x.describe());
  const int64_t K = x.dim(-1), N = x.rows();
  launch("weight_rows", size_t(K), size_t(N), 0, 0, buf(x), wt, int(N), int(K), buf(y), 0, buf(y));
  return y;
}

}  // namespace pipit::opencl
