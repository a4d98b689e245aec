// Ops the vision encoders and the multimodal RoPE need: multi-stream RoPE, LayerNorm, erf GELU, quick GELU and
// bidirectional attention inside segments. Plain loops split across the thread pool; attention reuses the
// attn_row kernels of the KV-cache attention, so its SIMD versions serve the vision towers too.
#include <cmath>

#include "backends/cpu/ops.h"
#include "backends/device.h"

namespace pipit {

namespace {
float* frow(Tensor& t, int64_t r) { return reinterpret_cast<float*>(t.row_ptr(r)); }
const float* crow(const Tensor& t, int64_t r) { return reinterpret_cast<const float*>(t.row_ptr(r)); }
}  // namespace

void rope_multi_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const uint8_t> stream,
                 std::span<const float> inv_freq) {
  if (ctx.dev) return ctx.dev->rope_multi_(ctx, x, pos, stream, inv_freq);
  PIPIT_ASSERT(x.ndim() == 3 && x.is_contiguous() && stream.size() == inv_freq.size());
  const int64_t n = x.dim(0), n_head = x.dim(1), hd = x.dim(2), half = int64_t(inv_freq.size());
  PIPIT_ASSERT(2 * half <= hd);
  for (uint8_t s : stream) PIPIT_ASSERT(int64_t(s + 1) * n <= int64_t(pos.size()), "stream {} of {} positions", s, pos.size());
  ctx.pool->parallel_for(n, [&](int64_t t0, int64_t t1) {
    std::vector<float> cs(size_t(2 * half));
    for (int64_t t = t0; t < t1; ++t) {
      // float32 angle = position * inv_freq, as HF's inv_freq @ position_ids
      for (int64_t i = 0; i < half; ++i) {
        const float f = float(pos[size_t(stream[size_t(i)] * n + t)]) * inv_freq[size_t(i)];
        cs[size_t(i)] = std::cos(f);
        cs[size_t(half + i)] = std::sin(f);
      }
      for (int64_t h = 0; h < n_head; ++h) {
        float* v = x.ptr<float>() + (t * n_head + h) * hd;
        for (int64_t i = 0; i < half; ++i) {  // rotate_half pairs (i, i + half)
          const float x1 = v[i], x2 = v[i + half], c = cs[size_t(i)], s = cs[size_t(half + i)];
          v[i] = x1 * c - x2 * s;
          v[i + half] = x2 * c + x1 * s;
        }
      }
    }
  }, 4);
}

Tensor layer_norm(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& b, float eps) {
  const int64_t n = x.dim(-1), rows = x.rows();
  PIPIT_ASSERT(x.dtype() == DType::F32 && w.numel() == n && b.numel() == n, "layer_norm x {} w {} b {}",
               x.describe(), w.describe(), b.describe());
  Tensor wf = to_f32(ctx, w), bf = to_f32(ctx, b);
  Tensor y = ctx.alloc(DType::F32, x.shape());
  ctx.pool->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = crow(x, r);
      float* yr = frow(y, r);
      // two passes in double: mean, then the biased variance around it
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += xr[i];
      mean /= double(n);
      for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
      var /= double(n);
      const float inv = float(1.0 / std::sqrt(var + double(eps)));
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - float(mean)) * inv * wf.ptr<float>()[i] + bf.ptr<float>()[i];
    }
  }, 16);
  return y;
}

namespace {
template <class Fn>
void unary_(Ctx& ctx, Tensor& x, Fn fn) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous());
  const int64_t n = x.dim(-1);
  ctx.pool->parallel_for(x.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* p = frow(x, r);
      for (int64_t i = 0; i < n; ++i) p[i] = fn(p[i]);
    }
  }, 16);
}
}  // namespace

void gelu_(Ctx& ctx, Tensor& x) {
  unary_(ctx, x, [](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)); });
}

void quick_gelu_(Ctx& ctx, Tensor& x) {
  unary_(ctx, x, [](float v) { return v / (1.0f + std::exp(-1.702f * v)); });
}

