// The CPU device's core ops (cpu_device.h): shape checks, output allocation from the arena, and the split of work across threads.
// Matmuls split the weight's output rows (N) so each thread streams distinct weight bytes — what decode needs.
#include "backends/cpu/cpu_device.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "core/panels.h"

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

namespace {
// Row r of a panel tensor (q4_0x16, q8_0x16) as f32: unpacked to plain blocks in the arena, then converted.
void panel_row_to_f32(Ctx& ctx, const Tensor& t, int64_t r, float* dst) {
  const DType plain = dtype_unpanel(t.dtype());
  const int64_t K = t.dim(-1);
  Tensor tmp = ctx.alloc(DType::I8, {dtype_row_bytes(plain, K)});
  unpack_panel_rows(t.dtype(), t.data(), K, r, r + 1, tmp.data());
  ctx.k->to_f32[int(plain)](tmp.data(), dst, K);
}
}  // namespace

Tensor CpuDevice::to_f32(Ctx& ctx, const Tensor& x) {
  Tensor y = ctx.alloc(DType::F32, x.shape());
  const int64_t n = x.dim(-1), rows = x.rows();
  if (dtype_is_panel(x.dtype())) {
    for (int64_t r = 0; r < rows; ++r) panel_row_to_f32(ctx, x, r, frow_mut(y, r));
    return y;
  }
  PIPIT_ASSERT(x.rows_contiguous(), "to_f32 of {}", x.describe());
  auto conv = ctx.k->to_f32[int(x.dtype())];
  PIPIT_ASSERT(conv, "no to_f32 kernel for {}", dtype_name(x.dtype()));
  for (int64_t r = 0; r < rows; ++r) conv(x.row_ptr(r), frow_mut(y, r), n);
  return y;
}

namespace {

// x as the matmul kernels of weight dtype wt take it: f32 rows as they are, int8 blocks (BlockQ8Act) quantized or
// bf16 rows (bf16dot) rounded once, shared by every thread and by every weight that follows.
MatmulArgs matmul_input(Ctx& ctx, const Tensor& x, DType wt) {
  const int64_t M = x.dim(0), K = x.dim(1);
  MatmulArgs a{x.data(), x.row_stride(), nullptr, 0, nullptr, 0, M, K};
  if (dtype_is_quantized(wt)) {
    PIPIT_ASSERT(K % kQBlock == 0);
    Tensor xq = ctx.alloc(DType::I8, {M, K / kQBlock * int64_t(sizeof(BlockQ8Act))});
    auto* q = xq.ptr<BlockQ8Act>();
    ctx.pool->parallel_for(M, [&](int64_t m0, int64_t m1) {
      ctx.k->quantize_act(frow(x, m0), x.row_stride(), q + m0 * (K / kQBlock), m1 - m0, K);
    }, 4);
    a.x = q;
    a.x_stride = K / kQBlock * int64_t(sizeof(BlockQ8Act));
  } else if (wt == DType::BF16DOT) {  // x rounded to bf16 once (precision fast, core/dtype.h)
    Tensor xb = ctx.alloc(DType::BF16, {M, K});
    auto conv = ctx.k->from_f32[int(DType::BF16)];
    ctx.pool->parallel_for(M, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) conv(frow(x, m), xb.row_ptr(m), K);
    }, 4);
    a.x = xb.data();
    a.x_stride = xb.row_stride();
  }
  return a;
}

void check_linear(const Tensor& x, const Tensor& w) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.ndim() == 2 && w.ndim() == 2 && x.dim(1) == w.dim(1),
               "linear x {} w {}", x.describe(), w.describe());
  PIPIT_ASSERT(w.rows_contiguous() && x.rows_contiguous());
  PIPIT_ASSERT(!dtype_is_panel(w.dtype()) || (w.dim(0) % kPanelRows == 0 && w.is_contiguous()), "linear w {}",
               w.describe());
}

