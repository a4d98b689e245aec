// The decoder ops that replaced host loops in models/ (backends/ops.h; CPU: backends/cpu/ops_moe.cpp,
// ops_decoder.cpp) on 3 threads against formulas written here the way HF writes them (torch.softmax + torch.topk,
// GptOssExperts' clamped SwiGLU, index_add_ of weighted expert rows, attn * sigmoid(gate), tanh soft-cap), at 1, 31,
// 32 and 33 rows. Elementwise ops do the same float operations as the formula and must be bit-identical; a
// multiply-add may be fused differently on aarch64 (GCC contracts there), so add_rows_scaled_ is held to 2 ulps.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backends/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::Rng;

struct OpEnv {
  Arena arena{size_t(1) << 22};
  ThreadPool pool{3};
  Ctx ctx{&arena, &pool, &ref_kernels(), nullptr};
};

Tensor filled(const std::vector<int64_t>& shape, Rng& rng, float lo, float hi) {
  Tensor t = Tensor::empty(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = rng.uniform(lo, hi);
  return t;
}

const int64_t kRows[] = {1, 31, 32, 33};

// torch.topk(v, k) on a row: indices by value, largest first, ties to the lower index (a stable sort)
std::vector<int32_t> topk(const std::vector<double>& v, int64_t k) {
  std::vector<int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return v[size_t(a)] > v[size_t(b)]; });
  idx.resize(size_t(k));
  return idx;
}

TEST(DecoderOps, MoeRouteSoftmaxThenTopK) {
  OpEnv e;
  Rng rng(21);
  const int64_t E = 13, K = 3;
  const std::vector<float> es = rng.floats(size_t(E), 0.5f, 2.0f);
  for (int64_t n : kRows)
    for (int variant = 0; variant < 3; ++variant) {
      Tensor logits = filled({n, E}, rng, -3, 3);
      MoeRouteParams p;
      p.k = K;
      p.renormalize = variant >= 1;
      p.scale = variant == 1 ? 2.5f : 1.0f;
      if (variant == 2) p.expert_scale = es;
      MoeRoutes r = moe_route(e.ctx, logits, p);
      ASSERT_EQ(r.sel.shape(), (std::vector<int64_t>{n, K}));
      for (int64_t t = 0; t < n; ++t) {
        std::vector<double> prob(static_cast<size_t>(E));
        double z = 0, mx = -1e30;
        for (int64_t i = 0; i < E; ++i) mx = std::max(mx, double(logits.ptr<float>()[t * E + i]));
        for (int64_t i = 0; i < E; ++i) z += prob[size_t(i)] = std::exp(double(logits.ptr<float>()[t * E + i]) - mx);
        for (auto& v : prob) v /= z;
        const auto want = topk(prob, K);
        double kept = 0;
        for (int32_t i : want) kept += prob[size_t(i)];
        for (int64_t k = 0; k < K; ++k) {
          const int32_t ex = want[size_t(k)];
          ASSERT_EQ(r.sel.ptr<int32_t>()[t * K + k], ex) << n << " " << t << " " << k;
          double w = prob[size_t(ex)];
          if (p.renormalize) w /= kept;
          w *= p.scale;
          if (variant == 2) w *= es[size_t(ex)];
          EXPECT_NEAR(r.wt.ptr<float>()[t * K + k], w, 2e-6 * std::abs(w)) << n << " " << t << " " << k;
        }
      }
    }
}

TEST(DecoderOps, MoeRouteTopKThenSoftmaxTiesKeepTheLowerExpert) {
  OpEnv e;
  Rng rng(22);
  const int64_t E = 8, K = 4;
  for (int64_t n : kRows) {
    Tensor logits = Tensor::empty(DType::F32, {n, E});
    for (int64_t i = 0; i < logits.numel(); ++i) logits.ptr<float>()[i] = float(rng.integer(-3, 3));  // many ties
    MoeRouteParams p;
    p.k = K;
    p.order = MoeOrder::kTopKSoftmax;
    MoeRoutes r = moe_route(e.ctx, logits, p);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> l(logits.ptr<float>() + t * E, logits.ptr<float>() + (t + 1) * E);
      const auto want = topk(l, K);
      double z = 0;
      for (int32_t i : want) z += std::exp(l[size_t(i)] - l[size_t(want[0])]);
      for (int64_t k = 0; k < K; ++k) {
        ASSERT_EQ(r.sel.ptr<int32_t>()[t * K + k], want[size_t(k)]) << n << " " << t << " " << k;
        const double w = std::exp(l[size_t(want[size_t(k)])] - l[size_t(want[0])]) / z;
        EXPECT_NEAR(r.wt.ptr<float>()[t * K + k], w, 2e-6 * w);
      }
    }
  }
}

