// linear / linear_multi / linear_gated on the device: y = x @ w^T (+ bias) with the matmul program of w's dtype.
// Up to 4 rows of x (decode) take the GEMV kernel (one work-group per output column, the weight row read once);
// more rows (prefill) the tiled GEMM.
#include "backends/opencl/cl_device.h"

namespace pipit::opencl {

namespace {

constexpr int64_t kGemvMaxRows = 4;  // GEMV_MAX_M in kernels/matmul.cl
constexpr size_t kGemvGroup = 64, kTile = 16;
const char* const kSuffix[] = {".f32", ".f16", ".q8_0", ".q4_0"};

void matmul(OpenclDevice& d, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const int wt = weight_code(w.dtype());
  PIPIT_ASSERT(wt >= 0 && w.ndim() == 2 && w.is_contiguous(), "opencl linear: weight {}", w.describe());
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.ndim() == 2 && x.dim(1) == w.dim(1) && x.stride(1) == 4,
               "opencl linear: x {} w {}", x.describe(), w.describe());
  const int64_t M = x.dim(0), N = w.dim(0), K = w.dim(1);
  PIPIT_ASSERT(wt < 2 || K % kQBlock == 0);
  const bool has_bias = bias.defined();
  PIPIT_ASSERT(!has_bias || (bias.dtype() == DType::F32 && bias.numel() == N), "opencl linear: bias {}",
               bias.describe());
  const BufArg b = has_bias ? buf(bias) : buf(x);  // any valid buffer when there is no bias
  const int x_stride = int(x.row_stride() / 4), y_stride = int(y.row_stride() / 4);
  const std::string kn = std::string(M <= kGemvMaxRows ? "matmul_gemv" : "matmul_gemm") + kSuffix[wt];
  if (M <= kGemvMaxRows)
    d.launch(kn.c_str(), size_t(N) * kGemvGroup, 1, kGemvGroup, 1, buf(x), x_stride, buf(w), b, int(has_bias),
             buf(y), y_stride, int(M), int(N), int(K));
  else
    d.launch(kn.c_str(), size_t(N), size_t(M), kTile, kTile, buf(x), x_stride, buf(w), b, int(has_bias), buf(y),
             y_stride, int(M), int(N), int(K));
}

}  // namespace

void OpenclDevice::linear_multi(Ctx& ctx, const Tensor& x, std::span<const Tensor* const> ws,
                                std::span<const Tensor* const> biases, std::span<Tensor* const> ys) {
  PIPIT_ASSERT(ws.size() == biases.size() && ws.size() == ys.size());
  for (size_t i = 0; i < ws.size(); ++i) {
    *ys[i] = ctx.alloc(DType::F32, {x.dim(0), ws[i]->dim(0)});
    matmul(*this, x, *ws[i], *biases[i], *ys[i]);
  }
}

Tensor OpenclDevice::linear_gated(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& up, GateAct act) {
  PIPIT_ASSERT(gate.shape() == up.shape(), "gate {} up {}", gate.describe(), up.describe());
  const int64_t M = x.dim(0), N = gate.dim(0);
  Tensor g = ctx.alloc(DType::F32, {M, N}), u = ctx.alloc(DType::F32, {M, N});
  matmul(*this, x, gate, Tensor(), g);
  matmul(*this, x, up, Tensor(), u);
  return gated(ctx, g, u, act);
}

}  // namespace pipit::opencl
