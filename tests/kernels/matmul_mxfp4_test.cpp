// mxfp4 (GPT-OSS experts) x int8 activation blocks: every ISA level's kernel against ref, and ref's dequantization
// against the OCP / HF definition (FP4_VALUES[nibble] * 2^(e - 127), element j low nibble, j + 16 high nibble).
// Exactness as for q8_0 / q4_0 (matmul_quant_test.cpp): with unit scales (e = 128, d_a = 1) y is a sum of exact
// integers below 2^24 and must equal ref bit for bit; with random scales the f32 accumulation order may differ
// within 1e-5 of the sum of absolute products. Batch invariance is in matmul_invariance_test.cpp.
#include <cmath>

#include "backends/cpu/ref/ref.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

// HF integrations/mxfp4.py FP4_VALUES
constexpr float kFp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

TEST(Mxfp4Ref, DequantizeIsTheOcpDefinition) {
  Rng rng(11);
  std::vector<BlockMXFP4> blocks(64);
  for (auto& b : blocks) {
    b.e = uint8_t(rng.integer(0, 250));  // 6 x 2^(e - 127) stays finite in f32
    for (auto& q : b.qs) q = uint8_t(rng.integer(0, 255));
  }
  blocks[0].e = 0;  // the subnormal exponents
  blocks[1].e = 1;
  std::vector<float> out(blocks.size() * kQBlock);
  ref::mxfp4_to_f32(blocks.data(), out.data(), int64_t(out.size()));
  for (size_t b = 0; b < blocks.size(); ++b)
    for (int i = 0; i < kQBlock; ++i) {
      const uint8_t byte = blocks[b].qs[i % 16];
      const int code = i < 16 ? byte & 0x0f : byte >> 4;
      const double want = double(kFp4[code]) * std::ldexp(1.0, int(blocks[b].e) - 127);
      ASSERT_EQ(double(out[b * kQBlock + size_t(i)]), want) << "block " << b << " element " << i;
    }
}

TEST(Mxfp4Ref, QuantizeRoundTripsRepresentableValues) {
  // values that are exactly E2M1 x 2^k with the block's largest magnitude in [4, 6]: quantizing gives them back
  Rng rng(12);
  std::vector<float> x(32 * 16);
  for (size_t b = 0; b < 16; ++b) {
    const int k = rng.integer(-20, 10);
    for (int i = 0; i < kQBlock; ++i) x[b * 32 + size_t(i)] = std::ldexp(kFp4[rng.integer(0, 15)], k);
    x[b * 32 + size_t(rng.integer(0, 31))] = std::ldexp(rng.integer(0, 1) ? 6.0f : -4.0f, k);
  }
  std::vector<BlockMXFP4> q(16);
  ref::mxfp4_from_f32(x.data(), q.data(), int64_t(x.size()));
  std::vector<float> back(x.size());
  ref::mxfp4_to_f32(q.data(), back.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], x[i]) << i;
}

class MatmulMxfp4 : public IsaTest {};

TEST_P(MatmulMxfp4, MatchesRef) {
  if (inherited([](const Kernels& t) { return t.matmul[int(DType::MXFP4)]; })) GTEST_SKIP() << "tested below";
  for (bool unit : {true, false}) {
    for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 4096, 19}, {3, 96, 37}, {6, 2880, 21}, {11, 64, 8}}) {
      Rng rng(uint32_t(M * 7 + K + N));
      const int64_t nb = K / kQBlock;
      std::vector<BlockQ8Act> x(size_t(M * nb));
      for (auto& b : x) {
        b.sum = 0;
        for (auto& q : b.qs) b.sum += (q = int8_t(rng.integer(-127, 127)));
        b.d = unit ? 1.0f : rng.uniform(1e-3f, 2e-2f);
      }
      std::vector<BlockMXFP4> w(size_t(N * nb));
      for (auto& b : w) {
        b.e = unit ? 128 : uint8_t(rng.integer(110, 135));
        for (auto& q : b.qs) q = uint8_t(rng.integer(0, 255));
      }
      std::vector<float> y(size_t(M * N)), yr(size_t(M * N));
      const int64_t xs = nb * int64_t(sizeof(BlockQ8Act)), ws = nb * int64_t(sizeof(BlockMXFP4));
      MatmulArgs a{x.data(), xs, w.data(), ws, y.data(), N * 4, M, K};
      MatmulArgs ar = a;
      ar.y = yr.data();
      k().matmul[int(DType::MXFP4)](a, 0, N);
      r().matmul[int(DType::MXFP4)](ar, 0, N);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const float got = y[size_t(m * N + n)], want = yr[size_t(m * N + n)];
          if (unit) {
            ASSERT_EQ(test::bits(got), test::bits(want)) << "M " << M << " K " << K << " m " << m << " n " << n;
            continue;
          }
          double bound = 0;
          for (int64_t b = 0; b < nb; ++b) {
            const BlockMXFP4& wb = w[size_t(n * nb + b)];
            const BlockQ8Act& xb = x[size_t(m * nb + b)];
            int64_t s = 0;
            for (int i = 0; i < kQBlock; ++i)
              s += std::abs(int(kMxfp4Int8[i < 16 ? wb.qs[i] & 15 : wb.qs[i - 16] >> 4]) * int(xb.qs[i]));
            bound += double(e8m0_half_to_f32(wb.e)) * xb.d * double(s);
          }
          ASSERT_LE(std::fabs(double(got) - want), 1e-5 * bound + 1e-30) << "M " << M << " K " << K << " m " << m;
        }
    }
  }
}

PIPIT_INSTANTIATE_ISA(MatmulMxfp4);

}  // namespace
}  // namespace pipit
