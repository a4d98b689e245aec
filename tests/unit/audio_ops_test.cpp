// The audio encoder ops (backends/ops.h; CPU: backends/cpu/ops_audio.cpp) against independent formulations: local_rel_attention against
// HF's blocked form (blocks of `chunk` queries over a context of chunk + past keys, Transformer-XL rel-shift of the
// position logits, mask, soft-cap), the causal depthwise conv and the 3x3 stride-2 conv against direct loops in
// double, GLU / SiLU / clamp on known values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/ops.h"

namespace pipit {
namespace {

struct AudioOps : ::testing::Test {
  Arena arena{size_t(1) << 22};
  ThreadPool pool{2};
  Ctx ctx{&arena, &pool, &kernels(), {}};
  std::mt19937 rng{7};
  Tensor randn(const std::vector<int64_t>& shape, float s = 1.0f) {
    Tensor t = Tensor::empty(DType::F32, shape);
    std::normal_distribution<float> nd(0.0f, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = nd(rng);
    return t;
  }
};

// HF Gemma4AudioAttention after the projections, transcribed in its blocked form (one batch, query i, head h):
// pos rows are distances P .. 0 (P = past = context / 2), bd = q @ pos^T rel-shifted, logits = ac + bd, soft-cap,
// masked outside [i - window + 1, i], softmax over the context.
std::vector<double> blocked_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel_by_dist,
                                      int chunk, int window, float cap) {
  const int64_t T = q.dim(0), nh = q.dim(1), hd = q.dim(2);
  const int past = chunk, ctx = chunk + past, pl = past + 1;
  const int64_t nb = (T + chunk - 1) / chunk;
  std::vector<double> out(size_t(T * nh * hd), 0.0);
  auto at = [&](const Tensor& t, int64_t i, int64_t h, int64_t d) { return double(t.ptr<float>()[(i * nh + h) * hd + d]); };
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < nh; ++h) {
      // bd_raw[r][p] = q_(b*chunk + r) . pos_p, pos_p = relative key of distance P - p
      std::vector<double> raw(size_t(chunk * (ctx + 1)), 0.0);  // padded to ctx + 1 columns as rel_shift does
      for (int r = 0; r < chunk; ++r)
        for (int p = 0; p < pl; ++p) {
          const int64_t i = b * chunk + r;
          if (i >= T) continue;
          const int dist = past - p;
          if (dist >= window) continue;  // rows past the window are masked anyway; rel_by_dist has only `window`
          double s = 0;
          for (int64_t d = 0; d < hd; ++d) s += at(q, i, h, d) * double(rel_by_dist.ptr<float>()[(dist * nh + h) * hd + d]);
          raw[size_t(r * (ctx + 1) + p)] = s;
        }
      for (int r = 0; r < chunk; ++r) {
        const int64_t i = b * chunk + r;
        if (i >= T) continue;
        std::vector<double> logit(static_cast<size_t>(ctx));
        std::vector<bool> ok(static_cast<size_t>(ctx));
        double mx = -1e300;
        for (int c = 0; c < ctx; ++c) {
          const int64_t j = b * chunk - past + c;  // the context block's key
          const double bd = raw[size_t(r * ctx + c)];  // the rel-shift: flat index r * ctx + c of the padded rows
          double ac = 0;
          if (j >= 0 && j < T)
            for (int64_t d = 0; d < hd; ++d) ac += at(q, i, h, d) * at(k, j, h, d);
          double l = ac + bd;
          l = std::tanh(l / cap) * cap;
          ok[size_t(c)] = j >= 0 && j < T && i - j >= 0 && i - j < window;
          logit[size_t(c)] = ok[size_t(c)] ? l : -1e9;
          mx = std::max(mx, logit[size_t(c)]);
        }
        double sum = 0;
        for (int c = 0; c < ctx; ++c) sum += (logit[size_t(c)] = std::exp(logit[size_t(c)] - mx));
        for (int c = 0; c < ctx; ++c) {
          const int64_t j = b * chunk - past + c;
          if (!ok[size_t(c)]) continue;
          for (int64_t d = 0; d < hd; ++d) out[size_t((i * nh + h) * hd + d)] += logit[size_t(c)] / sum * at(v, j, h, d);
        }
      }
    }
  return out;
}

TEST_F(AudioOps, LocalRelAttentionEqualsTheBlockedRelShiftForm) {
  for (int64_t T : {1, 5, 12, 13, 30, 50}) {
    const int chunk = 12, window = 12;  // Gemma 4: chunk 12, context_left 13 -> each query sees 11 + itself
    Tensor q = randn({T, 3, 8}), k = randn({T, 3, 8}), v = randn({T, 3, 8}), rel = randn({window, 3, 8});
    Tensor o = local_rel_attention(ctx, q, k, v, rel, window, 2.0f);  // a small cap, so the soft-cap acts
    auto want = blocked_reference(q, k, v, rel, chunk, window, 2.0f);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(want[i] - double(o.ptr<float>()[i])));
    EXPECT_LE(worst, 2e-6) << "T " << T;
  }
}

