// Load-time f32 copies of small float weights (core/host_f32.h).
#include "core/host_f32.h"

#include <algorithm>

namespace pipit {

Result<std::vector<float>> host_f32_values(const Tensor& t) {
  if (!t.is_contiguous())
    return Error::invalid_argument("[load] a strided {} where a contiguous float tensor was expected", t.describe());
  const int64_t n = t.numel();
  std::vector<float> v(static_cast<size_t>(n));
  switch (t.dtype()) {
    case DType::F32: std::copy_n(t.ptr<float>(), n, v.data()); break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) v[size_t(i)] = f16_to_f32(reinterpret_cast<const f16_t*>(t.data())[i]);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) v[size_t(i)] = bf16_to_f32(reinterpret_cast<const bf16_t*>(t.data())[i]);
      break;
    default:
      return Error::invalid_argument("[load] a {} tensor {} where f32, f16 or bf16 was expected (re-convert it)",
                                     dtype_name(t.dtype()), t.shape_str());
  }
  return v;
}

Result<Tensor> host_f32_tensor(const Tensor& t, const std::vector<int64_t>& shape) {
  PIPIT_ASSIGN_OR_RETURN(std::vector<float> v, host_f32_values(t));
  Tensor o = Tensor::empty(DType::F32, shape);
  PIPIT_ASSERT(o.numel() == int64_t(v.size()), "host_f32_tensor {} as {}", t.describe(), o.shape_str());
  std::copy(v.begin(), v.end(), o.ptr<float>());
  return o;
}

Result<Tensor> host_f32_transposed(const Tensor& t, int64_t rows, int64_t cols) {
  PIPIT_ASSIGN_OR_RETURN(std::vector<float> v, host_f32_values(t));
  PIPIT_ASSERT(rows * cols == int64_t(v.size()), "host_f32_transposed {} as {} x {}", t.describe(), rows, cols);
  Tensor o = Tensor::empty(DType::F32, {cols, rows});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) o.ptr<float>()[c * rows + r] = v[size_t(r * cols + c)];
  return o;
}

Tensor host_f32_full(const std::vector<int64_t>& shape, float value) {
  Tensor o = Tensor::empty(DType::F32, shape);
  std::fill_n(o.ptr<float>(), o.numel(), value);
  return o;
}

}  // namespace pipit