// the dispatch every MoE shares: group by expert, gather, expert, weighted scatter-add in expert order (HF index_add_)
TEST(DecoderOps, GroupGatherScatterIsTheWeightedSumInExpertOrder) {
  OpEnv e;
  Rng rng(23);
  const int64_t E = 5, K = 2, d = 33;
  for (int64_t n : kRows) {
    Tensor x = filled({n, d}, rng, -2, 2);
    MoeRoutes r{Tensor::empty(DType::I32, {n, K}), Tensor::empty(DType::F32, {n, K})};
    for (int64_t t = 0; t < n; ++t) {
      const int32_t a = rng.integer(0, int(E) - 1), b = (a + rng.integer(1, int(E) - 1)) % int32_t(E);
      r.sel.ptr<int32_t>()[t * K] = a, r.sel.ptr<int32_t>()[t * K + 1] = b;
      r.wt.ptr<float>()[t * K] = rng.uniform(0, 1), r.wt.ptr<float>()[t * K + 1] = rng.uniform(0, 1);
    }
    const ExpertGroups g = group_by_expert(e.ctx, r, E);
    ASSERT_EQ(g.begin.size(), size_t(E + 1));
    ASSERT_EQ(g.begin.back(), n * K);
    Tensor out = Tensor::empty(DType::F32, {n, d});
    fill_(e.ctx, out, 0.0f);
    for (int64_t ex = 0; ex < E; ++ex) {
      const int64_t b = g.begin[size_t(ex)], m = g.begin[size_t(ex + 1)] - b;
      if (m == 0) continue;
      std::span<const int64_t> rows(g.token.data() + b, size_t(m));
      ASSERT_TRUE(std::is_sorted(rows.begin(), rows.end()));
      Tensor xe = gather_rows(e.ctx, x, rows);
      scale_(e.ctx, xe, float(ex + 1));  // "expert" ex: x * (ex + 1)
      add_rows_scaled_(e.ctx, out, rows, std::span<const float>(g.weight.data() + b, size_t(m)), xe);
    }
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < d; ++c) {
        float want = 0.0f;
        for (int64_t ex = 0; ex < E; ++ex)  // experts in index order, as HF's loop over expert_hit
          for (int64_t k = 0; k < K; ++k)
            if (r.sel.ptr<int32_t>()[t * K + k] == ex)
              want += r.wt.ptr<float>()[t * K + k] * (x.ptr<float>()[t * d + c] * float(ex + 1));
        EXPECT_NEAR(out.ptr<float>()[t * d + c], want, 2.4e-7f * (std::abs(want) + 1.0f)) << n << " " << t << " " << c;
      }
  }
}

TEST(DecoderOps, SwigluClampedIsGptOssExperts) {
  OpEnv e;
  Rng rng(24);
  const float alpha = 1.702f, limit = 7.0f;
  for (int64_t m : kRows) {
    Tensor gu = filled({m, 2 * 37}, rng, -10, 10);
    Tensor y = swiglu_clamped(e.ctx, gu, alpha, limit);
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{m, 37}));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < 37; ++j) {
        const float gate = std::min(gu.ptr<float>()[r * 74 + 2 * j], limit);       // gu[..., ::2].clamp(max=limit)
        const float up = std::max(std::min(gu.ptr<float>()[r * 74 + 2 * j + 1], limit), -limit);
        const float glu = gate * (1.0f / (1.0f + std::exp(-(gate * alpha))));       // gate * sigmoid(gate * alpha)
        ASSERT_EQ(y.ptr<float>()[r * 37 + j], (up + 1.0f) * glu) << m << " " << r << " " << j;
      }
  }
}

TEST(DecoderOps, SigmoidMulSoftcapAndFill) {
  OpEnv e;
  Rng rng(25);
  for (int64_t n : kRows) {
    Tensor x = filled({n, 35}, rng, -30, 30), gate = filled({n, 35}, rng, -8, 8);
    std::vector<float> want(size_t(x.numel())), want2(size_t(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      want[size_t(i)] = x.ptr<float>()[i] * (1.0f / (1.0f + std::exp(-gate.ptr<float>()[i])));
      want2[size_t(i)] = std::tanh(want[size_t(i)] / 5.5f) * 5.5f;
    }
    sigmoid_mul_(e.ctx, x, gate);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.ptr<float>()[i], want[size_t(i)]) << n << " " << i;
    softcap_(e.ctx, x, 5.5f);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.ptr<float>()[i], want2[size_t(i)]) << n << " " << i;
    fill_(e.ctx, x, -0.25f);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.ptr<float>()[i], -0.25f);
  }
  // strided rows: only the column slice changes
  Tensor x = filled({5, 8}, rng, -4, 4);
  std::vector<float> copy(x.ptr<float>(), x.ptr<float>() + 40);
  Tensor part = x.slice(1, 2, 6);
  fill_(e.ctx, part, 1.0f);
  for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(x.ptr<float>()[i], i % 8 >= 2 && i % 8 < 6 ? 1.0f : copy[size_t(i)]);
}

// DeepStack: token i's hidden state += column block b of its embedding row embd_row[i] (rows < 0: none)
TEST(DecoderOps, AddRowsFromAColumnBlock) {
  OpEnv e;
  Rng rng(26);
  const int64_t d = 31, blocks = 3;
  for (int64_t n : kRows) {
    Tensor x = filled({n, d}, rng, -1, 1);
    Tensor src = filled({7, d * blocks}, rng, -1, 1);
    std::vector<int32_t> row(static_cast<size_t>(n));
    for (auto& r : row) r = rng.integer(-1, 6);
    std::vector<float> want(x.ptr<float>(), x.ptr<float>() + x.numel());
    for (int64_t i = 0; i < n; ++i)
      if (row[size_t(i)] >= 0)
        for (int64_t c = 0; c < d; ++c)
          want[size_t(i * d + c)] += src.ptr<float>()[row[size_t(i)] * d * blocks + d + c];  // column block 1
    add_rows_(e.ctx, x, row, src.slice(1, d, 2 * d));
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.ptr<float>()[i], want[size_t(i)]) << n << " " << i;
  }
}

}  // namespace
}  // namespace pipit
