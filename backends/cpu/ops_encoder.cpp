// The CPU device's encoder layout and convolution ops (cpu_device.h; contracts in backends/ops.h): strided copies,
// fills, windows, convolutions, SAM's relative-position attention and the position-table resizes of the vision
// towers. Plain scalar loops split over the thread pool; the heavy work goes to linear (im2col + matmul, scores
// and values as matmuls), so these stay the readable reference.
#include "backends/cpu/cpu_device.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace pipit {

namespace {

// Byte offsets of row r (all dims but the last, row-major) in two tensors of the same shape and their own strides.
void row_offsets(const Tensor& a, const Tensor& b, int64_t r, int64_t* oa, int64_t* ob) {
  *oa = 0;
  *ob = 0;
  for (int d = a.ndim() - 2; d >= 0; --d) {
    const int64_t i = r % a.dim(d);
    r /= a.dim(d);
    *oa += i * a.stride(d);
    *ob += i * b.stride(d);
  }
}

float* fr(Tensor& t, int64_t r) { return reinterpret_cast<float*>(t.row_ptr(r)); }
const float* cr(const Tensor& t, int64_t r) { return reinterpret_cast<const float*>(t.row_ptr(r)); }

}  // namespace

void CpuDevice::copy_(Ctx& ctx, Tensor& dst, const Tensor& src) {
  PIPIT_ASSERT(dst.dtype() == DType::F32 && src.dtype() == DType::F32 && dst.shape() == src.shape(),
               "copy_: dst {} src {}", dst.describe(), src.describe());
  if (dst.numel() == 0) return;
  if (dst.ndim() == 0) {
    std::memcpy(dst.data(), src.data(), 4);
    return;
  }
  const int64_t n = dst.dim(-1), rows = dst.numel() / n, sd = dst.stride(-1), ss = src.stride(-1);
  const bool inner = sd == 4 && ss == 4;
  ctx.pool->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t od, os;
      row_offsets(dst, src, r, &od, &os);
      uint8_t* d = dst.data() + od;
      const uint8_t* s = src.data() + os;
      if (inner) {
        std::memcpy(d, s, size_t(n) * 4);
      } else {
        for (int64_t j = 0; j < n; ++j) std::memcpy(d + j * sd, s + j * ss, 4);
      }
    }
  }, 16);
}

void CpuDevice::fill_(Ctx& ctx, Tensor& x, float value) {
  PIPIT_ASSERT(x.dtype() == DType::F32, "fill_: x {}", x.describe());
  if (x.numel() == 0) return;
  if (x.ndim() == 0) {
    *x.ptr<float>() = value;
    return;
  }
  const int64_t n = x.dim(-1), rows = x.numel() / n, sx = x.stride(-1);
  ctx.pool->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t o, unused;
      row_offsets(x, x, r, &o, &unused);
      for (int64_t j = 0; j < n; ++j) std::memcpy(x.data() + o + j * sx, &value, 4);
    }
  }, 16);
}

void CpuDevice::scale_channels_(Ctx& ctx, Tensor& x, const Tensor& w) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous() && w.dtype() == DType::F32 && w.is_contiguous() &&
               w.numel() == x.dim(-1), "scale_channels_: x {} w {}", x.describe(), w.describe());
  const int64_t n = x.dim(-1);
  const float* wp = w.ptr<float>();
  ctx.pool->parallel_for(x.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* p = fr(x, r);
      for (int64_t c = 0; c < n; ++c) p[c] = p[c] * wp[c];
    }
  }, 16);
}

