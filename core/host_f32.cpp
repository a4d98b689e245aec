// Load-time f32 reads of small float weights (see host_f32.h).
#include "core/host_f32.h"

#include <algorithm>

namespace pipit {

namespace {

float element_f32(DType dt, const uint8_t* p) {
  if (dt == DType::F16) return f16_to_f32(*reinterpret_cast<const f16_t*>(p));
  if (dt == DType::BF16) return bf16_to_f32(*reinterpret_cast<const bf16_t*>(p));
  return *reinterpret_cast<const float*>(p);
}

bool float_dtype(DType dt) { return dt == DType::F32 || dt == DType::F16 || dt == DType::BF16; }

// t itself when its bytes are on the host; a host copy of a weight uploaded to a device (contiguous, as uploads are).
Result<Tensor> on_host(const Tensor& t) {
  const auto* d = dynamic_cast<const DeviceStorage*>(t.storage().get());
  if (!d) return t;
  Tensor h = Tensor::empty(t.dtype(), t.shape());
  if (!t.is_contiguous() || !d->read_back(d->offset_of(t.data()), h.data(), size_t(t.nbytes())))
    return Error::unavailable("{}: a device weight that cannot be read back to the host", t.describe());
  return h;
}

}  // namespace

Result<float> host_scalar_f32(const Tensor& t) {
  PIPIT_ASSIGN_OR_RETURN(Tensor h, on_host(t));
  if (h.numel() != 1 || !float_dtype(h.dtype()))
    return Error::invalid_argument("{}: expected one f32, f16 or bf16 value", h.describe());
  return element_f32(h.dtype(), h.data());
}

Result<Tensor> host_f32(const Tensor& dev_or_host, const std::vector<int64_t>& shape) {
  PIPIT_ASSIGN_OR_RETURN(Tensor t, on_host(dev_or_host));
  if (!float_dtype(t.dtype()) || (t.ndim() > 0 && !t.rows_contiguous()))
    return Error::invalid_argument("{}: expected f32, f16 or bf16 weights", t.describe());
  Tensor out = Tensor::empty(DType::F32, shape.empty() ? t.shape() : shape);
  if (out.numel() != t.numel())
    return Error::invalid_argument("{} read as {}: the element counts differ", t.describe(), out.shape_str());
  if (t.numel() == 0) return out;
  const int64_t n = t.ndim() == 0 ? 1 : t.dim(-1), es = dtype_elem_stride(t.dtype());
  float* o = out.ptr<float>();
  for (int64_t r = 0; r < t.rows(); ++r) {
    const uint8_t* row = t.ndim() <= 1 ? t.data() : t.row_ptr(r);
    for (int64_t i = 0; i < n; ++i) o[r * n + i] = element_f32(t.dtype(), row + i * es);
  }
  return out;
}

Tensor host_full_f32(const std::vector<int64_t>& shape, float value) {
  Tensor out = Tensor::empty(DType::F32, shape);
  std::fill(out.ptr<float>(), out.ptr<float>() + out.numel(), value);
  return out;
}

Result<std::vector<float>> host_f32_values(const Tensor& t) {
  PIPIT_ASSIGN_OR_RETURN(Tensor f, host_f32(t));
  return std::vector<float>(f.ptr<float>(), f.ptr<float>() + f.numel());
}

Result<Tensor> host_f32_transposed(const Tensor& t, int64_t rows, int64_t cols) {
  PIPIT_ASSIGN_OR_RETURN(Tensor f, host_f32(t));
  if (rows * cols != f.numel())
    return Error::invalid_argument("{} read as {} x {}: the element counts differ", t.describe(), rows, cols);
  Tensor o = Tensor::empty(DType::F32, {cols, rows});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) o.ptr<float>()[c * rows + r] = f.ptr<float>()[r * cols + c];
  return o;
}

}  // namespace pipit
