// The decoder ops of MoE, GPT-OSS, Gemma and Qwen3-VL / Qwen3.5 decoders on the device (contracts in backends/ops.h):
// moe_route, add_rows_scaled_, swiglu_clamped, and the in-place row ops sigmoid_mul_, softcap_, fill_, clamp_ and
// add_rows_ (kernels/decoder.cl). Host-side arguments (row lists, weights, per-expert scales, DeepStack rows) are
// uploaded from the arena per call, as copy_rows_ does.
#include "backends/opencl/cl_device.h"

namespace pipit::opencl {

namespace {
constexpr int64_t kMoeMaxK = 32;  // MOE_MAX_K in kernels/decoder.cl
enum RowOp { kSigmoidMul = 0, kSoftcap = 1, kFill = 2, kClamp = 3, kAddPacked = 4 };

int row_floats(const Tensor& t) { return int(t.row_stride() / 4); }

void check_rows(const Tensor& x, const char* op) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous(), "opencl {} of {}", op, x.describe());
}

// An in-place row op over `rows` rows of x; g (rows g_stride floats apart) and idx only where the op reads them
// (any valid buffer otherwise).
void rows_op(OpenclDevice& d, Tensor& x, int64_t rows, const Tensor* g, int g_stride, const Tensor* idx, RowOp op,
             float a, float b) {
  const BufArg gb = g ? buf(*g) : buf(x), ib = idx ? buf(*idx) : buf(x);
  d.launch("rows_inplace", size_t(x.dim(-1)), size_t(rows), 0, 0, buf(x), row_floats(x), gb, g_stride, ib,
           int(x.dim(-1)), int(op), a, b);
}
}  // namespace

MoeRoutes OpenclDevice::moe_route(Ctx& ctx, const Tensor& logits, const MoeRouteParams& p) {
  PIPIT_ASSERT(logits.dtype() == DType::F32 && logits.ndim() == 2 && logits.rows_contiguous(),
               "opencl moe_route of {}", logits.describe());
  const int64_t n = logits.dim(0), E = logits.dim(1), K = p.k;
  PIPIT_ASSERT(K > 0 && K <= E && K <= kMoeMaxK, "opencl moe_route: top {} of {} experts (at most {})", K, E,
               kMoeMaxK);
  PIPIT_ASSERT(p.expert_scale.empty() || int64_t(p.expert_scale.size()) == E, "moe_route: {} expert scales for {}",
               p.expert_scale.size(), E);
  MoeRoutes r{ctx.alloc(DType::I32, {n, K}), ctx.alloc(DType::F32, {n, K})};
  const bool has_es = !p.expert_scale.empty();
  const Tensor es = has_es ? upload_f32(ctx, p.expert_scale) : logits;
  launch("moe_route", size_t(n), 1, 0, 0, buf(logits), row_floats(logits), int(E), int(K),
         int(p.order == MoeOrder::kSoftmaxTopK ? 0 : 1), int(p.renormalize), p.scale, buf(es), int(has_es), int(n),
         buf(r.sel), buf(r.wt));
  return r;
}

void OpenclDevice::add_rows_scaled_(Ctx& ctx, Tensor& out, std::span<const int64_t> rows, std::span<const float> w,
                                    const Tensor& y) {
  const int64_t m = int64_t(rows.size()), d = out.dim(-1);
  PIPIT_ASSERT(out.dtype() == DType::F32 && y.dtype() == DType::F32 && out.rows_contiguous() && y.rows_contiguous() &&
               y.rows() == m && y.dim(-1) == d && int64_t(w.size()) == m,
               "opencl add_rows_scaled_: {} rows, {} weights of {} into {}", m, w.size(), y.describe(),
               out.describe());
  if (m == 0) return;
  std::vector<int32_t> r32(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    PIPIT_ASSERT(rows[size_t(i)] >= 0 && rows[size_t(i)] < out.rows(), "row {} of {}", rows[size_t(i)], out.rows());
    r32[size_t(i)] = int32_t(rows[size_t(i)]);
  }
  Tensor drows = upload_i32(ctx, r32), dw = upload_f32(ctx, w);
  launch("add_rows_scaled", size_t(d), size_t(m), 0, 0, buf(out), row_floats(out), buf(drows), buf(dw), buf(y),
         row_floats(y), int(d));
}