Tensor CpuDevice::conv2d(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, int64_t k, int64_t stride,
                         int64_t pad) {
  PIPIT_ASSERT(x.ndim() == 3 && x.dtype() == DType::F32 && w.ndim() == 2 && k >= 1 && stride >= 1 && pad >= 0 &&
               w.dim(1) == x.dim(2) * k * k && x.dim(0) + 2 * pad >= k && x.dim(1) + 2 * pad >= k,
               "conv2d: x {} w {} kernel {} stride {} padding {}", x.describe(), w.describe(), k, stride, pad);
  const int64_t H = x.dim(0), W = x.dim(1), Cin = x.dim(2), Cout = w.dim(0), kk = k * k;
  const int64_t Ho = (H + 2 * pad - k) / stride + 1, Wo = (W + 2 * pad - k) / stride + 1;
  const int64_t sy = x.stride(0), sx = x.stride(1), sc = x.stride(2);
  Tensor y = ctx.alloc(DType::F32, {Ho, Wo, Cout});
  // a block of output rows at a time (~4 MB of im2col), columns in the weight's (c, ky, kx) order; every matmul row
  // is computed as it would be alone (tests/kernels/matmul_invariance_test.cpp), so the blocks change nothing
  const int64_t block = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(1, Wo * Cin * kk));
  for (int64_t h0 = 0; h0 < Ho; h0 += block) {
    ArenaScope scope(*ctx.arena);
    const int64_t nh = std::min(block, Ho - h0);
    Tensor col = ctx.alloc(DType::F32, {nh * Wo, Cin * kk});
    ctx.pool->parallel_for(nh * Wo, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = h0 + r / Wo, ox = r % Wo;
        float* o = fr(col, r);
        for (int64_t c = 0; c < Cin; ++c)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {  // input (stride oy - pad + ky, ...): the padding reads 0
              const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
              const bool in = iy >= 0 && iy < H && ix >= 0 && ix < W;
              float v = 0.0f;
              if (in) std::memcpy(&v, x.data() + iy * sy + ix * sx + c * sc, 4);
              o[(c * k + ky) * k + kx] = v;
            }
      }
    }, 16);
    Tensor out = linear(ctx, col, w, bias);
    std::memcpy(y.ptr<float>() + h0 * Wo * Cout, out.data(), out.nbytes());
  }
  return y;
}

Tensor CpuDevice::window_partition(Ctx& ctx, const Tensor& x, int64_t gh, int64_t gw, int64_t win) {
  PIPIT_ASSERT(x.ndim() == 2 && x.dtype() == DType::F32 && x.rows_contiguous() && x.dim(0) == gh * gw && win >= 1,
               "window_partition: x {} for a {}x{} grid, window {}", x.describe(), gh, gw, win);
  const int64_t C = x.dim(1), nh = (gh + win - 1) / win, nw = (gw + win - 1) / win, T = win * win;
  Tensor y = ctx.alloc(DType::F32, {nh * nw * T, C});
  ctx.pool->parallel_for(nh * nw * T, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / T, t = r % T;  // window b (row-major), token t inside it (row-major)
      const int64_t gy = (b / nw) * win + t / win, gx = (b % nw) * win + t % win;
      if (gy < gh && gx < gw) std::memcpy(fr(y, r), cr(x, gy * gw + gx), size_t(C) * 4);
      else std::memset(fr(y, r), 0, size_t(C) * 4);  // the zero padding up to a multiple of the window
    }
  }, 16);
  return y;
}

Tensor CpuDevice::window_unpartition(Ctx& ctx, const Tensor& x, int64_t gh, int64_t gw, int64_t win) {
  const int64_t nh = (gh + win - 1) / win, nw = (gw + win - 1) / win, T = win * win;
  PIPIT_ASSERT(x.ndim() == 2 && x.dtype() == DType::F32 && x.rows_contiguous() && win >= 1 &&
               x.dim(0) == nh * nw * T, "window_unpartition: x {} for a {}x{} grid, window {}", x.describe(), gh, gw,
               win);
  const int64_t C = x.dim(1);
  Tensor y = ctx.alloc(DType::F32, {gh * gw, C});
  ctx.pool->parallel_for(gh * gw, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t gy = r / gw, gx = r % gw;
      std::memcpy(fr(y, r), cr(x, ((gy / win) * nw + gx / win) * T + (gy % win) * win + gx % win), size_t(C) * 4);
    }
  }, 16);
  return y;
}

