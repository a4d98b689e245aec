// Row movers on the device: embedding lookups (rows of a weight in its device layout, as f32), the rows that want
// logits (gather_rows), and host rows spliced in (copy_rows_: image features over token embeddings).
#include "backends/opencl/cl_device.h"

namespace pipit::opencl {

Tensor OpenclDevice::embedding(Ctx& ctx, const Tensor& table, std::span<const int32_t> ids) {
  const int wt = weight_code(table.dtype());
  PIPIT_ASSERT(wt >= 0 && table.ndim() == 2, "opencl embedding table {}", table.describe());
  const int64_t n_vocab = table.dim(0), n_embd = table.dim(1);
  for (int32_t id : ids)
    PIPIT_ASSERT(id >= 0 && id < n_vocab, "token id {} outside the vocabulary of {}", id, n_vocab);
  Tensor y = ctx.alloc(DType::F32, {int64_t(ids.size()), n_embd});
  Tensor dids = upload_i32(ctx, ids);
  launch("weight_rows", size_t(n_embd), ids.size(), 0, 0, buf(table), wt, int(n_vocab), int(n_embd), buf(dids), 1,
         buf(y));
  return y;
}

Tensor OpenclDevice::gather_rows(Ctx& ctx, const Tensor& x, std::span<const int64_t> rows) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous(), "opencl gather_rows of {}", x.describe());
  const int64_t d = x.dim(-1);
  std::vector<int32_t> r32;
  for (int64_t r : rows) {
    PIPIT_ASSERT(r >= 0 && r < x.rows(), "row {} of {}", r, x.rows());
    r32.push_back(int32_t(r));
  }
  Tensor y = ctx.alloc(DType::F32, {int64_t(rows.size()), d});
  Tensor drows = upload_i32(ctx, r32);
  launch("gather_rows", size_t(d), rows.size(), 0, 0, buf(x), int(x.row_stride() / 4), buf(drows), int(d), buf(y));
  return y;
}

void OpenclDevice::copy_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) {
  PIPIT_ASSERT(int64_t(src_row.size()) == dst.rows() && dst.is_contiguous() && src.dtype() == DType::F32 &&
               src.dim(-1) >= dst.dim(-1), "opencl copy_rows_ {} rows into {} from {}", src_row.size(),
               dst.describe(), src.describe());
  // the rows that move, packed on the host, then one upload and one scatter
  const int64_t d = dst.dim(-1);
  std::vector<float> packed;
  std::vector<int32_t> at;
  for (size_t i = 0; i < src_row.size(); ++i) {
    if (src_row[i] < 0) continue;
    PIPIT_ASSERT(src_row[i] < src.rows(), "source row {} of {}", src_row[i], src.rows());
    const float* r = reinterpret_cast<const float*>(src.row_ptr(src_row[i]));
    packed.insert(packed.end(), r, r + d);
    at.push_back(int32_t(i));
  }
  if (at.empty()) return;
  Tensor dsrc = upload_f32(ctx, packed), dat = upload_i32(ctx, at);
  launch("scatter_rows", size_t(d), at.size(), 0, 0, buf(dsrc), buf(dat), int(d), buf(dst));
}

}  // namespace pipit::opencl
