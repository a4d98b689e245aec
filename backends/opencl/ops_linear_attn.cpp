// Linear attention (Gated DeltaNet) on the device (contracts in backends/ops.h; kernels/linear_attn.cl): the causal
// conv1d + SiLU over a sequence's rolling window, the grouped L2 norm, the delta-rule gates, the gated delta rule
// over each sequence's state, and the gated RMSNorm. The states are device tensors of the KV cache (KvCache keeps
// them where its rows are), updated in place.
#include "backends/opencl/cl_device.h"

namespace pipit::opencl {

namespace {
constexpr int64_t kMaxDk = 256;  // DELTA_MAX_DK in kernels/linear_attn.cl: a state column in private memory

int row_floats(const Tensor& t) { return int(t.row_stride() / 4); }
}  // namespace

void OpenclDevice::causal_conv1d_silu(Ctx& ctx, const Tensor& x, Tensor& state, const Tensor& w, Tensor& y) {
  PIPIT_ASSERT(x.ndim() == 2 && x.dtype() == DType::F32 && x.rows_contiguous(), "opencl causal_conv1d of {}",
               x.describe());
  const int64_t n = x.dim(0), C = x.dim(1), K = w.dim(0);
  PIPIT_ASSERT(w.dtype() == DType::F32 && w.is_contiguous() && w.shape() == std::vector<int64_t>({K, C}),
               "conv weight {} for {} channels", w.describe(), C);
  PIPIT_ASSERT(state.dtype() == DType::F32 && state.is_contiguous() && state.shape() == w.shape(),
               "conv state {} for weight {}", state.describe(), w.describe());
  PIPIT_ASSERT(y.shape() == x.shape() && y.dtype() == DType::F32 && y.rows_contiguous() && y.data() != x.data());
  launch("causal_conv1d_silu", size_t(C), 1, 0, 0, buf(x), row_floats(x), buf(y), row_floats(y), buf(state), buf(w),
         int(n), int(C), int(K));
}

void OpenclDevice::l2_norm_groups_(Ctx& ctx, Tensor& x, int64_t group, float eps, float scale) {
  PIPIT_ASSERT(x.ndim() == 2 && x.dtype() == DType::F32 && x.rows_contiguous() && group > 0 && x.dim(1) % group == 0,
               "opencl l2_norm_groups_ of {} in groups of {}", x.describe(), group);
  const int64_t n_groups = x.dim(1) / group;
  launch("l2_norm_groups", size_t(n_groups), size_t(x.dim(0)), 0, 0, buf(x), row_floats(x), int(n_groups),
         int(group), eps, scale);
}

void OpenclDevice::delta_gates_(Ctx& ctx, Tensor& a, Tensor& b, const Tensor& A_log, const Tensor& dt_bias) {
  PIPIT_ASSERT(a.ndim() == 2 && a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous() &&
               a.dtype() == DType::F32 && b.dtype() == DType::F32, "opencl delta_gates_ of {} and {}", a.describe(),
               b.describe());
  const int64_t nh = a.dim(1);
  PIPIT_ASSERT(A_log.numel() == nh && dt_bias.numel() == nh && A_log.dtype() == DType::F32 &&
               dt_bias.dtype() == DType::F32 && A_log.is_contiguous() && dt_bias.is_contiguous());
  launch("delta_gates", size_t(a.numel()), 1, 0, 0, buf(a), buf(b), buf(A_log), buf(dt_bias), int(nh),
         int(a.numel()));
}

// Every sequence runs token by token (the CPU goes chunked past 32 tokens; the two forms agree to rounding, ~1e-6
// relative): each work-item walks its state column through the whole sequence, so a prefill of n tokens is one
// launch with dv x n_v_head work-items whatever n is.
void OpenclDevice::gated_delta_rule(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t dk,
                                    int64_t dv, const Tensor& g, const Tensor& beta, std::span<const DeltaSeq> seqs,
                                    Tensor& out) {
  PIPIT_ASSERT(q.ndim() == 2 && k.shape() == q.shape() && v.ndim() == 2 && out.shape() == v.shape() &&
               q.dtype() == DType::F32 && k.dtype() == DType::F32 && v.dtype() == DType::F32 &&
               out.dtype() == DType::F32, "opencl gated_delta_rule of q {}, v {}", q.describe(), v.describe());
  PIPIT_ASSERT(dk > 0 && dv > 0 && q.dim(1) % dk == 0 && v.dim(1) % dv == 0 && dk <= kMaxDk,
               "opencl gated_delta_rule: dk {} (at most {}), dv {}", dk, kMaxDk, dv);
  const int64_t nk = q.dim(1) / dk, nv = v.dim(1) / dv;
  PIPIT_ASSERT(nv % nk == 0 && g.shape() == std::vector<int64_t>({v.dim(0), nv}) && beta.shape() == g.shape() &&
               g.dtype() == DType::F32 && beta.dtype() == DType::F32);
  PIPIT_ASSERT(q.rows_contiguous() && k.rows_contiguous() && v.rows_contiguous() && k.stride(0) == q.stride(0) &&
               out.is_contiguous() && g.is_contiguous() && beta.is_contiguous());
  for (const auto& s : seqs) {
    PIPIT_ASSERT(s.state.dtype() == DType::F32 && s.state.is_contiguous() &&
                 s.state.shape() == std::vector<int64_t>({nv, dk, dv}), "delta state {}", s.state.describe());
    PIPIT_ASSERT(s.begin >= 0 && s.n >= 0 && s.begin + s.n <= v.dim(0), "sequence [{}, +{}) of {} rows", s.begin,
                 s.n, v.dim(0));
    if (s.n == 0) continue;
    const Tensor qs = q.slice(0, s.begin, s.begin + s.n), ks = k.slice(0, s.begin, s.begin + s.n);
    const Tensor vs = v.slice(0, s.begin, s.begin + s.n), os = out.slice(0, s.begin, s.begin + s.n);
    const Tensor gs = g.slice(0, s.begin, s.begin + s.n), bs = beta.slice(0, s.begin, s.begin + s.n);
    launch("gated_delta_rule", size_t(dv), size_t(nv), 0, 0, buf(qs), buf(ks), row_floats(q), buf(vs),
           row_floats(v), buf(gs), buf(bs), buf(os), buf(s.state), int(s.n), int(dk), int(dv), int(nv),
           int(nv / nk));
  }
}

Tensor OpenclDevice::rms_norm_gated(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& z, float eps) {
  PIPIT_ASSERT(x.is_contiguous() && z.is_contiguous() && x.shape() == z.shape() && w.numel() == x.dim(-1) &&
               w.dtype() == DType::F32 && w.is_contiguous() && x.dtype() == DType::F32 && z.dtype() == DType::F32,
               "opencl rms_norm_gated of {} with {}", x.describe(), z.describe());
  Tensor y = ctx.alloc(DType::F32, x.shape());
  launch("rms_norm_gated", size_t(x.rows()), 1, 0, 0, buf(x), buf(w), buf(z), buf(y), int(x.dim(-1)),
         int(x.rows()), eps);
  return y;
}

}  // namespace pipit::opencl
