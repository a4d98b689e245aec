// Ops the vision encoders and the multimodal RoPE need: multi-stream RoPE, LayerNorm, the GELUs and
// bidirectional attention inside segments. Plain loops split across the thread pool; LayerNorm and the GELUs are
// row kernels of the table (ref + SIMD); attention runs on the f32 matmul, scale and softmax kernels.
#include <cmath>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/kernels.h"

namespace pipit {

namespace {
float* frow(Tensor& t, int64_t r) { return reinterpret_cast<float*>(t.row_ptr(r)); }
const float* crow(const Tensor& t, int64_t r) { return reinterpret_cast<const float*>(t.row_ptr(r)); }
}  // namespace

void CpuDevice::rope_multi_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const uint8_t> stream,
                 std::span<const float> inv_freq) {
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

Tensor CpuDevice::layer_norm(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& b, float eps) {
  const int64_t n = x.dim(-1), rows = x.rows();
  PIPIT_ASSERT(x.dtype() == DType::F32 && w.numel() == n && b.numel() == n, "layer_norm x {} w {} b {}",
               x.describe(), w.describe(), b.describe());
  Tensor wf = to_f32(ctx, w), bf = to_f32(ctx, b);
  Tensor y = ctx.alloc(DType::F32, x.shape());
  const auto fn = ctx.k->layer_norm;
  ctx.pool->parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(crow(x, r), wf.ptr<float>(), bf.ptr<float>(), frow(y, r), n, eps);
  }, 16);
  return y;
}

namespace {
void unary_(Ctx& ctx, Tensor& x, ActFn fn) {
  PIPIT_ASSERT(x.dtype() == DType::F32 && x.rows_contiguous());
  const int64_t n = x.dim(-1);
  ctx.pool->parallel_for(x.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(frow(x, r), n);
  }, 16);
}
}  // namespace

void CpuDevice::activation_(Ctx& ctx, Tensor& x, Act act) {
  switch (act) {
    case Act::kGelu: return unary_(ctx, x, ctx.k->gelu);
    case Act::kGeluTanh: return unary_(ctx, x, ctx.k->gelu_tanh);
    case Act::kQuickGelu: return unary_(ctx, x, ctx.k->quick_gelu);
    case Act::kSilu: return silu_rows_(ctx, x);  // the audio tower's plain loop (ops_audio.cpp)
  }
}

void CpuDevice::attention_segments(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, std::span<const int32_t> cu,
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
  if (n == 0 || longest == 0) return;
  const int64_t group = n_head / n_head_kv, kv_stride = k.stride(0), q_stride = n_head * hd * 4;
  // Every query attends to every key of its segment (no mask), so a tile of kTile queries of one head is two
  // matmuls on the f32 GEMM kernels: S = Q K^T (keys are the weight rows), then O = softmax(scale S) V. For the
  // second, V is transposed once per call to [n_head_kv, head_dim, n] so its columns are weight rows. A tile holds
  // kTile whole rows of scores (a 448x448 Qwen2-VL image: 32 x 1024 floats, 128 KiB), so the softmax needs no
  // running max / rescaling; each K and V row is read once per tile instead of once per query row.
  // Rows of V^T and of the scores are padded by 16 floats: at n = 1024 a row is 4 KiB, and rows 4 KiB apart all
  // fall in one L1 set (the transpose wrote its 80 rows there, the GEMMs read 4 at a time), which the pad spreads.
  constexpr int64_t kTile = 32, kPad = 16;
  const int64_t ld = n + kPad;
  Tensor vt = ctx.alloc(DType::F32, {n_head_kv, hd, ld});
  ctx.pool->parallel_for(n_head_kv * (n + 63) / 64, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {  // 64 tokens of one kv head: their head rows are read once
      const int64_t kvh = b % n_head_kv, t0 = b / n_head_kv * 64, t1 = std::min(n, t0 + 64);
      float* dst = vt.ptr<float>() + kvh * hd * ld;
      for (int64_t t = t0; t < t1; ++t) {
        const float* src = reinterpret_cast<const float*>(v.data() + t * kv_stride) + kvh * hd;
        for (int64_t d = 0; d < hd; ++d) dst[d * ld + t] = src[d];
      }
    }
  }, 4);
  struct Job {
    int64_t h, t0, t1;
    int32_t seg;
  };
  std::vector<Job> jobs;
  for (size_t sg = 0; sg + 1 < cu.size(); ++sg)
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t t = cu[sg]; t < cu[sg + 1]; t += kTile)
        jobs.push_back({h, t, std::min<int64_t>(cu[sg + 1], t + kTile), int32_t(sg)});
  Tensor scratch = ctx.alloc(DType::F32, {ctx.pool->size(), kTile * (longest + kPad)});
  const MatmulFn mm = ctx.k->matmul[int(DType::F32)];
  ctx.pool->parallel_for_ith(int64_t(jobs.size()), [&](int ith, int64_t j0, int64_t j1) {
    float* s = scratch.ptr<float>() + int64_t(ith) * kTile * (longest + kPad);
    for (int64_t j = j0; j < j1; ++j) {
      const Job& jb = jobs[size_t(j)];
      const int64_t k0 = cu[size_t(jb.seg)], len = cu[size_t(jb.seg) + 1] - k0, m = jb.t1 - jb.t0;
      const int64_t kvh = jb.h / group, ls = len + kPad;  // ls: the scores' row stride
      const MatmulArgs qk{q.ptr<float>() + (jb.t0 * n_head + jb.h) * hd, q_stride,
                          k.data() + k0 * kv_stride + kvh * hd * 4, kv_stride, s, ls * 4, m, hd};
      mm(qk, 0, len);
      for (int64_t i = 0; i < m; ++i) {
        ctx.k->scale(s + i * ls, scale, len);
        ctx.k->softmax(s + i * ls, len);
      }
      const MatmulArgs pv{s, ls * 4, vt.ptr<float>() + kvh * hd * ld + k0, ld * 4,
                          out.ptr<float>() + (jb.t0 * n_head + jb.h) * hd, q_stride, m, len};
      mm(pv, 0, hd);
    }
  });
}

}  // namespace pipit
