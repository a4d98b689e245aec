// store_kv and attention over the device KV cache (f32 or f16 rows): scores, row softmax (with GPT-OSS's sinks,
// each head's sink logit joins it), weighted values (kernels/attention.cl). The score matrix [n_tokens * n_head,
// span] comes from the arena; span is the range of key positions the chunk's queries see (a decode step: its
// context; a prefill chunk: up to its last position).
#include <algorithm>
#include <climits>

#include "backends/opencl/cl_device.h"

namespace pipit::opencl {

namespace {
const char* kv_suffix(DType t) {
  PIPIT_ASSERT(t == DType::F32 || t == DType::F16, "opencl KV cache of {} (f32 or f16 only)", dtype_name(t));
  return t == DType::F16 ? ".f16" : ".f32";
}
}  // namespace

void OpenclDevice::store_kv(Ctx& ctx, const Tensor& src, Tensor& dst, std::span<const int32_t> pos, bool ring) {
  PIPIT_ASSERT(src.ndim() == 3 && dst.ndim() == 3 && src.dim(1) == dst.dim(1) && src.dim(2) == dst.dim(2) &&
               src.is_contiguous() && dst.is_contiguous());
  const int64_t row = src.dim(1) * src.dim(2), n_rows = dst.dim(0);
  for (int32_t p : pos)
    PIPIT_ASSERT(p >= 0 && (ring || p < n_rows), "position {} outside the KV cache of {}", p, n_rows);
  Tensor dpos = upload_i32(ctx, pos);
  const std::string kn = std::string("store_kv") + kv_suffix(dst.dtype());
  launch(kn.c_str(), size_t(row), pos.size(), 0, 0, buf(src), buf(dst), buf(dpos), int(row), int(n_rows));
}

void OpenclDevice::attention(Ctx& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             std::span<const int32_t> pos, const AttnParams& p, Tensor& out) {
  PIPIT_ASSERT(q.ndim() == 3 && q.is_contiguous() && k_cache.ndim() == 3 && k_cache.dtype() == v_cache.dtype() &&
               k_cache.is_contiguous() && v_cache.is_contiguous() && out.is_contiguous() && out.shape() == q.shape());
  const int64_t n_tokens = q.dim(0), n_head = q.dim(1), hd = q.dim(2), n_head_kv = k_cache.dim(1);
  PIPIT_ASSERT(k_cache.dim(2) == hd && n_head % n_head_kv == 0 && int64_t(pos.size()) == n_tokens);
  if (n_tokens == 0) return;
  const int64_t n_rows = k_cache.dim(0);
  PIPIT_ASSERT(!p.ring || (p.window > 0 && p.window <= n_rows), "ring of {} rows for window {}", n_rows, p.window);
  int32_t lo = INT32_MAX, hi = 0;  // the key positions any query of the chunk sees: [lo, hi]
  for (int32_t x : pos) {
    hi = std::max(hi, x);
    lo = std::min(lo, p.window > 0 ? std::max(0, x - p.window + 1) : 0);
  }
  PIPIT_ASSERT(!p.ring || int64_t(hi) - lo < n_rows, "chunk {}..{} overflows a ring of {} rows", lo, hi, n_rows);
  const int64_t span = int64_t(hi) - lo + 1, n_q = n_tokens * n_head;
  Tensor scores = ctx.alloc(DType::F32, {n_q, span});
  Tensor dpos = upload_i32(ctx, pos);
  const int group = int(n_head / n_head_kv), kv_row = int(n_head_kv * hd), ring = p.ring ? int(n_rows) : 0;
  const char* sfx = kv_suffix(k_cache.dtype());
  launch((std::string("attn_scores") + sfx).c_str(), size_t(span), size_t(n_q), 0, 0, buf(q), buf(k_cache),
         buf(dpos), buf(scores), int(n_head), group, int(hd), kv_row, int(lo), int(span), p.window, ring, p.scale,
         p.softcap);
  if (p.sinks) {  // GPT-OSS: host values, [n_head]
    Tensor dsinks = upload_f32(ctx, std::span<const float>(p.sinks, size_t(n_head)));
    softmax_rows_sinks(*this, scores, dsinks, n_head);
  } else {
    softmax_(ctx, scores);
  }
  launch((std::string("attn_values") + sfx).c_str(), size_t(hd), size_t(n_q), 0, 0, buf(scores), buf(v_cache),
         buf(dpos), buf(out), int(n_head), group, int(hd), kv_row, int(lo), int(span), p.window, ring);
}

}  // namespace pipit::opencl