// Work is split in chunks of 16 output rows (SIMD tiles and panels stay whole), handed out by guided scheduling
// (ThreadPool::parallel_for_guided): a thread takes a share of what is left, so it streams a long run of weight bytes
// at first and short ones at the end, where the threads then finish close together. With a fixed run of 1/8 of a
// thread's share a decode step (Qwen3-0.6B Q4_0, 2 threads, ~140 regions a token) spent 4.2% of its time with the
// caller waiting for the other thread's last run. A run is at least kMinMacs multiply-adds, so tiny matmuls stay on
// one thread, while a tall one with short rows (a 151k-row output head of a 64-wide model) is still split.
int64_t matmul_min_grain(int64_t M, int64_t K) {
  constexpr int64_t kMinMacs = 32768;
  const int64_t per_chunk = std::max<int64_t>(1, M * K * 16);
  return std::max<int64_t>(1, (kMinMacs + per_chunk - 1) / per_chunk);
}

void add_bias(Ctx& ctx, Tensor& y, const Tensor& bias) {
  if (!bias.defined()) return;
  const int64_t N = y.dim(1);
  PIPIT_ASSERT(bias.numel() == N, "bias {} for {} outputs", bias.describe(), N);
  const float* b = as_f32(ctx, bias);
  for (int64_t m = 0; m < y.dim(0); ++m) ctx.k->add(frow(y, m), b, frow_mut(y, m), N);
}

}  // namespace

void CpuDevice::linear_multi(Ctx& ctx, const Tensor& x, std::span<const Tensor* const> ws, std::span<const Tensor* const> biases,
                  std::span<Tensor* const> ys) {
  constexpr size_t kMax = 4;
  const size_t n = ws.size();
  PIPIT_ASSERT(n >= 1 && n <= kMax && biases.size() == n && ys.size() == n);
  for (size_t i = 1; i < n; ++i)
    if (ws[i]->dtype() != ws[0]->dtype()) {  // mixed dtypes: one matmul at a time
      for (size_t j = 0; j < n; ++j) *ys[j] = linear(ctx, x, *ws[j], *biases[j]);
      return;
    }
  const int64_t M = x.dim(0), K = x.dim(1);
  for (size_t i = 0; i < n; ++i) check_linear(x, *ws[i]);
  MatmulArgs args[kMax];
  int64_t first_chunk[kMax + 1] = {0};  // weight i owns chunks [first_chunk[i], first_chunk[i + 1])
  const MatmulArgs in = matmul_input(ctx, x, ws[0]->dtype());
  for (size_t i = 0; i < n; ++i) {
    const Tensor& w = *ws[i];
    *ys[i] = ctx.alloc(DType::F32, {M, w.dim(0)});
    args[i] = in;
    args[i].w = w.data();
    args[i].w_stride = w.row_stride();
    args[i].y = ys[i]->ptr<float>();
    args[i].y_stride = ys[i]->row_stride();
    first_chunk[i + 1] = first_chunk[i] + (w.dim(0) + 15) / 16;
  }
  MatmulFn fn = ctx.k->matmul[int(ws[0]->dtype())];
  ctx.pool->parallel_for_guided(first_chunk[n], [&](int, int64_t c0, int64_t c1) {
    for (size_t i = 0; i < n && c0 < c1; ++i) {  // the part of [c0, c1) that falls on each weight
      const int64_t b = std::max(c0, first_chunk[i]), e = std::min(c1, first_chunk[i + 1]);
      if (b >= e) continue;
      const int64_t N = ws[i]->dim(0);
      fn(args[i], (b - first_chunk[i]) * 16, std::min(N, (e - first_chunk[i]) * 16));
    }
  }, matmul_min_grain(M, K));
  for (size_t i = 0; i < n; ++i) add_bias(ctx, *ys[i], *biases[i]);
}

