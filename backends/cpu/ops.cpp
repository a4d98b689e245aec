// Eager ops: shape checks, output allocation from the arena, and the split of work across threads.
// Matmuls split the weight's output rows (N) so each thread streams distinct weight bytes — what decode needs.
#include "backends/cpu/ops.h"

#include <climits>
#include <cmath>

namespace pipit {

namespace {

const float* frow(const Tensor& t, int64_t r) { return reinterpret_cast<const float*>(t.row_ptr(r)); }
float* frow_mut(Tensor& t, int64_t r) { return reinterpret_cast<float*>(t.row_ptr(r)); }

// A float vector (norm weight, bias) as f32; converts bf16/f16 into the arena when needed.
const float* as_f32(Ctx& ctx, const Tensor& t) {
  if (t.dtype() == DType::F32 && t.is_contiguous()) return t.ptr<float>();
  Tensor o = to_f32(ctx, t);
  return o.ptr<float>();
}

}  // namespace

Tensor to_f32(Ctx& ctx, const Tensor& x) {
  Tensor y = ctx.alloc(DType::F32, x.shape());
  const int64_t n = x.dim(-1), rows = x.rows();
  PIPIT_ASSERT(x.rows_contiguous(), "to_f32 of {}", x.describe());
  auto conv = ctx.k->to_f32[int(x.dtype())];
  PIPIT_ASSERT(conv, "no to_f32 kernel for {}", dtype_name(x.dtype()));
  for (int64_t r = 0; r < rows; ++r) conv(x.row_ptr(r), frow_mut(y, r), n);
  return y;
}

Tensor linear(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& bias) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.ndim() == 2 && w.ndim() == 2 && x.dim(1) == w.dim(1),
               "linear x {} w {}", x.describe(), w.describe());
  PIPIT_ASSERT(w.rows_contiguous() && x.rows_contiguous());
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  Tensor y = ctx.alloc(DType::F32, {M, N});
  MatmulArgs a{x.data(), x.row_stride(), w.data(), w.row_stride(), y.ptr<float>(), y.row_stride(), M, K};
  if (dtype_is_quantized(w.dtype())) {
    // quantize activations once (int8 per block of 32), shared by all threads
    PIPIT_ASSERT(K % kQBlock == 0);
    Tensor xq = ctx.alloc(DType::I8, {M, K / kQBlock * int64_t(sizeof(BlockQ8Act))});
    auto* q = xq.ptr<BlockQ8Act>();
    ctx.pool->parallel_for(M, [&](int64_t m0, int64_t m1) {
      ctx.k->quantize_act(frow(x, m0), x.row_stride(), q + m0 * (K / kQBlock), m1 - m0, K);
    });
    a.x = q;
    a.x_stride = K / kQBlock * int64_t(sizeof(BlockQ8Act));
  }
  MatmulFn fn = ctx.k->matmul[int(w.dtype())];
  PIPIT_ASSERT(fn, "no matmul kernel for {}", dtype_name(w.dtype()));
  // chunks of 16 rows keep SIMD kernels on full tiles; at least 64 rows per thread so tiny layers stay serial
  ctx.pool->parallel_for((N + 15) / 16, [&](int64_t b0, int64_t b1) { fn(a, b0 * 16, std::min(N, b1 * 16)); },
                         (M * K * 16 >= 8192) ? 1 : 64);
  if (bias.defined()) {
    PIPIT_ASSERT(bias.numel() == N, "bias {} for {} outputs", bias.describe(), N);
    const float* b = as_f32(ctx, bias);
    for (int64_t m = 0; m < M; ++m) ctx.k->add(frow(y, m), b, frow_mut(y, m), N);
  }
  return y;
}

Tensor embedding(Ctx& ctx, const Tensor& table, std::span<const int32_t> ids) {
  const int64_t n_embd = table.dim(1), n_vocab = table.dim(0);
  Tensor y = ctx.alloc(DType::F32, {int64_t(ids.size()), n_embd});
  auto conv = ctx.k->to_f32[int(table.dtype())];
  for (size_t i = 0; i < ids.size(); ++i) {
    PIPIT_ASSERT(ids[i] >= 0 && ids[i] < n_vocab, "token id {} outside the vocabulary of {}", ids[i], n_vocab);
    conv(table.row_ptr(ids[i]), frow_mut(y, int64_t(i)), n_embd);
  }
  return y;
}

