// core/host_f32.h: load-time f32 reads of small float weights, exact for f32, f16 and bf16, an error for anything
// else (a quantized file's tensor that should have stayed float), never a crash.
#include <gtest/gtest.h>

#include "core/host_f32.h"

namespace pipit {
namespace {

TEST(HostF32, ScalarsAndVectorsOfEveryFloatDtype) {
  const float vals[5] = {1.5f, -0.25f, 3.0f, 1e-3f, -65504.0f};
  Tensor f32 = Tensor::empty(DType::F32, {5}), f16 = Tensor::empty(DType::F16, {5}), bf = Tensor::empty(DType::BF16, {5});
  for (int i = 0; i < 5; ++i) {
    f32.ptr<float>()[i] = vals[i];
    f16.ptr<f16_t>()[i] = f32_to_f16(vals[i]);
    bf.ptr<bf16_t>()[i] = f32_to_bf16(vals[i]);
  }
  for (const Tensor& t : {f32, f16, bf}) {
    auto h = host_f32(t, {1, 5});
    ASSERT_TRUE(h.is_ok()) << h.status().message();
    EXPECT_EQ(h->shape(), (std::vector<int64_t>{1, 5}));
    for (int i = 0; i < 5; ++i) {
      const float want = t.dtype() == DType::F16 ? f16_to_f32(f16.ptr<f16_t>()[i])
                         : t.dtype() == DType::BF16 ? bf16_to_f32(bf.ptr<bf16_t>()[i]) : vals[i];
      EXPECT_EQ(h->ptr<float>()[i], want) << dtype_name(t.dtype()) << " " << i;
    }
    auto s = host_scalar_f32(t.slice(0, 2, 3));
    ASSERT_TRUE(s.is_ok());
    EXPECT_EQ(*s, 3.0f);
  }
  // a strided view: rows of a [3, 4] tensor's column slice
  Tensor m = Tensor::empty(DType::F32, {3, 4});
  for (int i = 0; i < 12; ++i) m.ptr<float>()[i] = float(i);
  auto c = host_f32(m.slice(1, 1, 3));
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->shape(), (std::vector<int64_t>{3, 2}));
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 2; ++j) EXPECT_EQ(c->ptr<float>()[r * 2 + j], float(r * 4 + 1 + j));
  Tensor ones = host_full_f32({2, 3}, 1.0f);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ones.ptr<float>()[i], 1.0f);
}

TEST(HostF32, WrongDtypeOrCountIsAnError) {
  Tensor q = Tensor::empty(DType::Q8_0, {1, 32});
  EXPECT_FALSE(host_f32(q).is_ok());
  EXPECT_FALSE(host_scalar_f32(q).is_ok());
  EXPECT_FALSE(host_scalar_f32(Tensor::empty(DType::F32, {2})).is_ok());
  EXPECT_FALSE(host_f32(Tensor::empty(DType::F32, {2, 3}), {4}).is_ok());
}

}  // namespace
}  // namespace pipit