namespace {

// get_rel_pos for q_size == k_size == n: the table [L, hd] (f32) linearly interpolated (F.interpolate mode "linear",
// align_corners false, float) to 2n - 1 rows when L differs.
std::vector<float> rel_table(const float* rel, int64_t L, int64_t hd, int64_t n) {
  const int64_t M = 2 * n - 1;
  std::vector<float> out(size_t(M * hd));
  if (L == M) {
    std::memcpy(out.data(), rel, out.size() * 4);
    return out;
  }
  const float scale = float(L) / float(M);
  for (int64_t i = 0; i < M; ++i) {
    float src = scale * (float(i) + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    const int64_t i0 = int64_t(src), i1 = i0 + (i0 < L - 1 ? 1 : 0);
    const float l1 = src - float(i0), l0 = 1.0f - l1;
    for (int64_t d = 0; d < hd; ++d) out[size_t(i * hd + d)] = l0 * rel[i0 * hd + d] + l1 * rel[i1 * hd + d];
  }
  return out;
}

}  // namespace

// Scores are materialised (a block of query rows at a time) so that q k^T and p v run on the matmul kernels.
Tensor CpuDevice::rel_pos_attention(Ctx& ctx, const Tensor& qkv, int64_t n_win, int64_t hh, int64_t ww,
                                    int64_t heads, const Tensor& rel_h, const Tensor& rel_w) {
  const int64_t T = hh * ww, W = qkv.dim(1) / 3, hd = heads > 0 ? W / heads : 0;
  PIPIT_ASSERT(qkv.ndim() == 2 && qkv.dtype() == DType::F32 && qkv.is_contiguous() && qkv.dim(0) == n_win * T &&
               heads >= 1 && qkv.dim(1) == 3 * heads * hd && hd >= 1 && rel_h.ndim() == 2 && rel_w.ndim() == 2 &&
               rel_h.dim(1) == hd && rel_w.dim(1) == hd,
               "rel_pos_attention: qkv {} for {} windows of {}x{}, {} heads, rel_h {} rel_w {}", qkv.describe(),
               n_win, hh, ww, heads, rel_h.describe(), rel_w.describe());
  Tensor out = ctx.alloc(DType::F32, {n_win * T, W});
  ArenaScope tables(*ctx.arena);
  const Tensor rhf = pipit::to_f32(ctx, rel_h), rwf = pipit::to_f32(ctx, rel_w);
  const std::vector<float> Rh = rel_table(rhf.ptr<float>(), rhf.dim(0), hd, hh);
  const std::vector<float> Rw = rel_table(rwf.ptr<float>(), rwf.dim(0), hd, ww);
  const float scale = 1.0f / std::sqrt(float(hd));
  const int64_t block = std::max<int64_t>(16, (int64_t(1) << 22) / T);  // <= 16 MB of scores
  for (int64_t b = 0; b < n_win; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      ArenaScope scope(*ctx.arena);
      Tensor q = ctx.alloc(DType::F32, {T, hd}), k = ctx.alloc(DType::F32, {T, hd}), vt = ctx.alloc(DType::F32, {hd, T});
      Tensor bh = ctx.alloc(DType::F32, {T, hh}), bw = ctx.alloc(DType::F32, {T, ww});
      const float* src = qkv.ptr<float>() + b * T * 3 * W;
      ctx.pool->parallel_for(T, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const float* r = src + i * 3 * W;
          float* qi = q.ptr<float>() + i * hd;
          std::memcpy(qi, r + h * hd, size_t(hd) * 4);
          std::memcpy(k.ptr<float>() + i * hd, r + W + h * hd, size_t(hd) * 4);
          for (int64_t d = 0; d < hd; ++d) vt.ptr<float>()[d * T + i] = r[2 * W + h * hd + d];
          // the decomposed bias: q . Rh[qh - kh + hh - 1] per key row, q . Rw[qw - kw + ww - 1] per key column
          const int64_t qh = i / ww, qw = i % ww;
          for (int64_t kh = 0; kh < hh; ++kh) {
            const float* R = Rh.data() + (qh - kh + hh - 1) * hd;
            float s = 0;
            for (int64_t d = 0; d < hd; ++d) s += qi[d] * R[d];
            bh.ptr<float>()[i * hh + kh] = s;
          }
          for (int64_t kw = 0; kw < ww; ++kw) {
            const float* R = Rw.data() + (qw - kw + ww - 1) * hd;
            float s = 0;
            for (int64_t d = 0; d < hd; ++d) s += qi[d] * R[d];
            bw.ptr<float>()[i * ww + kw] = s;
          }
        }
      });
      for (int64_t r0 = 0; r0 < T; r0 += block) {
        const int64_t r1 = std::min(T, r0 + block);
        ArenaScope rows(*ctx.arena);
        Tensor s = linear(ctx, q.slice(0, r0, r1), k);  // [r1 - r0, T]
        ctx.pool->parallel_for(r1 - r0, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) {
            float* row = s.ptr<float>() + i * T;
            const float* bhi = bh.ptr<float>() + (r0 + i) * hh;
            const float* bwi = bw.ptr<float>() + (r0 + i) * ww;
            for (int64_t kh = 0; kh < hh; ++kh)
              for (int64_t kw = 0; kw < ww; ++kw) row[kh * ww + kw] = row[kh * ww + kw] * scale + (bhi[kh] + bwi[kw]);
            ctx.k->softmax(row, T);
          }
        });
        Tensor o = linear(ctx, s, vt);  // [r1 - r0, hd]
        for (int64_t i = r0; i < r1; ++i)
          std::memcpy(out.ptr<float>() + (b * T + i) * W + h * hd, o.ptr<float>() + (i - r0) * hd, size_t(hd) * 4);
      }
    }
  return out;
}

