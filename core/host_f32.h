// Load-time reads of small float weights on the host (clip bounds, per-channel scales, depthwise filters, constant
// vectors), without a kernel table: f32, f16 and bf16 read exactly as f32. Not for activations: a forward pass
// touches tensor data only through the ops of backends/ops.h.
#pragma once

#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace pipit {

// The value of a one-element tensor (any shape with numel 1) of dtype f32, f16 or bf16.
Result<float> host_scalar_f32(const Tensor& t);
// A contiguous f32 heap copy of t (f32, f16 or bf16, any strides with a contiguous last dim), in `shape` when given
// (same number of elements).
Result<Tensor> host_f32(const Tensor& t, const std::vector<int64_t>& shape = {});
// An f32 heap tensor with every element `value` (weightless norms: ones).
Tensor host_full_f32(const std::vector<int64_t>& shape, float value);
// t's values as a vector (attention sinks, per-expert scales), as host_f32 reads them.
Result<std::vector<float>> host_f32_values(const Tensor& t);
// An f32 [cols, rows] heap tensor: the transpose of t read as [rows, cols] (a [C, K] conv kernel stored tap-major).
Result<Tensor> host_f32_transposed(const Tensor& t, int64_t rows, int64_t cols);

}  // namespace pipit
