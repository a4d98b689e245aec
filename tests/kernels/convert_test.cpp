// Row conversions of every ISA level against ref, bit for bit: f16 / bf16 <-> f32 (incl. zeros, subnormals,
// infinities, round-to-even ties, overflow to inf; NaN only has to stay NaN) at n in {1, 31, 32, 33, 64, 4095}.
#include <cmath>
#include <limits>

#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

class Convert : public IsaTest {};

// Floats that exercise every rounding path of f16 and bf16, then random ones of all magnitudes.
std::vector<float> special_floats(int64_t n, Rng& rng) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 65519.99f, 1e9f, -1e9f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-40f, -1e-45f,
                          1.00048828125f, 1.00146484375f,  // f16 ties: to even below, to even above
                          1.00390625f, 1.01171875f,        // bf16 ties
                          3.4028235e38f, -3.4028235e38f};
  while (int64_t(v.size()) < n) {
    const float mag = std::pow(2.0f, rng.uniform(-30, 20));
    v.push_back(rng.uniform(-mag, mag));
  }
  v.resize(size_t(n));
  return v;
}

TEST_P(Convert, F16AndBf16BitExact) {
  Rng rng(5);
  for (int64_t n : {1, 31, 32, 33, 64, 4095}) {
    auto v = special_floats(n, rng);
    for (DType t : {DType::F16, DType::BF16}) {
      std::vector<uint16_t> h(size_t(n + 1), 0xBEEF), hr(size_t(n + 1), 0xBEEF);
      k().from_f32[int(t)](v.data(), h.data(), n);
      r().from_f32[int(t)](v.data(), hr.data(), n);
      for (int64_t i = 0; i <= n; ++i) ASSERT_EQ(h[size_t(i)], hr[size_t(i)]) << dtype_name(t) << " from f32 n " << n << " value " << v[size_t(i)];
      std::vector<float> f(size_t(n + 1), 7.0f), fr(size_t(n + 1), 7.0f);
      k().to_f32[int(t)](h.data(), f.data(), n);
      r().to_f32[int(t)](h.data(), fr.data(), n);
      for (int64_t i = 0; i <= n; ++i) ASSERT_EQ(test::bits(f[size_t(i)]), test::bits(fr[size_t(i)])) << dtype_name(t) << " to f32 n " << n << " i " << i;
    }
  }
}

TEST_P(Convert, NanStaysNan) {
  std::vector<float> v(33, 1.0f);
  v[3] = std::numeric_limits<float>::quiet_NaN();
  v[31] = -std::numeric_limits<float>::quiet_NaN();
  for (DType t : {DType::F16, DType::BF16}) {
    std::vector<uint16_t> h(33);
    std::vector<float> back(33);
    k().from_f32[int(t)](v.data(), h.data(), 33);
    k().to_f32[int(t)](h.data(), back.data(), 33);
    EXPECT_TRUE(std::isnan(back[3]) && std::isnan(back[31])) << dtype_name(t);
    EXPECT_EQ(back[4], 1.0f);
  }
}

TEST_P(Convert, AllSubnormalF16) {  // every f16 bit pattern converts exactly, and back
  std::vector<uint16_t> h(65536);
  for (int i = 0; i < 65536; ++i) h[size_t(i)] = uint16_t(i);
  std::vector<float> f(65536), fr(65536);
  k().to_f32[int(DType::F16)](h.data(), f.data(), 65536);
  r().to_f32[int(DType::F16)](h.data(), fr.data(), 65536);
  for (int i = 0; i < 65536; ++i) {
    if (std::isnan(fr[size_t(i)])) {
      ASSERT_TRUE(std::isnan(f[size_t(i)]));
      continue;
    }
    ASSERT_EQ(test::bits(f[size_t(i)]), test::bits(fr[size_t(i)])) << "f16 bits " << i;
  }
}

PIPIT_INSTANTIATE_ISA(Convert);

}  // namespace
}  // namespace pipit