Tensor CpuDevice::linear_gated(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& up, GateAct act) {
  check_linear(x, gate);
  check_linear(x, up);
  PIPIT_ASSERT(gate.shape() == up.shape() && gate.dtype() == up.dtype(), "gate {} up {}", gate.describe(),
               up.describe());
  const int64_t M = x.dim(0), K = x.dim(1), N = gate.dim(0);
  Tensor g = ctx.alloc(DType::F32, {M, N}), u = ctx.alloc(DType::F32, {M, N}), h = ctx.alloc(DType::F32, {M, N});
  MatmulArgs ag = matmul_input(ctx, x, gate.dtype()), au = ag;
  ag.w = gate.data();
  au.w = up.data();
  ag.w_stride = au.w_stride = gate.row_stride();
  ag.y = g.ptr<float>();
  au.y = u.ptr<float>();
  ag.y_stride = au.y_stride = g.row_stride();
  MatmulFn fn = ctx.k->matmul[int(gate.dtype())];
  auto gated = act == GateAct::kSilu ? ctx.k->swiglu : ctx.k->geglu;
  const int64_t n_chunks = (N + 15) / 16;
  ctx.pool->parallel_for_guided(n_chunks, [&](int, int64_t c0, int64_t c1) {
    const int64_t n0 = c0 * 16, n1 = std::min(N, c1 * 16);
    fn(ag, n0, n1);
    fn(au, n0, n1);
    for (int64_t m = 0; m < M; ++m) gated(frow(g, m) + n0, frow(u, m) + n0, frow_mut(h, m) + n0, n1 - n0);
  }, matmul_min_grain(M, K));
  return h;
}

Tensor CpuDevice::embedding(Ctx& ctx, const Tensor& table, std::span<const int32_t> ids) {
  const int64_t n_embd = table.dim(1), n_vocab = table.dim(0);
  Tensor y = ctx.alloc(DType::F32, {int64_t(ids.size()), n_embd});
  auto conv = ctx.k->to_f32[int(table.dtype())];
  for (size_t i = 0; i < ids.size(); ++i) {
    PIPIT_ASSERT(ids[i] >= 0 && ids[i] < n_vocab, "token id {} outside the vocabulary of {}", ids[i], n_vocab);
    if (dtype_is_panel(table.dtype())) panel_row_to_f32(ctx, table, ids[i], frow_mut(y, int64_t(i)));
    else conv(table.row_ptr(ids[i]), frow_mut(y, int64_t(i)), n_embd);
  }
  return y;
}

Tensor CpuDevice::rms_norm(Ctx& ctx, const Tensor& x, const Tensor& w, float eps, float w_offset) {
  const int64_t n = x.dim(-1), rows = x.rows();
  PIPIT_ASSERT(w.numel() == n, "rms_norm weight {} for rows of {}", w.describe(), n);
  const float* wf = as_f32(ctx, w);
  Tensor y = ctx.alloc(DType::F32, x.shape());
  ctx.pool->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ctx.k->rms_norm(frow(x, r), wf, frow_mut(y, r), n, eps, w_offset);
  }, 16);
  return y;
}

void CpuDevice::rms_norm_heads_(Ctx& ctx, Tensor& x, const Tensor& w, float eps, float w_offset) {
  PIPIT_ASSERT(x.ndim() == 3 && x.is_contiguous());
  const int64_t hd = x.dim(2), rows = x.dim(0) * x.dim(1);
  PIPIT_ASSERT(w.numel() == hd, "head norm weight {} for head_dim {}", w.describe(), hd);
  const float* wf = as_f32(ctx, w);
  float* p = x.ptr<float>();
  ctx.pool->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ctx.k->rms_norm(p + r * hd, wf, p + r * hd, hd, eps, w_offset);
  }, 256);
}

namespace {
template <class Fn>
Tensor gated_rows(Ctx& ctx, const Tensor& gate, const Tensor& up, Fn fn) {
  PIPIT_ASSERT(gate.shape() == up.shape(), "gate {} up {}", gate.describe(), up.describe());
  Tensor y = ctx.alloc(DType::F32, gate.shape());
  const int64_t n = gate.dim(-1);
  ctx.pool->parallel_for(gate.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(frow(gate, r), frow(up, r), frow_mut(y, r), n);
  }, 4);
  return y;
}
}  // namespace

Tensor CpuDevice::gated(Ctx& ctx, const Tensor& gate, const Tensor& up, GateAct act) {
  return gated_rows(ctx, gate, up, act == GateAct::kSilu ? ctx.k->swiglu : ctx.k->geglu);
}