namespace {

// torch's _compute_indices_weights_aa for one axis, in float (scalar_t of a float tensor): per output index, the
// first input index and normalised weights (ksize slots, unused ones zero).
struct AaCoeffs {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<float> w;
};

float aa_bicubic(float x) {  // Keys cubic, a = -0.5
  constexpr float a = -0.5f;
  x = std::fabs(x);
  if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
  if (x < 2.0f) return ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
  return 0.0f;
}

AaCoeffs aa_coeffs(int64_t in_size, int64_t out_size) {
  const float scale = float(in_size) / float(out_size);  // area_pixel_compute_scale, align_corners = false
  const float support = scale >= 1.0f ? 2.0f * scale : 2.0f;  // interp_size 4 for bicubic, halved
  const float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  AaCoeffs c;
  c.ksize = int64_t(std::ceil(support)) * 2 + 1;
  c.first.resize(size_t(out_size));
  c.count.resize(size_t(out_size));
  c.w.assign(size_t(out_size * c.ksize), 0.0f);
  for (int64_t i = 0; i < out_size; ++i) {
    const float center = scale * (float(i) + 0.5f);
    const int64_t xmin = std::max<int64_t>(int64_t(center - support + 0.5f), 0);
    const int64_t xsize = std::min<int64_t>(int64_t(center + support + 0.5f), in_size) - xmin;
    float* w = c.w.data() + i * c.ksize;
    float total = 0.0f;
    for (int64_t j = 0; j < xsize; ++j) {
      w[j] = aa_bicubic((float(j + xmin) - center + 0.5f) * invscale);
      total += w[j];
    }
    if (total != 0.0f)
      for (int64_t j = 0; j < xsize; ++j) w[j] /= total;
    c.first[size_t(i)] = xmin;
    c.count[size_t(i)] = xsize;
  }
  return c;
}

}  // namespace

