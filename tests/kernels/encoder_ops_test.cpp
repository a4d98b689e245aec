// The encoder layout and convolution ops (backends/ops.h; CPU: backends/cpu/ops_encoder.cpp) on 3 threads against
// formulas written here: element-index formulas for the copies, fills and windows (bit-identical), direct loops in
// double for the convolution and SAM's relative-position attention, torch's definitions for the two resizes. Odd
// sizes (1, 31, 32, 33 rows; grids that are not multiples of the window) and strided views on both sides.
#include <cmath>

#include "backends/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::Rng;

struct OpEnv {
  Arena arena{size_t(1) << 24};
  ThreadPool pool{3};
  Ctx ctx{&arena, &pool, &ref_kernels(), nullptr};
};

Tensor filled(const std::vector<int64_t>& shape, Rng& rng, float lo = -1, float hi = 1) {
  Tensor t = Tensor::empty(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = rng.uniform(lo, hi);
  return t;
}

float at(const Tensor& t, std::initializer_list<int64_t> idx) {  // element by index through the strides
  int64_t off = 0, d = 0;
  for (int64_t i : idx) off += i * t.stride(int(d++));
  return *reinterpret_cast<const float*>(t.data() + off);
}

TEST(EncoderOps, CopyThroughPermutedAndSlicedViews) {
  OpEnv e;
  Rng rng(21);
  Tensor src = filled({5, 7, 9}, rng);
  // contiguous rows into a permuted view: D[j][i][c] = src[i][j][c]
  Tensor D = Tensor::empty(DType::F32, {7, 5, 9});
  Tensor dv = D.transpose(0, 1);
  copy_(e.ctx, dv, src);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t c = 0; c < 9; ++c) ASSERT_EQ(at(D, {j, i, c}), at(src, {i, j, c}));
  // strided innermost dim on both sides: E[c][j][i] = src[i][j][c], then back through another permutation
  Tensor E = Tensor::empty(DType::F32, {9, 7, 5});
  Tensor ev = E.transpose(0, 2);
  copy_(e.ctx, ev, src);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t c = 0; c < 9; ++c) ASSERT_EQ(at(E, {c, j, i}), at(src, {i, j, c}));
  Tensor F = Tensor::empty(DType::F32, {5, 7, 9});
  copy_(e.ctx, F, E.transpose(0, 2));
  for (int64_t i = 0; i < src.numel(); ++i) ASSERT_EQ(F.ptr<float>()[i], src.ptr<float>()[i]);
  // rows into a column slice: the columns beside it are not touched
  for (int64_t n : {1, 31, 32, 33}) {
    Tensor s = filled({n, 33}, rng), d = filled({n, 40}, rng);
    std::vector<float> before(d.ptr<float>(), d.ptr<float>() + d.numel());
    Tensor part = d.slice(1, 3, 36);
    copy_(e.ctx, part, s);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < 40; ++c)
        ASSERT_EQ(d.ptr<float>()[r * 40 + c], c >= 3 && c < 36 ? s.ptr<float>()[r * 33 + c - 3]
                                                                : before[size_t(r * 40 + c)]) << n << " " << r << " " << c;
  }
  Tensor h = heap_copy(e.ctx, src.slice(1, 2, 5));
  ASSERT_EQ(h.shape(), (std::vector<int64_t>{5, 3, 9}));
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t c = 0; c < 9; ++c) ASSERT_EQ(at(h, {i, j, c}), at(src, {i, j + 2, c}));
}

TEST(EncoderOps, FillAndScaleChannels) {
  OpEnv e;
  Rng rng(22);
  for (int64_t n : {1, 31, 32, 33}) {
    Tensor x = filled({n, 37}, rng);
    std::vector<float> before(x.ptr<float>(), x.ptr<float>() + x.numel());
    Tensor rows = x.slice(0, n / 2, n), cols = rows.transpose(0, 1);  // a strided view of the lower rows
    fill_(e.ctx, cols, 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < 37; ++c)
        ASSERT_EQ(x.ptr<float>()[r * 37 + c], r >= n / 2 ? 0.0f : before[size_t(r * 37 + c)]);
    Tensor y = filled({n, 3, 37}, rng), w = filled({37}, rng, -2, 2);
    std::vector<float> want(size_t(y.numel()));
    for (int64_t i = 0; i < y.numel(); ++i) want[size_t(i)] = y.ptr<float>()[i] * w.ptr<float>()[i % 37];
    scale_channels_(e.ctx, y, w);
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.ptr<float>()[i], want[size_t(i)]) << n << " " << i;
  }
}