void CpuDevice::softmax_(Ctx& ctx, Tensor& x) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous(), "softmax of {}", x.describe());
  for (int64_t r = 0; r < x.rows(); ++r) ctx.k->softmax(frow_mut(x, r), x.dim(-1));
}

Tensor CpuDevice::gather_rows(Ctx& ctx, const Tensor& x, std::span<const int64_t> rows) {
  const int64_t d = x.dim(-1);
  Tensor y = ctx.alloc(DType::F32, {int64_t(rows.size()), d});
  for (size_t i = 0; i < rows.size(); ++i) {
    PIPIT_ASSERT(rows[i] >= 0 && rows[i] < x.rows(), "row {} of {}", rows[i], x.rows());
    std::memcpy(y.row_ptr(int64_t(i)), x.row_ptr(rows[i]), size_t(d) * 4);
  }
  return y;
}

void CpuDevice::copy_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) {
  PIPIT_ASSERT(int64_t(src_row.size()) == dst.rows() && src.dtype() == DType::F32 && src.dim(-1) >= dst.dim(-1),
               "copy_rows_ {} rows into {} from {}", src_row.size(), dst.describe(), src.describe());
  for (size_t i = 0; i < src_row.size(); ++i) {
    if (src_row[i] < 0) continue;
    PIPIT_ASSERT(src_row[i] < src.rows(), "source row {} of {}", src_row[i], src.rows());
    std::memcpy(dst.row_ptr(int64_t(i)), src.row_ptr(src_row[i]), size_t(dst.dim(-1)) * 4);
  }
}

void CpuDevice::add_(Ctx& ctx, Tensor& x, const Tensor& y) {
  PIPIT_ASSERT(x.shape() == y.shape(), "add {} {}", x.describe(), y.describe());
  const int64_t n = x.dim(-1);
  ctx.pool->parallel_for(x.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ctx.k->add(frow(x, r), frow(y, r), frow_mut(x, r), n);
  }, 32);
}

void CpuDevice::scale_(Ctx& ctx, Tensor& x, float s) {
  for (int64_t r = 0; r < x.rows(); ++r) ctx.k->scale(frow_mut(x, r), s, x.dim(-1));
}

void CpuDevice::rope_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const float> inv_freq, float mscale) {
  PIPIT_ASSERT(x.ndim() == 3 && x.is_contiguous() && int64_t(pos.size()) == x.dim(0));
  const int64_t n_head = x.dim(1), hd = x.dim(2), half = int64_t(inv_freq.size());
  PIPIT_ASSERT(2 * half <= hd);
  float* p = x.ptr<float>();
  // cos/sin per (token, i) in float32 as HF does: freqs = pos * inv_freq; emb = cat(freqs, freqs)
  auto& rt = ctx.rope_table;
  if (rt.inv_freq != inv_freq.data() || rt.n_freq != inv_freq.size() || rt.mscale != mscale ||
      !std::equal(pos.begin(), pos.end(), rt.pos.begin(), rt.pos.end())) {
    rt.pos.assign(pos.begin(), pos.end());
    rt.inv_freq = inv_freq.data();
    rt.n_freq = inv_freq.size();
    rt.mscale = mscale;
    rt.cs.resize(pos.size() * size_t(2 * half));
    for (size_t t = 0; t < pos.size(); ++t) {
      float* c = rt.cs.data() + t * 2 * half;
      for (int64_t i = 0; i < half; ++i) {
        const float f = float(pos[t]) * inv_freq[i];
        c[i] = std::cos(f) * mscale;
        c[half + i] = std::sin(f) * mscale;
      }
    }
  }
  ctx.pool->parallel_for(int64_t(pos.size()), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* c = rt.cs.data() + t * 2 * half;
      for (int64_t h = 0; h < n_head; ++h) {
        float* v = p + (t * n_head + h) * hd;
        for (int64_t i = 0; i < half; ++i) {  // rotate_half: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)
          const float x1 = v[i], x2 = v[i + half];
          v[i] = x1 * c[i] - x2 * c[half + i];
          v[i + half] = x2 * c[i] + x1 * c[half + i];
        }
      }
    }
  }, 32);
}

