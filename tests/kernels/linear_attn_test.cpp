// Linear-attention kernels (Gated DeltaNet). The reference itself first: the chunked delta rule equals the token by
// token recurrence (the chunked form is an exact rewrite: only rounding differs), and a conv over n tokens equals
// n single-token updates (bit for bit: same sums). Then every ISA level against ref:
//   causal_conv:     |y - y_ref| <= 1e-6 |y_ref| + 1e-6, state bit-identical (a copy)
//   delta_step/chunk:|o - o_ref|, |S - S_ref| <= 2e-5 (1 + |ref|)     (FMA and lane order in sums of dk products)
//   rms_norm_gated:  |y - y_ref| <= 2e-6 |y_ref| + 1e-6
// Sizes cover Qwen3.5-0.8B's heads (dk = dv = 128) and odd ones (tails); runs cross the 64-token chunks.
#include <cmath>

#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

struct DeltaCase {
  int64_t n, dk, dv;
  std::vector<float> q, k, v, g, beta, state;
};

// Random inputs shaped as the model makes them: q, k L2-normalised (q scaled by dk^-0.5), g < 0, beta in (0, 1).
DeltaCase make_case(Rng& rng, int64_t n, int64_t dk, int64_t dv) {
  DeltaCase c{n, dk, dv};
  c.q = rng.floats(size_t(n * dk));
  c.k = rng.floats(size_t(n * dk));
  for (int64_t t = 0; t < n; ++t)
    for (auto* x : {&c.q, &c.k}) {
      float ss = 0;
      for (int64_t d = 0; d < dk; ++d) ss += (*x)[size_t(t * dk + d)] * (*x)[size_t(t * dk + d)];
      const float s = 1.0f / std::sqrt(ss + 1e-6f) * (x == &c.q ? 1.0f / std::sqrt(float(dk)) : 1.0f);
      for (int64_t d = 0; d < dk; ++d) (*x)[size_t(t * dk + d)] *= s;
    }
  c.v = rng.floats(size_t(n * dv), -2, 2);
  for (int64_t t = 0; t < n; ++t) c.g.push_back(rng.uniform(-0.3f, -0.001f)), c.beta.push_back(rng.uniform(0.05f, 0.95f));
  c.state = rng.floats(size_t(dk * dv), -0.5f, 0.5f);
  return c;
}

// Runs fn over the case; returns outputs [n, dv] and leaves the final state in `state`.
std::vector<float> run_delta(DeltaRuleFn fn, const DeltaCase& c, std::vector<float>& state) {
  std::vector<float> out(size_t(c.n * c.dv), 999.0f), scratch(size_t(delta_rule_scratch(c.dk, c.dv)));
  state = c.state;
  DeltaRuleArgs a{c.q.data(), c.k.data(), c.dk, c.v.data(), c.dv, c.g.data(), c.beta.data(), 1,
                  out.data(), c.dv, state.data(), scratch.data(), c.n, c.dk, c.dv};
  fn(a);
  return out;
}

double worst_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i) w = std::max(w, std::fabs(double(a[i]) - b[i]) / (1.0 + std::fabs(b[i])));
  return w;
}

TEST(DeltaRuleRef, ChunkedEqualsRecurrent) {
  Rng rng(11);
  for (auto [n, dk, dv] : {std::tuple<int64_t, int64_t, int64_t>{150, 32, 48}, {64, 128, 128}, {1, 16, 16}, {65, 20, 7}}) {
    DeltaCase c = make_case(rng, n, dk, dv);
    std::vector<float> s_step, s_chunk;
    auto o_step = run_delta(ref_kernels().delta_step, c, s_step);
    auto o_chunk = run_delta(ref_kernels().delta_chunk, c, s_chunk);
    EXPECT_LE(worst_rel(o_chunk, o_step), 2e-5) << "n " << n << " dk " << dk << " dv " << dv;
    EXPECT_LE(worst_rel(s_chunk, s_step), 2e-5) << "n " << n << " dk " << dk << " dv " << dv;
  }
}

