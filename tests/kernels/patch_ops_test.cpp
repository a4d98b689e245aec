// The patch-grid ops (backends/ops.h; CPU: backends/cpu/ops_patch.cpp) on 3 threads against formulas written here the way HF writes them
// (torch.clamp, 2 * (x - 0.5), apply_multidimensional_rope with rotate_half, the pooler's one-hot matmul), at 1, 31,
// 32 and 33 rows. Every op does the same float operations in the same order as the formula, so clamp, shift-scale
// and pooling must be bit-identical; RoPE's a*c - b*s may be contracted to a fused multiply-add differently in the
// kernel and in the formula (GCC does on aarch64), so it is held to 3e-7 per unit of |a c| + |b s| (~2 float ulps).
#include <cmath>

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

TEST(PatchOps, ClampAndShiftScale) {
  OpEnv e;
  Rng rng(11);
  for (int64_t n : kRows) {
    Tensor x = filled({n, 37}, rng, -4, 4);
    x.ptr<float>()[0] = NAN;
    std::vector<float> want(size_t(x.numel())), want2(size_t(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float v = x.ptr<float>()[i];
      want[size_t(i)] = std::isnan(v) ? v : v < -1.5f ? -1.5f : v > 2.25f ? 2.25f : v;
      want2[size_t(i)] = 2.0f * (want[size_t(i)] - 0.5f);
    }
    clamp_(e.ctx, x, -1.5f, 2.25f);
    EXPECT_TRUE(std::isnan(x.ptr<float>()[0]));
    for (int64_t i = 1; i < x.numel(); ++i) ASSERT_EQ(x.ptr<float>()[i], want[size_t(i)]) << n << " " << i;
    shift_scale_(e.ctx, x, -0.5f, 2.0f);
    for (int64_t i = 1; i < x.numel(); ++i) ASSERT_EQ(x.ptr<float>()[i], want2[size_t(i)]) << n << " " << i;
  }
  // strided rows: a column slice is clamped, the columns beside it are not touched
  Tensor x = filled({5, 8}, rng, -4, 4), before = x;
  std::vector<float> copy(before.ptr<float>(), before.ptr<float>() + 40);
  Tensor part = x.slice(1, 2, 6);
  clamp_(e.ctx, part, -1.0f, 1.0f);
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c = 0; c < 8; ++c) {
      const float v = copy[size_t(r * 8 + c)];
      EXPECT_EQ(x.ptr<float>()[r * 8 + c], c >= 2 && c < 6 ? std::min(std::max(v, -1.0f), 1.0f) : v);
    }
}

// HF: for each part d, x_d * cos_d + rotate_half(x_d) * sin_d with cos_d = cos(cat(f, f)), f = pos_d * inv_freq
TEST(PatchOps, RopePartsIsHfMultidimensionalRope) {
  OpEnv e;
  Rng rng(12);
  const int64_t n_head = 3, hd = 16, n_part = 2, half = hd / n_part / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = 1.0f / std::pow(100.0f, float(2 * i) / float(hd / 2));
  for (int64_t n : kRows) {
    Tensor x = filled({n, n_head, hd}, rng, -2, 2);
    std::vector<int32_t> pos(size_t(n * n_part));
    for (auto& p : pos) p = rng.integer(0, 63);
    std::vector<float> want(x.ptr<float>(), x.ptr<float>() + x.numel());
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < n_head; ++h)
        for (int64_t d = 0; d < n_part; ++d) {
          float* v = want.data() + (t * n_head + h) * hd + d * 2 * half;
          std::vector<float> in(v, v + 2 * half), rot(size_t(2 * half)), c(size_t(2 * half)), s(size_t(2 * half));
          for (int64_t i = 0; i < 2 * half; ++i) {
            const float f = float(pos[size_t(d * n + t)]) * inv[size_t(i % half)];
            c[size_t(i)] = std::cos(f);
            s[size_t(i)] = std::sin(f);
            rot[size_t(i)] = i < half ? -in[size_t(i + half)] : in[size_t(i - half)];
          }
          for (int64_t i = 0; i < 2 * half; ++i) v[i] = in[size_t(i)] * c[size_t(i)] + rot[size_t(i)] * s[size_t(i)];
        }
    std::vector<float> before(x.ptr<float>(), x.ptr<float>() + x.numel());
    rope_parts_(e.ctx, x, pos, int(n_part), inv);
    for (int64_t i = 0; i < x.numel(); ++i) {  // |a c| + |b s| <= |a| + |b|, a and b the rotated pair's inputs
      const int64_t part = i / (2 * half), k = i % (2 * half);
      const float a = before[size_t(part * 2 * half + k % half)], b = before[size_t(part * 2 * half + half + k % half)];
      ASSERT_NEAR(x.ptr<float>()[i], want[size_t(i)], 3e-7 * (std::fabs(a) + std::fabs(b)) + 1e-30) << n << " " << i;
    }
  }
  // a single part is plain rotate_half RoPE (rope_)
  Tensor a = filled({7, 2, 8}, rng, -1, 1), b = Tensor::empty(DType::F32, {7, 2, 8});
  std::copy(a.ptr<float>(), a.ptr<float>() + a.numel(), b.ptr<float>());
  std::vector<int32_t> pos = {0, 1, 2, 5, 9, 11, 40};
  std::vector<float> inv4 = {1.0f, 0.3f, 0.1f, 0.01f};
  rope_parts_(e.ctx, a, pos, 1, inv4);
  rope_(e.ctx, b, pos, inv4);
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_NEAR(a.ptr<float>()[i], b.ptr<float>()[i], 5e-7) << i;
}

// HF Gemma4VisionPooler: one_hot(block index) / k^2, then weights^T @ h (a sum of w * h terms per output)
TEST(PatchOps, PoolGridIsTheBlockMean) {
  OpEnv e;
  Rng rng(13);
  for (int64_t d : kRows)
    for (auto [gh, gw, k] : {std::array<int64_t, 3>{3, 3, 3}, {6, 9, 3}, {4, 6, 2}, {5, 7, 1}}) {
      Tensor x = filled({gh * gw, d}, rng, -3, 3);
      Tensor y = pool_grid(e.ctx, x, gh, gw, k);
      const int64_t ow = gw / k;
      ASSERT_EQ(y.dim(0), (gh / k) * ow);
      const float w = 1.0f / float(k * k);
      for (int64_t b = 0; b < y.dim(0); ++b)
        for (int64_t j = 0; j < d; ++j) {
          float acc = 0.0f;
          for (int64_t r = 0; r < gh * gw; ++r) {  // every patch, in patch order: those of block b count
            const int64_t bx = (r % gw) / k, by = (r / gw) / k;
            if (by * ow + bx == b) acc += w * x.ptr<float>()[r * d + j];
          }
          ASSERT_EQ(y.ptr<float>()[b * d + j], acc) << gh << "x" << gw << " k " << k << " block " << b << " col " << j;
        }
    }
}

}  // namespace
}  // namespace pipit