Tensor OpenclDevice::swiglu_clamped(Ctx& ctx, const Tensor& gu, float alpha, float limit) {
  PIPIT_ASSERT(gu.dtype() == DType::F32 && gu.ndim() == 2 && gu.rows_contiguous() && gu.dim(1) % 2 == 0,
               "opencl swiglu_clamped of {}", gu.describe());
  const int64_t m = gu.dim(0), nf = gu.dim(1) / 2;
  Tensor out = ctx.alloc(DType::F32, {m, nf});
  launch("swiglu_clamped", size_t(nf), size_t(m), 0, 0, buf(gu), row_floats(gu), buf(out), int(nf), alpha, limit);
  return out;
}

void OpenclDevice::sigmoid_mul_(Ctx& ctx, Tensor& x, const Tensor& gate) {
  check_rows(x, "sigmoid_mul_");
  check_rows(gate, "sigmoid_mul_ gate");
  PIPIT_ASSERT(gate.rows() == x.rows() && gate.dim(-1) == x.dim(-1), "opencl sigmoid_mul_: {} with {}",
               x.describe(), gate.describe());
  rows_op(*this, x, x.rows(), &gate, row_floats(gate), nullptr, kSigmoidMul, 0.0f, 0.0f);
}

void OpenclDevice::softcap_(Ctx& ctx, Tensor& x, float cap) {
  PIPIT_ASSERT(cap > 0.0f, "softcap_ {}", cap);
  check_rows(x, "softcap_");
  rows_op(*this, x, x.rows(), nullptr, 0, nullptr, kSoftcap, cap, 0.0f);
}

void OpenclDevice::fill_(Ctx& ctx, Tensor& x, float value) {
  // the CPU's fill_ takes any strides; on the device rows of contiguous floats (what the decoders fill)
  check_rows(x, "fill_");
  PIPIT_ASSERT(x.ndim() >= 1, "opencl fill_ of a scalar");
  rows_op(*this, x, x.rows(), nullptr, 0, nullptr, kFill, value, 0.0f);
}

void OpenclDevice::clamp_(Ctx& ctx, Tensor& x, float lo, float hi) {
  check_rows(x, "clamp_");
  rows_op(*this, x, x.rows(), nullptr, 0, nullptr, kClamp, lo, hi);
}

void OpenclDevice::add_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) {
  check_rows(dst, "add_rows_");
  PIPIT_ASSERT(int64_t(src_row.size()) == dst.rows() && src.dtype() == DType::F32 && src.rows_contiguous() &&
               src.dim(-1) >= dst.dim(-1), "opencl add_rows_ {} rows into {} from {}", src_row.size(),
               dst.describe(), src.describe());
  // as copy_rows_: the rows that take part, packed on the host, one upload, one scattered add
  const int64_t d = dst.dim(-1);
  std::vector<float> packed;
  std::vector<int32_t> at;
  for (size_t i = 0; i < src_row.size(); ++i) {
    if (src_row[i] < 0) continue;
    PIPIT_ASSERT(src_row[i] < src.rows(), "source row {} of {}", src_row[i], src.rows());
    const float* r = reinterpret_cast<const float*>(src.row_ptr(src_row[i]));
    packed.insert(packed.end(), r, r + d);
    at.push_back(int32_t(i));
  }
  if (at.empty()) return;
  Tensor dsrc = upload_f32(ctx, packed), dat = upload_i32(ctx, at);
  rows_op(*this, dst, int64_t(at.size()), &dsrc, int(d), &dat, kAddPacked, 0.0f, 0.0f);
}

}  // namespace pipit::opencl