void attention_segments(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, std::span<const int32_t> cu,
                        float scale, Tensor& out) {
  PIPIT_ASSERT(q.ndim() == 3 && q.is_contiguous() && k.ndim() == 3 && v.ndim() == 3 && out.is_contiguous());
  PIPIT_ASSERT(k.dtype() == DType::F32 && v.dtype() == DType::F32 && k.stride(0) == v.stride(0));
  const int64_t n = q.dim(0), n_head = q.dim(1), hd = q.dim(2), n_head_kv = k.dim(1);
  PIPIT_ASSERT(k.dim(0) == n && v.dim(0) == n && k.dim(2) == hd && n_head % n_head_kv == 0);
  PIPIT_ASSERT(k.stride(2) == 4 && k.stride(1) == hd * 4 && v.stride(1) == hd * 4, "head rows must be contiguous");
  PIPIT_ASSERT(cu.size() >= 2 && cu.front() == 0 && cu.back() == n, "segments {}..{} for {} rows", cu.front(),
               cu.back(), n);
  int64_t longest = 0;
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    PIPIT_ASSERT(cu[s] <= cu[s + 1]);
    longest = std::max<int64_t>(longest, cu[s + 1] - cu[s]);
  }
  const int nth = ctx.pool->size();
  const int64_t group = n_head / n_head_kv;
  if (auto rows_fn = ctx.k->attn_rows[int(DType::F32)]) {
    // A job: one kv head over a block of a segment's tokens, its `group` query heads x tokens rows (at most
    // kAttnMaxRows) sharing K/V and the key range: each K/V row is loaded once for all of them (attn_rows gives
    // every row the bits attn_row would).
    const int64_t tok_block = std::max<int64_t>(1, kAttnMaxRows / group);
    struct Job {
      int64_t kvh, t0, t1;
      int32_t seg;
    };
    std::vector<Job> jobs;
    for (size_t sg = 0; sg + 1 < cu.size(); ++sg)
      for (int64_t kvh = 0; kvh < n_head_kv; ++kvh)
        for (int64_t t = cu[sg]; t < cu[sg + 1]; t += tok_block)
          jobs.push_back({kvh, t, std::min<int64_t>(cu[sg + 1], t + tok_block), int32_t(sg)});
    const int64_t scratch_row = kAttnMaxRows * std::max<int64_t>(1, longest) + 4 * hd;
    Tensor scratch = ctx.alloc(DType::F32, {nth, scratch_row});
    ctx.pool->parallel_for_ith(int64_t(jobs.size()), [&](int ith, int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const Job& jb = jobs[size_t(j)];
        AttnRowsArgs a;
        a.n_q = 0;
        a.k = k.data() + jb.kvh * hd * 4;
        a.v = v.data() + jb.kvh * hd * 4;
        a.kv_stride = k.stride(0);
        a.scratch = scratch.ptr<float>() + int64_t(ith) * scratch_row;
        a.head_dim = hd;
        a.k0 = cu[size_t(jb.seg)];
        a.scale = scale;
        a.softcap = 0.0f;
        for (int64_t t = jb.t0; t < jb.t1; ++t)
          for (int64_t h = jb.kvh * group; h < (jb.kvh + 1) * group; ++h) {
            a.q[a.n_q] = q.ptr<float>() + (t * n_head + h) * hd;
            a.out[a.n_q] = out.ptr<float>() + (t * n_head + h) * hd;
            a.k1[a.n_q] = cu[size_t(jb.seg) + 1];
            ++a.n_q;
          }
        rows_fn(a);
      }
    });
    return;
  }
  std::vector<int32_t> seg_of(static_cast<size_t>(n));  // query row -> segment
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int32_t r = cu[s]; r < cu[s + 1]; ++r) seg_of[size_t(r)] = int32_t(s);
  Tensor scratch = ctx.alloc(DType::F32, {nth, std::max<int64_t>(1, longest)});
  auto fn = ctx.k->attn_row[int(DType::F32)];
  const int64_t total = n * n_head;
  auto job = [&](int ith, int nt) {
    for (int64_t i = total * ith / nt; i < total * (ith + 1) / nt; ++i) {
      const int64_t t = i / n_head, h = i % n_head, kvh = h / group, s = seg_of[size_t(t)];
      AttnRowArgs a;
      a.q = q.ptr<float>() + i * hd;
      a.k = k.data() + kvh * hd * 4;
      a.v = v.data() + kvh * hd * 4;
      a.kv_stride = k.stride(0);
      a.out = out.ptr<float>() + i * hd;
      a.scratch = scratch.ptr<float>() + int64_t(ith) * std::max<int64_t>(1, longest);
      a.head_dim = hd;
      a.k0 = cu[size_t(s)];
      a.k1 = cu[size_t(s) + 1];
      a.scale = scale;
      a.softcap = 0.0f;
      fn(a);
    }
  };
  ctx.pool->run(JobRef(job));
}

}  // namespace pipit
