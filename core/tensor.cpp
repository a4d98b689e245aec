// Tensor views.
#include "core/tensor.h"

#include <sstream>

namespace pipit {

int64_t dtype_elem_stride(DType t) {
  const auto& i = dtype_info(t);
  return i.block_elems == 1 ? i.block_bytes : 0;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

void Tensor::set_contiguous_strides() {
  if (ndim_ == 0) return;
  stride_[ndim_ - 1] = dtype_elem_stride(dtype_);
  int64_t s = dtype_row_bytes(dtype_, shape_[ndim_ - 1]);
  for (int i = ndim_ - 2; i >= 0; --i) {
    stride_[i] = s;
    s *= shape_[i];
  }
}

Tensor Tensor::empty(DType dtype, const std::vector<int64_t>& shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.ndim_ = int(shape.size());
  PIPIT_ASSERT(t.ndim_ <= kMaxDims);
  for (int i = 0; i < t.ndim_; ++i) t.shape_[i] = shape[i];
  t.set_contiguous_strides();
  auto st = HeapStorage::make(t.nbytes());
  t.data_ = st->data();
  t.storage_ = std::move(st);
  return t;
}

Tensor Tensor::from_data(DType dtype, const std::vector<int64_t>& shape, void* data, std::shared_ptr<Storage> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.ndim_ = int(shape.size());
  PIPIT_ASSERT(t.ndim_ <= kMaxDims);
  for (int i = 0; i < t.ndim_; ++i) t.shape_[i] = shape[i];
  t.set_contiguous_strides();
  t.data_ = static_cast<uint8_t*>(data);
  t.storage_ = std::move(owner);
  return t;
}

Tensor Tensor::arena(Arena& arena, DType dtype, const std::vector<int64_t>& shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.ndim_ = int(shape.size());
  PIPIT_ASSERT(t.ndim_ <= kMaxDims);
  for (int i = 0; i < t.ndim_; ++i) t.shape_[i] = shape[i];
  t.set_contiguous_strides();
  t.data_ = arena.alloc(t.nbytes(), &t.storage_);
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= shape_[i];
  return n;
}

size_t Tensor::nbytes() const {
  if (ndim_ == 0 || shape_[ndim_ - 1] == 0) return 0;  // a file may hold an empty tensor ([3, 0])
  return size_t(dtype_row_bytes(dtype_, shape_[ndim_ - 1]) * (numel() / shape_[ndim_ - 1]));
}

bool Tensor::is_contiguous() const {
  if (ndim_ == 0) return true;
  if (!dtype_is_quantized(dtype_) && stride_[ndim_ - 1] != dtype_elem_stride(dtype_)) return false;
  int64_t s = dtype_row_bytes(dtype_, shape_[ndim_ - 1]);
  for (int i = ndim_ - 2; i >= 0; --i) {
    if (shape_[i] != 1 && stride_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

bool Tensor::rows_contiguous() const {
  if (ndim_ == 0) return true;
  if (!dtype_is_quantized(dtype_) && stride_[ndim_ - 1] != dtype_elem_stride(dtype_)) return false;
  // all outer dims must collapse into one row index with a single stride
  for (int i = ndim_ - 3; i >= 0; --i) {
    if (shape_[i] != 1 && stride_[i] != stride_[i + 1] * shape_[i + 1]) return false;
  }
  return true;
}

int64_t Tensor::row_stride() const {
  if (ndim_ <= 1) return dtype_row_bytes(dtype_, ndim_ ? shape_[0] : 1);
  return stride_[ndim_ - 2];
}

uint8_t* Tensor::row_ptr(int64_t r) const { return data_ + r * row_stride(); }

Tensor Tensor::reshape(const std::vector<int64_t>& shape) const {
  PIPIT_ASSERT(is_contiguous(), "reshape of a non-contiguous view {}", describe());
  int64_t n = 1;
  for (auto d : shape) n *= d;
  PIPIT_ASSERT(n == numel(), "reshape {} -> {}", shape_str(), shape_to_string(shape));
  Tensor t = *this;
  t.ndim_ = int(shape.size());
  PIPIT_ASSERT(t.ndim_ <= kMaxDims);
  for (int i = 0; i < t.ndim_; ++i) t.shape_[i] = shape[i];
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::slice(int dim, int64_t begin, int64_t end) const {
  if (dim < 0) dim += ndim_;
  PIPIT_ASSERT(dim >= 0 && dim < ndim_ && begin >= 0 && begin <= end && end <= shape_[dim]);
  Tensor t = *this;
  if (dim == ndim_ - 1) {
    const auto& info = dtype_info(dtype_);
    PIPIT_ASSERT(begin % info.block_elems == 0, "slice of a quantized row at {}", begin);
    t.data_ += begin / info.block_elems * info.block_bytes;
  } else {
    t.data_ += begin * stride_[dim];
  }
  t.shape_[dim] = end - begin;
  return t;
}

Tensor Tensor::select(int dim, int64_t index) const {
  if (dim < 0) dim += ndim_;
  Tensor t = slice(dim, index, index + 1);
  for (int i = dim; i < ndim_ - 1; ++i) {
    t.shape_[i] = t.shape_[i + 1];
    t.stride_[i] = t.stride_[i + 1];
  }
  t.ndim_--;
  return t;
}

Tensor Tensor::transpose(int d0, int d1) const {
  if (d0 < 0) d0 += ndim_;
  if (d1 < 0) d1 += ndim_;
  PIPIT_ASSERT(!dtype_is_quantized(dtype_) || (d0 != ndim_ - 1 && d1 != ndim_ - 1), "transpose of quantized rows");
  Tensor t = *this;
  std::swap(t.shape_[d0], t.shape_[d1]);
  std::swap(t.stride_[d0], t.stride_[d1]);
  return t;
}

std::string Tensor::shape_str() const { return shape_to_string(shape()); }
std::string Tensor::describe() const { return std::string(dtype_name(dtype_)) + " " + shape_str(); }

}  // namespace pipit