Tensor rms_norm(Ctx& ctx, const Tensor& x, const Tensor& w, float eps, float w_offset) {
  const int64_t n = x.dim(-1), rows = x.rows();
  PIPIT_ASSERT(w.numel() == n, "rms_norm weight {} for rows of {}", w.describe(), n);
  const float* wf = as_f32(ctx, w);
  Tensor y = ctx.alloc(DType::F32, x.shape());
  ctx.pool->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ctx.k->rms_norm(frow(x, r), wf, frow_mut(y, r), n, eps, w_offset);
  }, 16);
  return y;
}

void rms_norm_heads_(Ctx& ctx, Tensor& x, const Tensor& w, float eps, float w_offset) {
  PIPIT_ASSERT(x.ndim() == 3 && x.is_contiguous());
  const int64_t hd = x.dim(2), rows = x.dim(0) * x.dim(1);
  PIPIT_ASSERT(w.numel() == hd, "head norm weight {} for head_dim {}", w.describe(), hd);
  const float* wf = as_f32(ctx, w);
  float* p = x.ptr<float>();
  for (int64_t r = 0; r < rows; ++r) ctx.k->rms_norm(p + r * hd, wf, p + r * hd, hd, eps, w_offset);
}

namespace {
template <class Fn>
Tensor gated(Ctx& ctx, const Tensor& gate, const Tensor& up, Fn fn) {
  PIPIT_ASSERT(gate.shape() == up.shape(), "gate {} up {}", gate.describe(), up.describe());
  Tensor y = ctx.alloc(DType::F32, gate.shape());
  const int64_t n = gate.dim(-1);
  ctx.pool->parallel_for(gate.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(frow(gate, r), frow(up, r), frow_mut(y, r), n);
  }, 4);
  return y;
}
}  // namespace

Tensor swiglu(Ctx& ctx, const Tensor& gate, const Tensor& up) { return gated(ctx, gate, up, ctx.k->swiglu); }
Tensor geglu(Ctx& ctx, const Tensor& gate, const Tensor& up) { return gated(ctx, gate, up, ctx.k->geglu); }

void add_(Ctx& ctx, Tensor& x, const Tensor& y) {
  PIPIT_ASSERT(x.shape() == y.shape(), "add {} {}", x.describe(), y.describe());
  const int64_t n = x.dim(-1);
  for (int64_t r = 0; r < x.rows(); ++r) ctx.k->add(frow(x, r), frow(y, r), frow_mut(x, r), n);
}

void scale_(Ctx& ctx, Tensor& x, float s) {
  for (int64_t r = 0; r < x.rows(); ++r) ctx.k->scale(frow_mut(x, r), s, x.dim(-1));
}

void rope_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const float> inv_freq, float mscale) {
  PIPIT_ASSERT(x.ndim() == 3 && x.is_contiguous() && int64_t(pos.size()) == x.dim(0));
  const int64_t n_head = x.dim(1), hd = x.dim(2), half = int64_t(inv_freq.size());
  PIPIT_ASSERT(2 * half <= hd);
  float* p = x.ptr<float>();
  // cos/sin per (token, i) in float32 as HF does: freqs = pos * inv_freq; emb = cat(freqs, freqs)
  Tensor cs = ctx.alloc(DType::F32, {int64_t(pos.size()), 2 * half});
  for (size_t t = 0; t < pos.size(); ++t) {
    float* c = cs.ptr<float>() + t * 2 * half;
    for (int64_t i = 0; i < half; ++i) {
      const float f = float(pos[t]) * inv_freq[i];
      c[i] = std::cos(f) * mscale;
      c[half + i] = std::sin(f) * mscale;
    }
  }
  for (size_t t = 0; t < pos.size(); ++t) {
    const float* c = cs.ptr<float>() + t * 2 * half;
    for (int64_t h = 0; h < n_head; ++h) {
      float* v = p + (int64_t(t) * n_head + h) * hd;
      for (int64_t i = 0; i < half; ++i) {  // rotate_half: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)
        const float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c[i] - x2 * c[half + i];
        v[i + half] = x2 * c[i] + x1 * c[half + i];
      }
    }
  }
}