// The conv over n tokens == n one-token updates from the same window, and == the zero-padded causal conv.
TEST(CausalConvRef, ChunkEqualsStepsAndDirectFormula) {
  Rng rng(12);
  const int64_t n = 9, C = 19, K = 4;
  auto x = rng.floats(size_t(n * C)), w = rng.floats(size_t(K * C));
  std::vector<float> st_all(size_t(K * C), 0.0f), st_step(size_t(K * C), 0.0f), y_all(size_t(n * C)), y_step(size_t(n * C));
  ref_kernels().causal_conv({x.data(), C, y_all.data(), C, st_all.data(), w.data(), n, C, K}, 0, C);
  for (int64_t t = 0; t < n; ++t)
    ref_kernels().causal_conv({x.data() + t * C, C, y_step.data() + t * C, C, st_step.data(), w.data(), 1, C, K}, 0, C);
  for (size_t i = 0; i < y_all.size(); ++i) ASSERT_EQ(test::bits(y_all[i]), test::bits(y_step[i])) << i;
  for (size_t i = 0; i < st_all.size(); ++i) ASSERT_EQ(test::bits(st_all[i]), test::bits(st_step[i])) << i;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t j = 0; j < K; ++j)
        if (t - (K - 1) + j >= 0) s += double(w[size_t(j * C + c)]) * x[size_t((t - (K - 1) + j) * C + c)];
      EXPECT_NEAR(y_all[size_t(t * C + c)], s / (1 + std::exp(-s)), 1e-6) << t << " " << c;
    }
  for (int64_t r = 0; r < K; ++r)  // the window holds the last K inputs
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(st_all[size_t(r * C + c)], x[size_t((n - K + r) * C + c)]);
}

class LinearAttn : public IsaTest {};

TEST_P(LinearAttn, CausalConv) {
  if (inherited([](const Kernels& t) { return t.causal_conv; })) GTEST_SKIP() << "tested at a lower level";
  Rng rng(13);
  for (int64_t n : {1, 2, 7, 70})
    for (int64_t C : {6144, 37}) {
      const int64_t K = 4, xs = C + 5;  // strided input rows
      auto x = rng.floats(size_t(n * xs), -2, 2), w = rng.floats(size_t(K * C));
      auto st0 = rng.floats(size_t(K * C), -2, 2);
      std::vector<float> st = st0, str = st0, y(size_t(n * C)), yr(size_t(n * C));
      // two channel ranges as the op splits them, the second starting off a vector boundary
      const int64_t mid = C > 64 ? 64 * 3 : 13;
      for (auto [c0, c1] : {std::pair<int64_t, int64_t>{0, mid}, {mid, C}}) {
        k().causal_conv({x.data(), xs, y.data(), C, st.data(), w.data(), n, C, K}, c0, c1);
        r().causal_conv({x.data(), xs, yr.data(), C, str.data(), w.data(), n, C, K}, c0, c1);
      }
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], yr[i], 1e-6 * std::fabs(yr[i]) + 1e-6) << "n " << n << " C " << C << " i " << i;
      for (size_t i = 0; i < st.size(); ++i) ASSERT_EQ(test::bits(st[i]), test::bits(str[i])) << "state " << i;
    }
}

TEST_P(LinearAttn, DeltaRule) {
  if (inherited([](const Kernels& t) { return t.delta_chunk; })) GTEST_SKIP() << "tested at a lower level";
  Rng rng(14);
  for (auto [n, dk, dv] : {std::tuple<int64_t, int64_t, int64_t>{130, 128, 128}, {3, 128, 128}, {70, 17, 33}}) {
    DeltaCase c = make_case(rng, n, dk, dv);
    for (bool chunk : {false, true}) {
      std::vector<float> s, sr;
      auto o = run_delta(chunk ? k().delta_chunk : k().delta_step, c, s);
      auto orf = run_delta(chunk ? r().delta_chunk : r().delta_step, c, sr);
      EXPECT_LE(worst_rel(o, orf), 2e-5) << (chunk ? "chunk" : "step") << " n " << n << " dk " << dk << " dv " << dv;
      EXPECT_LE(worst_rel(s, sr), 2e-5) << (chunk ? "chunk" : "step") << " n " << n << " dk " << dk << " dv " << dv;
    }
  }
}

TEST_P(LinearAttn, RmsNormGated) {
  if (inherited([](const Kernels& t) { return t.rms_norm_gated; })) GTEST_SKIP() << "tested at a lower level";
  Rng rng(15);
  for (int64_t n : {1, 7, 32, 128, 131}) {
    auto x = rng.floats(size_t(n), -3, 3), w = rng.floats(size_t(n), 0.5f, 1.5f), z = rng.floats(size_t(n), -6, 6);
    std::vector<float> y(static_cast<size_t>(n)), yr(static_cast<size_t>(n));
    k().rms_norm_gated(x.data(), w.data(), z.data(), y.data(), n, 1e-6f);
    r().rms_norm_gated(x.data(), w.data(), z.data(), yr.data(), n, 1e-6f);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[size_t(i)], yr[size_t(i)], 2e-6 * std::fabs(yr[size_t(i)]) + 1e-6) << n;
  }
}

PIPIT_INSTANTIATE_ISA(LinearAttn);

}  // namespace
}  // namespace pipit