TEST_F(AudioOps, DepthwiseConvIsCausal) {
  Tensor x = randn({9, 4}), w = randn({4, 5});
  Tensor y = depthwise_conv1d_causal(ctx, x, w);
  for (int64_t t = 0; t < 9; ++t)
    for (int64_t c = 0; c < 4; ++c) {
      double s = 0;
      for (int64_t j = 0; j < 5; ++j)
        if (t - 4 + j >= 0) s += double(w.ptr<float>()[c * 5 + j]) * x.ptr<float>()[(t - 4 + j) * 4 + c];
      EXPECT_NEAR(y.ptr<float>()[t * 4 + c], s, 1e-5) << t << " " << c;
    }
}

TEST_F(AudioOps, Conv3x3Stride2MatchesDirectLoops) {
  for (auto [H, W] : {std::pair<int64_t, int64_t>{7, 10}, {8, 8}, {1, 3}}) {
    const int64_t Cin = 3, Cout = 5;
    Tensor x = randn({H, W, Cin}), w = randn({Cout, Cin * 9});
    Tensor y = conv2d_3x3_s2(ctx, x, w);
    const int64_t Ho = (H - 1) / 2 + 1, Wo = (W - 1) / 2 + 1;
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{Ho, Wo, Cout}));
    for (int64_t oy = 0; oy < Ho; ++oy)
      for (int64_t ox = 0; ox < Wo; ++ox)
        for (int64_t co = 0; co < Cout; ++co) {
          double s = 0;  // torch Conv2d(stride 2, padding 1): input (2 oy - 1 + ky, 2 ox - 1 + kx)
          for (int64_t ci = 0; ci < Cin; ++ci)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = 2 * oy - 1 + ky, ix = 2 * ox - 1 + kx;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                s += double(w.ptr<float>()[co * Cin * 9 + ci * 9 + ky * 3 + kx]) * x.ptr<float>()[(iy * W + ix) * Cin + ci];
              }
          EXPECT_NEAR(y.ptr<float>()[(oy * Wo + ox) * Cout + co], s, 1e-4);
        }
  }
}

TEST_F(AudioOps, GluSiluClamp) {
  Tensor x = Tensor::empty(DType::F32, {1, 4});
  float* p = x.ptr<float>();
  p[0] = 1.0f, p[1] = -2.0f, p[2] = 0.0f, p[3] = 3.0f;
  Tensor g = glu(ctx, x);  // a * sigmoid(b), a = [1, -2], b = [0, 3]
  EXPECT_NEAR(g.ptr<float>()[0], 0.5f, 1e-7);
  EXPECT_NEAR(g.ptr<float>()[1], -2.0 / (1.0 + std::exp(-3.0)), 1e-6);
  silu_(ctx, x);
  EXPECT_NEAR(p[1], -2.0 / (1.0 + std::exp(2.0)), 1e-6);
  EXPECT_EQ(p[2], 0.0f);
  clamp_(ctx, x, -0.1f, 1.0f);
  EXPECT_EQ(p[1], -0.1f);
  EXPECT_EQ(p[3], 1.0f);
}

}  // namespace
}  // namespace pipit