TEST(EncoderOps, Conv2dIsTorchConv2d) {
  OpEnv e;
  Rng rng(23);
  struct Case { int64_t H, W, Cin, Cout, k, s, p; bool planes, bias; };
  for (const Case& c : {Case{7, 9, 3, 5, 3, 1, 1, false, false}, Case{8, 5, 4, 33, 3, 2, 1, false, true},
                        Case{16, 12, 3, 31, 4, 4, 0, true, true}, Case{1, 1, 2, 32, 3, 2, 1, false, false},
                        Case{9, 9, 5, 7, 3, 2, 1, true, false}}) {
    // the input as [H, W, Cin], or as a permuted view of [Cin, H, W] planes (a patch embedding's pixels)
    Tensor base = c.planes ? filled({c.Cin, c.H, c.W}, rng) : filled({c.H, c.W, c.Cin}, rng);
    Tensor x = c.planes ? base.transpose(0, 1).transpose(1, 2) : base;
    Tensor w = filled({c.Cout, c.Cin * c.k * c.k}, rng), b = c.bias ? filled({c.Cout}, rng) : Tensor();
    ArenaScope scope(e.arena);
    Tensor y = conv2d(e.ctx, x, w, b, c.k, c.s, c.p);
    const int64_t Ho = (c.H + 2 * c.p - c.k) / c.s + 1, Wo = (c.W + 2 * c.p - c.k) / c.s + 1;
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{Ho, Wo, c.Cout}));
    for (int64_t oy = 0; oy < Ho; ++oy)
      for (int64_t ox = 0; ox < Wo; ++ox)
        for (int64_t o = 0; o < c.Cout; ++o) {
          double s = c.bias ? b.ptr<float>()[o] : 0.0;
          for (int64_t ci = 0; ci < c.Cin; ++ci)
            for (int64_t ky = 0; ky < c.k; ++ky)
              for (int64_t kx = 0; kx < c.k; ++kx) {
                const int64_t iy = oy * c.s - c.p + ky, ix = ox * c.s - c.p + kx;
                if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
                s += double(w.ptr<float>()[o * c.Cin * c.k * c.k + (ci * c.k + ky) * c.k + kx]) * at(x, {iy, ix, ci});
              }
          ASSERT_NEAR(at(y, {oy, ox, o}), s, 1e-5 * (1 + std::fabs(s))) << c.H << "x" << c.W << " k" << c.k;
        }
  }
}