void store_kv(Ctx& ctx, const Tensor& src, Tensor& dst, std::span<const int32_t> pos, bool ring) {
  PIPIT_ASSERT(src.ndim() == 3 && dst.ndim() == 3 && src.dim(1) == dst.dim(1) && src.dim(2) == dst.dim(2));
  const int64_t row = src.dim(1) * src.dim(2), n_rows = dst.dim(0);
  auto conv = ctx.k->from_f32[int(dst.dtype())];
  for (size_t t = 0; t < pos.size(); ++t) {
    PIPIT_ASSERT(pos[t] >= 0 && (ring || pos[t] < n_rows), "position {} outside the KV cache of {}", pos[t], n_rows);
    conv(src.ptr<float>() + int64_t(t) * row, dst.data() + (pos[t] % n_rows) * dst.stride(0), row);
  }
}

void attention(Ctx& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> pos,
               const AttnParams& p, Tensor& out) {
  PIPIT_ASSERT(q.ndim() == 3 && q.is_contiguous() && k_cache.ndim() == 3 && k_cache.dtype() == v_cache.dtype());
  const int64_t n_tokens = q.dim(0), n_head = q.dim(1), hd = q.dim(2), n_head_kv = k_cache.dim(1);
  PIPIT_ASSERT(k_cache.dim(2) == hd && n_head % n_head_kv == 0);
  const int64_t group = n_head / n_head_kv, n_rows = k_cache.dim(0);
  PIPIT_ASSERT(out.shape() == q.shape() && out.is_contiguous());
  PIPIT_ASSERT(!p.ring || (p.window > 0 && p.window <= n_rows), "ring of {} rows for window {}", n_rows, p.window);
  int32_t min_pos = INT32_MAX, max_pos = 0;
  for (auto x : pos) min_pos = std::min(min_pos, x), max_pos = std::max(max_pos, x);
  // a ring must not have overwritten what the chunk's earliest query sees
  PIPIT_ASSERT(!p.ring || pos.empty() || int64_t(max_pos) - std::max(0, min_pos - p.window + 1) < n_rows,
               "chunk of positions {}..{} overflows a ring of {} rows (window {})", min_pos, max_pos, n_rows, p.window);
  const int64_t max_keys = p.window > 0 ? std::min<int64_t>(max_pos + 1, p.window) : max_pos + 1;
  const int nth = ctx.pool->size();
  Tensor scratch = ctx.alloc(DType::F32, {nth, max_keys});
  auto fn = ctx.k->attn_row[int(k_cache.dtype())];
  const int64_t esz = dtype_elem_stride(k_cache.dtype());
  const int64_t total = n_tokens * n_head;
  auto job = [&](int ith, int nt) {
    for (int64_t i = total * ith / nt; i < total * (ith + 1) / nt; ++i) {
      const int64_t t = i / n_head, h = i % n_head, kvh = h / group;
      AttnRowArgs a;
      a.q = q.ptr<float>() + i * hd;
      a.k = k_cache.data() + kvh * hd * esz;
      a.v = v_cache.data() + kvh * hd * esz;
      a.kv_stride = k_cache.stride(0);
      a.out = out.ptr<float>() + i * hd;
      a.scratch = scratch.ptr<float>() + int64_t(ith) * max_keys;
      a.head_dim = hd;
      a.k1 = pos[t] + 1;
      a.k0 = p.window > 0 ? std::max<int64_t>(0, a.k1 - p.window) : 0;
      if (p.ring) {  // positions -> ring rows; the range wraps at most once since it is no longer than the ring
        const int64_t n = a.k1 - a.k0;
        a.k0 %= n_rows;
        a.k1 = a.k0 + n;
        a.ring = a.k1 > n_rows ? n_rows : 0;
      }
      a.scale = p.scale;
      a.softcap = p.softcap;
      fn(a);
    }
  };
  ctx.pool->run(JobRef(job));
}

}  // namespace pipit
