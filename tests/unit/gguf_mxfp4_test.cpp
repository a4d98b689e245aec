// GGUF MXFP4 tensors (ggml type 39, block_mxfp4: 1 exponent byte + 16 nibble bytes) are pipit's mxfp4 bytes: they
// are used in place, no conversion, and dequantize to ggml's values (element j low nibble, j + 16 high nibble,
// doubled E2M1 x 2^(e - 128)).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/ref/ref.h"
#include "format/gguf.h"
#include "tests/unit/gguf_test_writer.h"

namespace pipit {
namespace {

TEST(GgufMxfp4, TensorsAreUsedInPlace) {
  std::vector<float> w(3 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i) * 0.37f) * float(1 + i % 7);
  std::string bytes(size_t(3 * dtype_row_bytes(DType::MXFP4, 64)), '\0');
  ref::mxfp4_from_f32(w.data(), bytes.data(), int64_t(w.size()));
  test::GgufWriter g;
  g.str("general.architecture", "llama");
  g.tensor("blk.0.ffn_down.weight", kGgmlMXFP4, {64, 3}, bytes);
  const std::string file = g.bytes();
  auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(file.data()), file.size(), nullptr, "mxfp4.gguf");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  auto t = f->tensor(f->tensors()[0]);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::MXFP4);
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{3, 64}));
  ASSERT_EQ(t->nbytes(), bytes.size());
  EXPECT_EQ(std::memcmp(t->data(), bytes.data(), bytes.size()), 0);
  // ggml's dequantization, written out: kvalues_mxfp4 (doubled E2M1) x E8M0_TO_FP32_HALF(e)
  const int8_t kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  std::vector<float> got(w.size());
  ref::mxfp4_to_f32(t->data(), got.data(), int64_t(w.size()));
  for (size_t b = 0; b < w.size() / 32; ++b) {
    const uint8_t* blk = reinterpret_cast<const uint8_t*>(bytes.data()) + b * 17;
    const float d = std::ldexp(1.0f, int(blk[0]) - 128);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(got[b * 32 + size_t(j)], float(kvalues[blk[1 + j] & 15]) * d);
      EXPECT_EQ(got[b * 32 + size_t(j) + 16], float(kvalues[blk[1 + j] >> 4]) * d);
    }
  }
  // and the quantizer's error: amax / 2^(e - 127) lands in [4, 8), so values above 6 units saturate (up to 2 units
  // off), everything else is within half a step (<= 1 unit)
  for (size_t i = 0; i < w.size(); ++i) {
    const uint8_t e = reinterpret_cast<const uint8_t*>(bytes.data())[i / 32 * 17];
    EXPECT_LE(std::fabs(got[i] - w[i]), std::ldexp(1.0f, int(e) - 126)) << i;
  }
}

}  // namespace
}  // namespace pipit