TEST(EncoderOps, WindowPartitionAndBack) {
  OpEnv e;
  Rng rng(24);
  struct Case { int64_t gh, gw, win; };
  for (const Case& c : {Case{5, 7, 3}, Case{8, 8, 4}, Case{1, 1, 14}, Case{33, 31, 14}}) {
    const int64_t C = 6, nh = (c.gh + c.win - 1) / c.win, nw = (c.gw + c.win - 1) / c.win;
    Tensor x = filled({c.gh * c.gw, C}, rng);
    ArenaScope scope(e.arena);
    Tensor w = window_partition(e.ctx, x, c.gh, c.gw, c.win);
    ASSERT_EQ(w.shape(), (std::vector<int64_t>{nh * nw * c.win * c.win, C}));
    for (int64_t wy = 0; wy < nh; ++wy)
      for (int64_t wx = 0; wx < nw; ++wx)
        for (int64_t ty = 0; ty < c.win; ++ty)
          for (int64_t tx = 0; tx < c.win; ++tx)
            for (int64_t ch = 0; ch < C; ++ch) {
              const int64_t y = wy * c.win + ty, xx = wx * c.win + tx;
              const float want = y < c.gh && xx < c.gw ? at(x, {y * c.gw + xx, ch}) : 0.0f;
              ASSERT_EQ(at(w, {((wy * nw + wx) * c.win + ty) * c.win + tx, ch}), want);
            }
    Tensor back = window_unpartition(e.ctx, w, c.gh, c.gw, c.win);
    ASSERT_EQ(back.shape(), x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(back.ptr<float>()[i], x.ptr<float>()[i]);
  }
}

// get_rel_pos: F.interpolate(rel.T[None], size=M, mode="linear") (align_corners false), in double here
std::vector<double> interp_linear(const Tensor& rel, int64_t M) {
  const int64_t L = rel.dim(0), hd = rel.dim(1);
  std::vector<double> out(size_t(M * hd));
  for (int64_t i = 0; i < M; ++i) {
    const double src = std::max(0.0, (i + 0.5) * double(L) / double(M) - 0.5);
    const int64_t i0 = int64_t(std::floor(src)), i1 = std::min(i0 + 1, L - 1);
    const double l = src - double(i0);
    for (int64_t d = 0; d < hd; ++d)
      out[size_t(i * hd + d)] = (1 - l) * rel.ptr<float>()[i0 * hd + d] + l * rel.ptr<float>()[i1 * hd + d];
  }
  return out;
}

TEST(EncoderOps, RelPosAttentionIsSamAttention) {
  OpEnv e;
  Rng rng(25);
  struct Case { int64_t n_win, hh, ww, heads, hd, Lh, Lw; };
  for (const Case& c : {Case{2, 3, 4, 2, 5, 5, 7}, Case{1, 5, 5, 3, 4, 9, 9}, Case{3, 1, 2, 1, 8, 1, 27}}) {
    const int64_t T = c.hh * c.ww, W = c.heads * c.hd;
    Tensor qkv = filled({c.n_win * T, 3 * W}, rng, -2, 2);
    Tensor rh = filled({c.Lh, c.hd}, rng), rw = filled({c.Lw, c.hd}, rng);
    ArenaScope scope(e.arena);
    Tensor o = rel_pos_attention(e.ctx, qkv, c.n_win, c.hh, c.ww, c.heads, rh, rw);
    ASSERT_EQ(o.shape(), (std::vector<int64_t>{c.n_win * T, W}));
    const std::vector<double> Rh = interp_linear(rh, 2 * c.hh - 1), Rw = interp_linear(rw, 2 * c.ww - 1);
    for (int64_t b = 0; b < c.n_win; ++b)
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t i = 0; i < T; ++i) {
          auto q = [&](int64_t d) { return double(qkv.ptr<float>()[(b * T + i) * 3 * W + h * c.hd + d]); };
          std::vector<double> p(static_cast<size_t>(T));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < T; ++j) {
            const float* kj = qkv.ptr<float>() + (b * T + j) * 3 * W + W + h * c.hd;
            double s = 0, bh = 0, bw = 0;
            for (int64_t d = 0; d < c.hd; ++d) {
              s += q(d) * kj[d];
              bh += q(d) * Rh[size_t((i / c.ww - j / c.ww + c.hh - 1) * c.hd + d)];
              bw += q(d) * Rw[size_t((i % c.ww - j % c.ww + c.ww - 1) * c.hd + d)];
            }
            p[size_t(j)] = s / std::sqrt(double(c.hd)) + bh + bw;
            mx = std::max(mx, p[size_t(j)]);
          }
          for (double& v : p) sum += (v = std::exp(v - mx));
          for (int64_t d = 0; d < c.hd; ++d) {
            double want = 0;
            for (int64_t j = 0; j < T; ++j)
              want += p[size_t(j)] / sum * qkv.ptr<float>()[(b * T + j) * 3 * W + 2 * W + h * c.hd + d];
            ASSERT_NEAR(at(o, {b * T + i, h * c.hd + d}), want, 2e-5) << b << " " << h << " " << i << " " << d;
          }
        }
  }
}