// Separable like torch's _upsample_bicubic2d_aa: the width pass over every input row, then the height pass.
Tensor CpuDevice::resize_bicubic_aa(Ctx& ctx, const Tensor& x, int64_t oh, int64_t ow) {
  PIPIT_ASSERT(x.ndim() == 3 && x.dtype() == DType::F32 && x.is_contiguous() && oh >= 1 && ow >= 1,
               "resize_bicubic_aa: x {} to {}x{}", x.describe(), oh, ow);
  const int64_t ih = x.dim(0), iw = x.dim(1), C = x.dim(2);
  const AaCoeffs cw = aa_coeffs(iw, ow), ch = aa_coeffs(ih, oh);
  Tensor y = ctx.alloc(DType::F32, {oh, ow, C});
  const float* in = x.ptr<float>();
  float* out = y.ptr<float>();
  ctx.pool->parallel_for(C, [&](int64_t c0, int64_t c1) {
    std::vector<float> plane(size_t(ih * iw)), tmp(size_t(ih * ow));
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t p = 0; p < ih * iw; ++p) plane[size_t(p)] = in[p * C + c];
      for (int64_t yy = 0; yy < ih; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          const float* w = cw.w.data() + xx * cw.ksize;
          const float* s = plane.data() + yy * iw + cw.first[size_t(xx)];
          float acc = 0.0f;
          for (int64_t j = 0; j < cw.count[size_t(xx)]; ++j) acc += s[j] * w[j];
          tmp[size_t(yy * ow + xx)] = acc;
        }
      for (int64_t yy = 0; yy < oh; ++yy) {
        const float* w = ch.w.data() + yy * ch.ksize;
        for (int64_t xx = 0; xx < ow; ++xx) {
          float acc = 0.0f;
          for (int64_t j = 0; j < ch.count[size_t(yy)]; ++j)
            acc += tmp[size_t((ch.first[size_t(yy)] + j) * ow + xx)] * w[j];
          out[(yy * ow + xx) * C + c] = acc;
        }
      }
    }
  });
  return y;
}

// Qwen3-VL's fast_pos_embed_interpolate: sample points torch.linspace(0, side - 1, steps) in float32 (start + i * step
// for the first half, end - (steps - 1 - i) * step for the second, as torch computes it), floor by .int(), ceil =
// floor + 1 clipped, the four bilinear weights in float32, and the four rows summed in HF's order.
Tensor CpuDevice::resize_bilinear_aligned(Ctx& ctx, const Tensor& x, int64_t oh, int64_t ow) {
  PIPIT_ASSERT(x.ndim() == 3 && x.dtype() == DType::F32 && x.is_contiguous() && oh >= 1 && ow >= 1,
               "resize_bilinear_aligned: x {} to {}x{}", x.describe(), oh, ow);
  const int64_t ih = x.dim(0), iw = x.dim(1), C = x.dim(2);
  auto linspace = [](int64_t side, int64_t steps) {
    std::vector<float> v(size_t(steps), 0.0f);
    if (steps < 2) return v;
    const float end = float(side - 1), step = end / float(steps - 1);
    for (int64_t i = 0; i < steps; ++i)
      v[size_t(i)] = i < steps / 2 ? step * float(i) : end - step * float(steps - i - 1);
    return v;
  };
  const std::vector<float> hs = linspace(ih, oh), ws = linspace(iw, ow);
  Tensor y = ctx.alloc(DType::F32, {oh, ow, C});
  const float* table = x.ptr<float>();
  ctx.pool->parallel_for(oh * ow, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t yy = p / ow, xx = p % ow;
      const int64_t y0 = int64_t(hs[size_t(yy)]), x0 = int64_t(ws[size_t(xx)]);
      const int64_t y1 = std::min(y0 + 1, ih - 1), x1 = std::min(x0 + 1, iw - 1);
      const float dh = hs[size_t(yy)] - float(y0), dw = ws[size_t(xx)] - float(x0);
      const int64_t idx[4] = {y0 * iw + x0, y0 * iw + x1, y1 * iw + x0, y1 * iw + x1};
      const float wt[4] = {(1 - dh) * (1 - dw), (1 - dh) * dw, dh * (1 - dw), dh * dw};
      float* out = y.ptr<float>() + p * C;
      for (int64_t e = 0; e < C; ++e) {
        float acc = table[idx[0] * C + e] * wt[0];
        for (int k = 1; k < 4; ++k) acc += table[idx[k] * C + e] * wt[k];
        out[e] = acc;
      }
    }
  }, 4);
  return y;
}

}  // namespace pipit
