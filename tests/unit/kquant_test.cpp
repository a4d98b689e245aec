// llama.cpp's block formats (core/dtype.h, backends/cpu/ref/kquant_ref.cpp):
//  - dequantization equals, bit for bit, values computed independently from the format's description
//    (tests/data/make_kquant_fixtures.py: per weight index, plain Python, f32 rounding after every operation);
//  - the reference quantizers (llama.cpp's quantize_row_*_ref) keep the error of each format within its bound on
//    Gaussian rows, pack what they chose (dequantize(quantize(x)) re-quantizes to the same bytes for q8_K), and map
//    all-zero blocks to zeros.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/ref/ref.h"

namespace pipit {
namespace {

struct Fixture {
  std::vector<uint8_t> blocks;
  std::vector<float> values;
};

Fixture read_fixture(const std::string& name, DType t) {
  Fixture f;
  std::ifstream in(std::string(PIPIT_SOURCE_DIR) + "/tests/data/kquant/" + name + ".bin", std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  uint32_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 4);
  f.blocks.resize(size_t(dtype_row_bytes(t, n)));
  f.values.resize(n);
  in.read(reinterpret_cast<char*>(f.blocks.data()), std::streamsize(f.blocks.size()));
  in.read(reinterpret_cast<char*>(f.values.data()), std::streamsize(n * 4));
  EXPECT_TRUE(in.good()) << name;
  return f;
}

uint32_t bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

const DType kAll[] = {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,   DType::Q3_K, DType::Q4_K,
                      DType::Q5_K, DType::Q6_K, DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS};

TEST(KQuant, DequantizationMatchesIndependentValues) {
  for (DType t : kAll) {
    const Fixture f = read_fixture(std::string(dtype_name(t)), t);
    ASSERT_EQ(f.values.size(), 512u) << dtype_name(t);
    for (const Kernels* k : {&ref_kernels(), &kernels()}) {
      ASSERT_NE(k->to_f32[int(t)], nullptr) << dtype_name(t);
      std::vector<float> got(f.values.size(), -1.0f);
      k->to_f32[int(t)](f.blocks.data(), got.data(), int64_t(got.size()));
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(bits(got[i]), bits(f.values[i])) << dtype_name(t) << " " << k->name << " weight " << i << ": "
                                                   << got[i] << " vs " << f.values[i];
    }
  }
}

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 0.02f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Relative RMS error of quantize -> dequantize on Gaussian rows; the bounds are ~1.3x what llama.cpp's formats give
// (4.5 bits ~ 0.09, 5.5 ~ 0.045, 6.56 ~ 0.02 on Gaussian data), so a packing or rounding slip fails them.
TEST(KQuant, QuantizersKeepTheirErrorBound) {
  struct Case {
    DType t;
    double bound;
  };
  for (auto [t, bound] : {Case{DType::Q4_K, 0.12}, Case{DType::Q5_K, 0.06}, Case{DType::Q6_K, 0.03},
                          Case{DType::Q8_K, 0.01}, Case{DType::Q4_1, 0.12}, Case{DType::Q5_0, 0.07},
                          Case{DType::Q5_1, 0.06}}) {
    const int64_t n = 4096;
    const auto x = gaussian(size_t(n), 7 + uint32_t(t));
    std::vector<uint8_t> q(size_t(dtype_row_bytes(t, n)));
    ASSERT_NE(ref_kernels().from_f32[int(t)], nullptr) << dtype_name(t);
    ref_kernels().from_f32[int(t)](x.data(), q.data(), n);
    std::vector<float> y(static_cast<size_t>(n));
    ref_kernels().to_f32[int(t)](q.data(), y.data(), n);
    double e2 = 0, x2 = 0;
    for (int64_t i = 0; i < n; ++i) e2 += double(y[i] - x[i]) * (y[i] - x[i]), x2 += double(x[i]) * x[i];
    const double rel = std::sqrt(e2 / x2);
    EXPECT_LT(rel, bound) << dtype_name(t);
    EXPECT_GT(rel, bound / 20) << dtype_name(t) << ": suspiciously exact";
    // deterministic
    std::vector<uint8_t> q2(q.size());
    ref_kernels().from_f32[int(t)](x.data(), q2.data(), n);
    EXPECT_EQ(q, q2) << dtype_name(t);
    // all zeros -> all-zero values
    std::vector<float> z(size_t(n), 0.0f), zy(size_t(n), 1.0f);
    ref_kernels().from_f32[int(t)](z.data(), q.data(), n);
    ref_kernels().to_f32[int(t)](q.data(), zy.data(), n);
    for (float v : zy) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

// Hand-checkable q6_K and q4_K blocks: a ramp quantizes onto its own grid.
TEST(KQuant, RampBlocksHitTheirGrid) {
  // q6_K: x on a grid of step 1/64; with 8-bit group scales each value comes back within about half a step
  // (1.5x for the scale's own rounding); a wrong bit placement would be off by whole steps.
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[size_t(i)] = float((i * 7) % 64 - 32) / 64.0f;
  std::vector<uint8_t> q(sizeof(BlockQ6_K));
  ref::q6_k_from_f32(x.data(), q.data(), 256);
  std::vector<float> y(256);
  ref::q6_k_to_f32(q.data(), y.data(), 256);
  double maxerr = 0;
  for (int i = 0; i < 256; ++i) maxerr = std::max(maxerr, double(std::fabs(y[size_t(i)] - x[size_t(i)])));
  EXPECT_LT(maxerr, 1.5 / 128) << "q6_K step is 1/64: errors beyond half a step mean a wrong grid";
  // q4_K: 16 levels 0..15 times 1/16 per group, plus a negative min: within half a step (1/32), 1.5x
  for (int i = 0; i < 256; ++i) x[size_t(i)] = float((i * 5) % 16) / 16.0f - 0.25f;
  std::vector<uint8_t> q4(sizeof(BlockQ4_K));
  ref::q4_k_from_f32(x.data(), q4.data(), 256);
  ref::q4_k_to_f32(q4.data(), y.data(), 256);
  maxerr = 0;
  for (int i = 0; i < 256; ++i) maxerr = std::max(maxerr, double(std::fabs(y[size_t(i)] - x[size_t(i)])));
  EXPECT_LT(maxerr, 1.5 / 32);
}

TEST(KQuant, Q8KBlockSumsAndScale) {
  const auto x = gaussian(512, 3, 1.0f);
  std::vector<BlockQ8_K> q(2);
  ref::q8_k_from_f32(x.data(), q.data(), 512);
  for (const auto& b : q) {
    int amax = 0;
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += b.qs[16 * j + i], amax = std::max(amax, std::abs(int(b.qs[16 * j + i])));
      EXPECT_EQ(b.bsums[j], s);
    }
    EXPECT_EQ(amax, 127);  // the largest magnitude maps to 127
  }
}

}  // namespace
}  // namespace pipit
