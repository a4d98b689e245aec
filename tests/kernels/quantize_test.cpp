// Quantizers. quantize_act (f32 -> BlockQ8Act) of every ISA level must be bit-identical to ref (scale, sum and
// every int8, including round-half-to-even ties and all-zero blocks). The weight quantizers round-trip within
// stated bounds: q8_0 |x - x'| <= 0.51 d + 127 |d - d16| (d = amax / 127, d16 its f16), q4_0 <= |d| + 8 |d - d16|
// (d = max / -8; the value of largest magnitude is exact up to the f16 scale, the opposite side clamps at +7).
#include <cmath>

#include "backends/cpu/ref/ref.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;
using test::Rows;

class Quantize : public IsaTest {};

void expect_same_blocks(const BlockQ8Act* got, const BlockQ8Act* want, int64_t nb, const std::string& what) {
  for (int64_t b = 0; b < nb; ++b) {
    ASSERT_EQ(test::bits(got[b].d), test::bits(want[b].d)) << what << " block " << b << " scale";
    ASSERT_EQ(got[b].sum, want[b].sum) << what << " block " << b << " sum";
    for (int i = 0; i < kQBlock; ++i) ASSERT_EQ(got[b].qs[i], want[b].qs[i]) << what << " block " << b << " q" << i;
  }
}

TEST_P(Quantize, ActBitExact) {
  uint32_t seed = 1;
  for (int64_t K : {32, 96, 4096})
    for (int64_t M : {1, 2, 3, 5, 8, 17}) {
      Rng rng(seed++);
      Rows x(M, K * 4 + 20);
      for (int64_t m = 0; m < M; ++m) {
        const float mag = std::pow(10.0f, rng.uniform(-6, 4));
        for (int64_t kk = 0; kk < K; ++kk) x.row_as<float>(m)[kk] = rng.uniform(-mag, mag);
      }
      if (K >= 64) {  // a zero block, and a block of exact ties: amax 127 gives d = 1, so v * (1/d) = v
        for (int i = 0; i < kQBlock; ++i) x.row_as<float>(0)[i] = 0.0f;
        float* t = x.row_as<float>(0) + kQBlock;
        for (int i = 0; i < kQBlock; ++i) t[i] = float(i % 2 ? 1 : -1) * (float(i) + 0.5f);
        t[31] = 127.0f;
      }
      const int64_t nb = K / kQBlock;
      std::vector<BlockQ8Act> got(size_t(M * nb)), want(size_t(M * nb));
      k().quantize_act(x.row_as<float>(0), x.stride, got.data(), M, K);
      r().quantize_act(x.row_as<float>(0), x.stride, want.data(), M, K);
      expect_same_blocks(got.data(), want.data(), M * nb, "K " + std::to_string(K) + " M " + std::to_string(M));
    }
}

TEST_P(Quantize, WeightRoundTrip) {
  Rng rng(42);
  for (int64_t n : {32, 64, 4096}) {
    auto v = rng.floats(size_t(n), -2, 2);
    for (int i = 0; i < 8 && i < n; ++i) v[size_t(i)] = 0.0f;  // a partly-zero block
    std::vector<uint8_t> q8(size_t(dtype_row_bytes(DType::Q8_0, n))), q4(size_t(dtype_row_bytes(DType::Q4_0, n)));
    const size_t un = size_t(n);
    std::vector<float> back8(un), back4(un), ref8(un), ref4(un);
    k().from_f32[int(DType::Q8_0)](v.data(), q8.data(), n);
    k().from_f32[int(DType::Q4_0)](v.data(), q4.data(), n);
    k().to_f32[int(DType::Q8_0)](q8.data(), back8.data(), n);
    k().to_f32[int(DType::Q4_0)](q4.data(), back4.data(), n);
    r().to_f32[int(DType::Q8_0)](q8.data(), ref8.data(), n);
    r().to_f32[int(DType::Q4_0)](q4.data(), ref4.data(), n);
    for (int64_t b = 0; b < n / kQBlock; ++b) {
      float amax = 0, mx = 0;
      for (int i = 0; i < kQBlock; ++i) {
        const float x = v[size_t(b * kQBlock + i)];
        if (std::fabs(x) > amax) amax = std::fabs(x), mx = x;
      }
      const double d8 = amax / 127.0, d16_8 = f16_to_f32(reinterpret_cast<BlockQ8_0*>(q8.data())[b].d);
      const double d4 = mx / -8.0, d16_4 = f16_to_f32(reinterpret_cast<BlockQ4_0*>(q4.data())[b].d);
      const double tol8 = 0.51 * d8 + 127 * std::fabs(d8 - d16_8) + 1e-12;
      const double tol4 = std::fabs(d4) + 8 * std::fabs(d4 - d16_4) + 1e-12;
      for (int i = 0; i < kQBlock; ++i) {
        const size_t j = size_t(b * kQBlock + i);
        ASSERT_NEAR(back8[j], v[j], tol8) << "q8_0 element " << j;
        ASSERT_NEAR(back4[j], v[j], tol4) << "q4_0 element " << j;
        ASSERT_EQ(test::bits(back8[j]), test::bits(ref8[j])) << "q8_0 dequant element " << j;
        ASSERT_EQ(test::bits(back4[j]), test::bits(ref4[j])) << "q4_0 dequant element " << j;
      }
    }
    // whole-row RMS error, relative to the row's RMS: q8 ~ 0.3%, q4 ~ 6% for uniform data
    double e8 = 0, e4 = 0, s = 0;
    for (int64_t i = 0; i < n; ++i) {
      e8 += std::pow(back8[size_t(i)] - v[size_t(i)], 2);
      e4 += std::pow(back4[size_t(i)] - v[size_t(i)], 2);
      s += double(v[size_t(i)]) * v[size_t(i)];
    }
    EXPECT_LT(std::sqrt(e8 / s), 0.006) << n;
    EXPECT_LT(std::sqrt(e4 / s), 0.12) << n;
  }
}

PIPIT_INSTANTIATE_ISA(Quantize);

}  // namespace
}  // namespace pipit
