// Tensor: shared storage + a view (dtype, shape, strides, data pointer). Slicing, transposing and reshaping make new
// views of the same bytes and never copy.
//
// Conventions used everywhere in pipit:
//  - shape is outermost-first (PyTorch order): a weight of nn.Linear(in, out) is [out, in]; activations are
//    [n_tokens, n_embd]. The innermost dimension is the one that is contiguous in memory.
//  - strides are in bytes. For quantized dtypes the innermost dimension must be contiguous (whole blocks) and
//    stride[ndim-1] is the element size of the block type divided by its elements (not used for addressing).
//  - dimension names: n_tokens (positions in a batch), n_embd (hidden size), n_head / n_head_kv (query / key-value
//    heads), head_dim, n_ff (MLP hidden), n_vocab, n_ctx (KV cache length).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/storage.h"

namespace pipit {

constexpr int kMaxDims = 5;  // 5: Conv3d weights (Qwen2-VL patch embed [embed, 3, 2, 14, 14])

class Tensor {
 public:
  Tensor() = default;

  // Owned, zero-initialised heap tensor.
  static Tensor empty(DType dtype, std::initializer_list<int64_t> shape) {
    return empty(dtype, std::vector<int64_t>(shape));
  }
  static Tensor empty(DType dtype, const std::vector<int64_t>& shape);
  // A contiguous view over bytes owned by `owner` (may be null for borrowed memory).
  static Tensor from_data(DType dtype, const std::vector<int64_t>& shape, void* data, std::shared_ptr<Storage> owner);
  // Activation from an arena: valid until the arena's next reset().
  static Tensor arena(Arena& arena, DType dtype, const std::vector<int64_t>& shape);

  bool defined() const { return data_ != nullptr || ndim_ > 0; }
  DType dtype() const { return dtype_; }
  int ndim() const { return ndim_; }
  int64_t dim(int i) const { return shape_[i < 0 ? ndim_ + i : i]; }
  int64_t stride(int i) const { return stride_[i < 0 ? ndim_ + i : i]; }
  std::vector<int64_t> shape() const { return {shape_.begin(), shape_.begin() + ndim_}; }
  int64_t numel() const;
  int64_t rows() const { return ndim_ <= 1 ? 1 : numel() / dim(-1); }  // all dims but the last, flattened
  size_t nbytes() const;  // bytes of the elements (contiguous size)
  bool is_contiguous() const;
  bool rows_contiguous() const;  // innermost dim contiguous (rows may be strided)
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  uint8_t* data() const { return data_; }
  template <class T>
  T* ptr() const { return reinterpret_cast<T*>(data_); }
  // Pointer to row r when the tensor is viewed as [rows(), dim(-1)] (requires all dims but the last to collapse).
  uint8_t* row_ptr(int64_t r) const;
  int64_t row_stride() const;  // bytes between consecutive rows of the [rows(), dim(-1)] view

  // ---- views (no copies) ----
  Tensor reshape(const std::vector<int64_t>& shape) const;  // requires contiguous
  Tensor slice(int dim, int64_t begin, int64_t end) const;  // [begin, end) along dim
  Tensor select(int dim, int64_t index) const;              // drops dim
  Tensor transpose(int d0, int d1) const;

  std::string shape_str() const;  // "[2, 3]"
  std::string describe() const;   // "f32 [2, 3]"

 private:
  std::shared_ptr<Storage> storage_;
  uint8_t* data_ = nullptr;
  DType dtype_ = DType::F32;
  int ndim_ = 0;
  std::array<int64_t, kMaxDims> shape_{};
  std::array<int64_t, kMaxDims> stride_{};
  void set_contiguous_strides();
};

// Element bytes for strides of plain types; quantized types use block bytes / block elems (only meaningful per row).
int64_t dtype_elem_stride(DType t);
std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace pipit
