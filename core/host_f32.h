// Small weights prepared once at load, on the host: the values of a float tensor (a norm vector, attention sinks,
// per-expert scales, a conv kernel) as f32. Models use this instead of the CPU's kernel table (backends/cpu is not
// theirs to call); activations go through the ops of backends/ops.h.
#pragma once

#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace pipit {

// The values of a contiguous f32 / f16 / bf16 tensor as f32 (exact: every value of those dtypes is a float).
// Another dtype is an error naming it (the converter keeps 1-D and non-matrix tensors in a float dtype).
Result<std::vector<float>> host_f32_values(const Tensor& t);
// The same as an owned f32 tensor of `shape` (same element count).
Result<Tensor> host_f32_tensor(const Tensor& t, const std::vector<int64_t>& shape);
// An owned f32 [cols, rows] tensor: the transpose of t read as [rows, cols] (a [C, K] conv kernel stored tap-major).
Result<Tensor> host_f32_transposed(const Tensor& t, int64_t rows, int64_t cols);
// An owned f32 tensor of `shape` with every element `value` (the weight of a weightless norm).
Tensor host_f32_full(const std::vector<int64_t>& shape, float value);

}  // namespace pipit