// torch _upsample_bicubic2d_aa's weights for one axis (Keys cubic a = -0.5, support 2 * scale when shrinking,
// normalised), as a dense [out, in] matrix in double
std::vector<double> aa_matrix(int64_t in, int64_t out) {
  const double scale = double(in) / double(out), support = scale >= 1 ? 2 * scale : 2.0;
  const double inv = scale >= 1 ? 1 / scale : 1.0;
  auto cubic = [](double x) {
    const double a = -0.5;
    x = std::fabs(x);
    return x < 1 ? ((a + 2) * x - (a + 3)) * x * x + 1 : x < 2 ? ((a * x - 5 * a) * x + 8 * a) * x - 4 * a : 0.0;
  };
  std::vector<double> m(size_t(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const double center = scale * (i + 0.5);
    const int64_t lo = std::max<int64_t>(int64_t(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(int64_t(center + support + 0.5), in);
    double total = 0;
    for (int64_t j = lo; j < hi; ++j) total += (m[size_t(i * in + j)] = cubic((j - center + 0.5) * inv));
    for (int64_t j = lo; j < hi; ++j) m[size_t(i * in + j)] /= total;
  }
  return m;
}

TEST(EncoderOps, ResizeBicubicAaIsTorchAntialias) {
  OpEnv e;
  Rng rng(26);
  struct Case { int64_t ih, iw, oh, ow, C; };
  for (const Case& c : {Case{8, 8, 5, 5, 3}, Case{4, 6, 7, 9, 2}, Case{16, 16, 10, 33, 1}, Case{5, 5, 5, 5, 4}}) {
    Tensor x = filled({c.ih, c.iw, c.C}, rng);
    ArenaScope scope(e.arena);
    Tensor y = resize_bicubic_aa(e.ctx, x, c.oh, c.ow);
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{c.oh, c.ow, c.C}));
    const std::vector<double> my = aa_matrix(c.ih, c.oh), mx = aa_matrix(c.iw, c.ow);
    for (int64_t oy = 0; oy < c.oh; ++oy)
      for (int64_t ox = 0; ox < c.ow; ++ox)
        for (int64_t ch = 0; ch < c.C; ++ch) {
          double want = 0;
          for (int64_t iy = 0; iy < c.ih; ++iy)
            for (int64_t ix = 0; ix < c.iw; ++ix)
              want += my[size_t(oy * c.ih + iy)] * mx[size_t(ox * c.iw + ix)] * at(x, {iy, ix, ch});
          ASSERT_NEAR(at(y, {oy, ox, ch}), want, 1e-5) << c.ih << "->" << c.oh;
        }
    if (c.ih == c.oh && c.iw == c.ow) {  // the same size is the identity
      for (int64_t i = 0; i < x.numel(); ++i) ASSERT_NEAR(y.ptr<float>()[i], x.ptr<float>()[i], 1e-7);
    }
  }
}

TEST(EncoderOps, ResizeBilinearAlignedIsExactOnARamp) {
  OpEnv e;
  Rng rng(27);
  struct Case { int64_t ih, iw, oh, ow; };
  for (const Case& c : {Case{6, 6, 4, 10}, Case{48, 48, 31, 33}, Case{5, 3, 1, 7}, Case{7, 7, 7, 7}}) {
    // a plane a + b y + c x per channel is reproduced exactly by bilinear sampling at y' = y (ih - 1) / (oh - 1)
    const int64_t C = 3;
    Tensor x = Tensor::empty(DType::F32, {c.ih, c.iw, C});
    const float a[C] = {0.5f, -1.0f, 2.0f}, b[C] = {0.25f, 0.5f, -0.125f}, d[C] = {-0.5f, 0.125f, 1.0f};
    for (int64_t y = 0; y < c.ih; ++y)
      for (int64_t xx = 0; xx < c.iw; ++xx)
        for (int64_t ch = 0; ch < C; ++ch) x.ptr<float>()[(y * c.iw + xx) * C + ch] = a[ch] + b[ch] * y + d[ch] * xx;
    ArenaScope scope(e.arena);
    Tensor out = resize_bilinear_aligned(e.ctx, x, c.oh, c.ow);
    ASSERT_EQ(out.shape(), (std::vector<int64_t>{c.oh, c.ow, C}));
    for (int64_t y = 0; y < c.oh; ++y)
      for (int64_t xx = 0; xx < c.ow; ++xx) {
        const double sy = c.oh > 1 ? double(y) * (c.ih - 1) / (c.oh - 1) : 0.0;
        const double sx = c.ow > 1 ? double(xx) * (c.iw - 1) / (c.ow - 1) : 0.0;
        for (int64_t ch = 0; ch < C; ++ch)
          ASSERT_NEAR(at(out, {y, xx, ch}), a[ch] + b[ch] * sy + d[ch] * sx, 2e-5) << y << " " << xx;
      }
    // corners are the input's corners, exactly
    Tensor r = filled({c.ih, c.iw, C}, rng);
    Tensor o2 = resize_bilinear_aligned(e.ctx, r, c.oh, c.ow);
    for (int64_t ch = 0; ch < C; ++ch) {
      EXPECT_EQ(at(o2, {0, 0, ch}), at(r, {0, 0, ch}));
      if (c.oh > 1 && c.ow > 1) {
        EXPECT_EQ(at(o2, {c.oh - 1, c.ow - 1, ch}), at(r, {c.ih - 1, c.iw - 1, ch}));
      }
    }
  }
}

}  // namespace
}  // namespace pipit