void CpuDevice::store_kv(Ctx& ctx, const Tensor& src, Tensor& dst, std::span<const int32_t> pos, bool ring) {
  PIPIT_ASSERT(src.ndim() == 3 && dst.ndim() == 3 && src.dim(1) == dst.dim(1) && src.dim(2) == dst.dim(2));
  const int64_t row = src.dim(1) * src.dim(2), n_rows = dst.dim(0);
  auto conv = ctx.k->from_f32[int(dst.dtype())];
  for (size_t t = 0; t < pos.size(); ++t)
    PIPIT_ASSERT(pos[t] >= 0 && (ring || pos[t] < n_rows), "position {} outside the KV cache of {}", pos[t], n_rows);
  ctx.pool->parallel_for(int64_t(pos.size()), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      conv(src.ptr<float>() + t * row, dst.data() + (pos[size_t(t)] % n_rows) * dst.stride(0), row);
  }, 32);
}

void CpuDevice::attention(Ctx& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> pos,
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
  auto rows_fn = ctx.k->attn_rows[int(k_cache.dtype())];
  auto row_fn = ctx.k->attn_row[int(k_cache.dtype())];
  // A job is one kv head over a block of tokens: its `group` query heads x tokens rows share K/V and (without a
  // window) the first key. With a window each row has its own first key, so a job is one row.
  // The more rows a job has, the fewer times K/V are read and converted (prefill of 512 tokens, Qwen3-0.6B shape, 1
  // thread: 16 rows a job spent 21% of the attention time converting f16 K/V rows, mostly waiting on the cache; 64
  // rows made prefill 1.1x faster), as long as there are jobs enough for every thread (about 4 each).
  const bool grouped = p.window <= 0 && rows_fn && group <= kAttnMaxRows;
  const int nth = ctx.pool->size();
  const int64_t tok_block =
      grouped ? std::clamp<int64_t>(n_tokens * n_head_kv / (4 * int64_t(nth)), 1, kAttnMaxRows / group)
              : 1;
  const int64_t n_tok_blocks = (n_tokens + tok_block - 1) / tok_block;
  // Split over keys too (decode over a long context): too few (head, token block) jobs to keep every thread busy,
  // so each also takes one chunk of kAttnChunk keys and attn_merge folds a row's chunk states afterwards. The
  // result is the same bits as unsplit (kernels.h), so this is only a matter of speed.
  const int64_t n_chunks = (max_keys + kAttnChunk - 1) / kAttnChunk;
  const bool split = grouped && ctx.k->attn_merge && n_chunks > 1 && n_head_kv * n_tok_blocks < 8 * int64_t(nth);
  const int64_t n_jobs = grouped ? n_head_kv * n_tok_blocks * (split ? n_chunks : 1) : n_tokens * n_head;
  const int64_t rows_per_job = grouped ? tok_block * group : 1;
  // the chunked levels keep no whole rows of scores: their scratch does not grow with the keys
  const int64_t scratch_row = attn_scratch_floats(rows_per_job, split || ctx.k->attn_merge ? kAttnChunk : max_keys, hd);
  Tensor scratch = ctx.alloc(DType::F32, {nth, scratch_row});
  const int64_t state_row = hd + 2;  // a chunk state {m, l, o}
  Tensor states = split ? ctx.alloc(DType::F32, {n_tokens * n_head, n_chunks * state_row}) : Tensor();
  const int64_t head_bytes = dtype_row_bytes(k_cache.dtype(), hd);  // one kv head of a cache row
  // the keys query (t, h) sees, as [k0, k1) in cache rows (a ring maps positions to rows; see AttnRowArgs::ring)
  auto key_range = [&](int64_t t, int64_t* k0, int64_t* k1, int64_t* ring) {
    *k1 = pos[t] + 1;
    *k0 = p.window > 0 ? std::max<int64_t>(0, *k1 - p.window) : 0;
    *ring = 0;
    if (p.ring) {  // the range wraps at most once since it is no longer than the ring
      const int64_t n = *k1 - *k0;
      *k0 %= n_rows;
      *k1 = *k0 + n;
      *ring = *k1 > n_rows ? n_rows : 0;
    }
  };
  auto job = [&](int ith, int64_t j0, int64_t j1) {
    float* scr = scratch.ptr<float>() + int64_t(ith) * scratch_row;
    for (int64_t j = j0; j < j1; ++j) {
      if (!grouped) {  // row j = t * n_head + h
        const int64_t t = j / n_head, kvh = (j % n_head) / group;
        AttnRowArgs a;
        a.q = q.ptr<float>() + j * hd;
        a.k = k_cache.data() + kvh * head_bytes;
        a.v = v_cache.data() + kvh * head_bytes;
        a.kv_stride = k_cache.stride(0);
        a.out = out.ptr<float>() + j * hd;
        a.scratch = scr;
        a.head_dim = hd;
        key_range(t, &a.k0, &a.k1, &a.ring);
        a.scale = p.scale;
        a.softcap = p.softcap;
        a.has_sink = p.sinks != nullptr;
        if (p.sinks) a.sink = p.sinks[j % n_head];
        row_fn(a);
        continue;
      }
      // job j = (kv head, token block[, chunk])
      const int64_t chunk = split ? j % n_chunks : 0, jb = split ? j / n_chunks : j;
      const int64_t kvh = jb / n_tok_blocks, t0 = (jb % n_tok_blocks) * tok_block;
      AttnRowsArgs a;
      a.n_q = 0;
      a.k = k_cache.data() + kvh * head_bytes;
      a.v = v_cache.data() + kvh * head_bytes;
      a.kv_stride = k_cache.stride(0);
      a.scratch = scr;
      a.head_dim = hd;
      a.scale = p.scale;
      a.softcap = p.softcap;
      a.has_sink = p.sinks != nullptr;
      for (int64_t t = t0; t < std::min(n_tokens, t0 + tok_block); ++t)
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          const int64_t i = t * n_head + h;
          int64_t k0, k1, ring;
          key_range(t, &k0, &k1, &ring);
          if (split) {  // this chunk's keys of the row, if it has any (no window: k0 = 0, no ring)
            k0 = chunk * kAttnChunk;
            if (k1 <= k0) continue;
            k1 = std::min(k1, k0 + kAttnChunk);
            a.state[a.n_q] = states.ptr<float>() + (i * n_chunks + chunk) * state_row;
          }
          a.q[a.n_q] = q.ptr<float>() + i * hd;
          a.sink[a.n_q] = p.sinks ? p.sinks[h] : 0.0f;
          a.out[a.n_q] = out.ptr<float>() + i * hd;
          a.k1[a.n_q] = k1;
          a.k0 = k0;  // the same for every row without a window
          a.ring = ring;
          ++a.n_q;
        }
      if (a.n_q > 0) rows_fn(a);
    }
  };
  ctx.pool->parallel_for_ith(n_jobs, job);
  if (!split) return;
  // each row: its chunks' states, folded in key order
  ctx.pool->parallel_for_ith(n_tokens * n_head, [&](int ith, int64_t r0, int64_t r1) {
    float* scr = scratch.ptr<float>() + int64_t(ith) * scratch_row;
    for (int64_t i = r0; i < r1; ++i) {
      const int64_t keys = pos[i / n_head] + 1, h = i % n_head;
      ctx.k->attn_merge(states.ptr<float>() + i * n_chunks * state_row, (keys + kAttnChunk - 1) / kAttnChunk, hd,
                        p.sinks != nullptr, p.sinks ? p.sinks[h] : 0.0f, scr, out.ptr<float>() + i * hd);
    }
  });
}

}  // namespace pipit

namespace pipit {

Device& cpu_device() {
  static CpuDevice dev;
  return dev;
}

std::shared_ptr<DeviceStorage> CpuDevice::alloc(size_t) {
  PIPIT_ASSERT(false, "the CPU has no device memory: its arenas and weights are host memory (Ctx::dev stays null)");
}
void CpuDevice::write(const Tensor& dst, const void* src, size_t bytes) { std::memcpy(dst.data(), src, bytes); }
void CpuDevice::read(const Tensor& src, void* dst, size_t bytes) { std::memcpy(dst, src.data(), bytes); }

}  // namespace pipit
