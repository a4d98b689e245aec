// The CPU device's audio encoder ops (cpu_device.h; contracts in backends/ops.h): plain scalar loops split over the
// thread pool, each step commented. They are the reference, and the tower's time goes to the matmuls (linear),
// which they call where one fits (the 3x3 convolutions are im2col + linear).
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pipit {

namespace {

float* fr(Tensor& t, int64_t r) { return reinterpret_cast<float*>(t.row_ptr(r)); }
const float* cr(const Tensor& t, int64_t r) { return reinterpret_cast<const float*>(t.row_ptr(r)); }

void check_rows(const Tensor& x, const char* op) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous(), "{}: x {}", op, x.describe());
}

}  // namespace

void silu_rows_(Ctx& ctx, Tensor& x) {
  check_rows(x, "silu_");
  const int64_t n = x.dim(-1);
  ctx.pool->parallel_for(x.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* p = fr(x, r);
      for (int64_t i = 0; i < n; ++i) p[i] = p[i] / (1.0f + std::exp(-p[i]));
    }
  }, 16);
}

Tensor CpuDevice::glu(Ctx& ctx, const Tensor& x) {
  check_rows(x, "glu");
  PIPIT_ASSERT(x.ndim() == 2 && x.dim(1) % 2 == 0, "glu: x {}", x.describe());
  const int64_t c = x.dim(1) / 2;
  Tensor y = ctx.alloc(DType::F32, {x.dim(0), c});
  ctx.pool->parallel_for(x.dim(0), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* a = cr(x, r);
      float* o = fr(y, r);
      for (int64_t i = 0; i < c; ++i) o[i] = a[i] * (1.0f / (1.0f + std::exp(-a[c + i])));
    }
  }, 16);
  return y;
}

Tensor CpuDevice::depthwise_conv1d_causal(Ctx& ctx, const Tensor& x, const Tensor& w) {
  check_rows(x, "depthwise_conv1d_causal");
  PIPIT_ASSERT(x.ndim() == 2 && w.ndim() == 2 && w.dtype() == DType::F32 && w.is_contiguous() &&
               w.dim(0) == x.dim(1), "depthwise_conv1d_causal: x {} w {}", x.describe(), w.describe());
  const int64_t T = x.dim(0), C = x.dim(1), K = w.dim(1);
  Tensor y = ctx.alloc(DType::F32, {T, C});
  const float* wp = w.ptr<float>();
  ctx.pool->parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = fr(y, t);
      for (int64_t c = 0; c < C; ++c) {
        float s = 0.0f;
        for (int64_t j = 0; j < K; ++j) {  // tap j reads time t - (K - 1) + j; before 0 is the zero pad
          const int64_t ts = t - (K - 1) + j;
          if (ts >= 0) s += wp[c * K + j] * cr(x, ts)[c];
        }
        o[c] = s;
      }
    }
  }, 8);
  return y;
}

Tensor CpuDevice::conv2d_3x3_s2(Ctx& ctx, const Tensor& x, const Tensor& w) {
  PIPIT_ASSERT(x.ndim() == 3 && x.dtype() == DType::F32 && x.is_contiguous() && w.ndim() == 2 &&
               w.dim(1) == x.dim(2) * 9, "conv2d_3x3_s2: x {} w {}", x.describe(), w.describe());
  const int64_t H = x.dim(0), W = x.dim(1), Cin = x.dim(2), Cout = w.dim(0);
  const int64_t Ho = (H - 1) / 2 + 1, Wo = (W - 1) / 2 + 1;
  Tensor y = Tensor::empty(DType::F32, {Ho, Wo, Cout});  // heap: the arena is reused per block below
  // a block of output rows at a time: im2col [rows * Wo, Cin * 9], columns in the weight's (c, ky, kx) order
  const int64_t block = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(1, Wo * Cin * 9));
  const float* xp = x.ptr<float>();
  for (int64_t h0 = 0; h0 < Ho; h0 += block) {
    ArenaScope scope(*ctx.arena);
    const int64_t nh = std::min(block, Ho - h0);
    Tensor col = ctx.alloc(DType::F32, {nh * Wo, Cin * 9});
    ctx.pool->parallel_for(nh * Wo, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = h0 + r / Wo, ox = r % Wo;
        float* o = fr(col, r);
        for (int64_t c = 0; c < Cin; ++c)
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {  // input (2 oy - 1 + ky, 2 ox - 1 + kx): padding 1 reads 0
              const int64_t iy = 2 * oy - 1 + ky, ix = 2 * ox - 1 + kx;
              const bool in = iy >= 0 && iy < H && ix >= 0 && ix < W;
              o[c * 9 + ky * 3 + kx] = in ? xp[(iy * W + ix) * Cin + c] : 0.0f;
            }
      }
    }, 16);
    Tensor out = linear(ctx, col, w);
    std::copy(out.ptr<float>(), out.ptr<float>() + out.numel(), y.ptr<float>() + h0 * Wo * Cout);
  }
  return y;
}

Tensor CpuDevice::local_rel_attention(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel_k,
                           int window, float softcap) {
  PIPIT_ASSERT(q.ndim() == 3 && q.is_contiguous() && k.is_contiguous() && v.is_contiguous() &&
               rel_k.is_contiguous() && q.dtype() == DType::F32 && k.dtype() == DType::F32 &&
               v.dtype() == DType::F32 && rel_k.dtype() == DType::F32 && k.shape() == q.shape() &&
               v.shape() == q.shape() && rel_k.ndim() == 3 && rel_k.dim(0) == window && rel_k.dim(1) == q.dim(1) &&
               rel_k.dim(2) == q.dim(2) && window > 0,
               "local_rel_attention: q {} k {} v {} rel_k {} window {}", q.describe(), k.describe(), v.describe(),
               rel_k.describe(), window);
  const int64_t T = q.dim(0), nh = q.dim(1), hd = q.dim(2);
  Tensor out = ctx.alloc(DType::F32, {T, nh, hd});
  const float *qp = q.ptr<float>(), *kp = k.ptr<float>(), *vp = v.ptr<float>(), *rp = rel_k.ptr<float>();
  float* op = out.ptr<float>();
  ctx.pool->parallel_for(T * nh, [&](int64_t r0, int64_t r1) {
    std::vector<float> logit(static_cast<size_t>(window));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r / nh, h = r % nh;
      const float* qi = qp + (i * nh + h) * hd;
      const int64_t first = std::max<int64_t>(0, i - window + 1);
      float mx = -INFINITY;
      for (int64_t j = first; j <= i; ++j) {
        const float* kj = kp + (j * nh + h) * hd;
        const float* rk = rp + ((i - j) * nh + h) * hd;
        float ac = 0.0f, bd = 0.0f;  // content term and position term, summed apart as HF does
        for (int64_t d = 0; d < hd; ++d) {
          ac += qi[d] * kj[d];
          bd += qi[d] * rk[d];
        }
        float l = ac + bd;
        if (softcap > 0.0f) l = std::tanh(l / softcap) * softcap;
        logit[size_t(j - first)] = l;
        mx = std::max(mx, l);
      }
      float sum = 0.0f;
      for (int64_t j = first; j <= i; ++j) sum += (logit[size_t(j - first)] = std::exp(logit[size_t(j - first)] - mx));
      float* o = op + (i * nh + h) * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t j = first; j <= i; ++j) {
        const float p = logit[size_t(j - first)] / sum;
        const float* vj = vp + (j * nh + h) * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] += p * vj[d];
      }
    }
  }, 4);
  return out;
}

}  // namespace pipit
