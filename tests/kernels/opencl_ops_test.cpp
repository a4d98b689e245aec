// The OpenCL device's ops (backends/opencl) against the CPU's scalar reference kernels at ragged sizes (1, 31, 33,
// 4095 ...): matmul per weight dtype (GEMV and tiled GEMM), RMSNorm, softmax, RoPE and M-RoPE, SwiGLU/GeGLU,
// add/scale, embedding rows, the KV-cache store and attention (f32 / f16 cache, GQA, window, ring, sinks), row
// movers, the decoder ops (MoE routing and combining, clamped SwiGLU, sigmoid gate, soft-cap, fill, clamp, row adds),
// the linear-attention ops (conv1d window, L2 norm, gates, gated delta rule with its state across calls, gated norm);
// and the device errors (an index that does not exist, a kernel build that fails). Skipped, with the reason, on a
// machine without an OpenCL device (CI installs PoCL: scripts/setup.sh).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <cstdlib>

#include "backends/ops.h"
#include "backends/device.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

// One device for the whole binary: opening builds (or loads) every program.
Device* device() {
  static std::shared_ptr<Device> dev;
  static std::string why;
  static bool tried = false;
  if (!tried) {
    tried = true;
    auto d = open_device("opencl");
    if (d.is_ok()) dev = *d;
    else why = d.status().message();
  }
  if (!dev) std::printf("[ skipped  ] no OpenCL device: %s\n", why.c_str());
  return dev.get();
}

#define NEED_DEVICE()                                      \
  Device* dev = device();                                  \
  if (!dev) GTEST_SKIP() << "no OpenCL device on this machine"

// A CPU context on the scalar reference kernels (the truth) and a device context, each with its own arena.
struct Ctxs {
  ThreadPool pool{1};
  Arena host_arena{1 << 20};
  Arena dev_arena;
  Ctx cpu, gpu;
  explicit Ctxs(Device* dev) : dev_arena(1 << 20, device_chunk_alloc(dev)) {
    cpu.arena = &host_arena;
    cpu.pool = &pool;
    cpu.k = &ref_kernels();
    gpu.arena = &dev_arena;
    gpu.pool = &pool;
    gpu.k = &ref_kernels();
    gpu.dev = dev;
  }
};

Tensor host(DType dt, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::memcpy(t.data(), v.data(), v.size() * 4);
  if (dt == DType::F32) return t;
  Tensor q = Tensor::empty(dt, shape);
  const int64_t n = shape.back();
  for (int64_t r = 0; r < t.rows(); ++r) ref_kernels().from_f32[int(dt)](t.ptr<float>() + r * n, q.row_ptr(r), n);
  return q;
}

Tensor on_device(Device* dev, const Tensor& h) {
  Tensor d = dev->empty(h.dtype(), h.shape());
  dev->write(d, h.data(), h.nbytes());
  return d;
}

std::vector<float> read(Device* dev, const Tensor& d) {
  std::vector<float> v(size_t(d.numel()));
  dev->read(d, v.data(), v.size() * 4);
  EXPECT_TRUE(dev->take_error().is_ok());
  return v;
}

std::vector<float> values(const Tensor& t) { return {t.ptr<float>(), t.ptr<float>() + t.numel()}; }

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

// ---- matmul ----
struct MatmulCase {
  DType dt;
  int64_t M, N, K;
};

TEST(OpenclOps, MatmulEveryDtypeGemvAndGemm) {
  NEED_DEVICE();
  test::Rng rng(1);
  std::vector<MatmulCase> cases;
  for (DType dt : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0})
    for (int64_t M : {1, 3, 4, 5, 17, 33})
      for (int64_t N : {1, 31, 33})
        for (int64_t K : dtype_is_quantized(dt) ? std::vector<int64_t>{32, 96} : std::vector<int64_t>{1, 31, 33})
          cases.push_back({dt, M, N, K});
  cases.push_back({DType::Q4_0, 2, 64, 4096});  // a long row: many blocks per work-item
  cases.push_back({DType::F32, 40, 70, 4095});
  for (const auto& c : cases) {
    Ctxs cx(dev);
    const auto xv = rng.floats(size_t(c.M * c.K)), wv = rng.floats(size_t(c.N * c.K)), bv = rng.floats(size_t(c.N));
    Tensor w = host(c.dt, {c.N, c.K}, wv), x = host(DType::F32, {c.M, c.K}, xv), b = host(DType::F32, {c.N}, bv);
    // the reference: the stored (rounded) weights as the scalar to_f32 reads them, dot products in double
    Tensor wf = to_f32(cx.cpu, w);
    std::vector<float> want(size_t(c.M * c.N));
    double mag = 0;
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double s = bv[size_t(n)];
        for (int64_t k = 0; k < c.K; ++k) {
          s += double(xv[size_t(m * c.K + k)]) * wf.ptr<float>()[n * c.K + k];
          mag = std::max(mag, std::fabs(s));
        }
        want[size_t(m * c.N + n)] = float(s);
      }
    auto dw = dev->upload_weight(w);
    ASSERT_TRUE(dw.is_ok()) << dw.status().message();
    auto db = dev->upload_weight(b);
    ASSERT_TRUE(db.is_ok());
    Tensor y = linear(cx.gpu, on_device(dev, x), *dw, *db);
    EXPECT_LE(max_diff(read(dev, y), want), 1e-5 * std::max(1.0, mag) * std::sqrt(double(c.K)))
        << dtype_name(c.dt) << " M " << c.M << " N " << c.N << " K " << c.K;
  }
}

TEST(OpenclOps, LinearGatedAndGatedActivations) {
  NEED_DEVICE();
  test::Rng rng(2);
  for (int64_t M : {1, 7})
    for (GateAct act : {GateAct::kSilu, GateAct::kGeluTanh}) {
      Ctxs cx(dev);
      const int64_t N = 33, K = 64;
      Tensor x = host(DType::F32, {M, K}, rng.floats(size_t(M * K)));
      Tensor g = host(DType::Q8_0, {N, K}, rng.floats(size_t(N * K))), u = host(DType::Q8_0, {N, K}, rng.floats(size_t(N * K)));
      // reference: f32 matmuls of the dequantized weights, then the scalar activation
      Tensor gf = to_f32(cx.cpu, g), uf = to_f32(cx.cpu, u);
      Tensor want = act == GateAct::kSilu ? swiglu(cx.cpu, linear(cx.cpu, x, gf), linear(cx.cpu, x, uf))
                                          : geglu(cx.cpu, linear(cx.cpu, x, gf), linear(cx.cpu, x, uf));
      Tensor got = linear_gated(cx.gpu, on_device(dev, x), *dev->upload_weight(g), *dev->upload_weight(u), act);
      EXPECT_LE(max_diff(read(dev, got), values(want)), 2e-5) << M;
    }
}

// ---- row ops ----
TEST(OpenclOps, RmsNormSoftmaxAddScaleElementwise) {
  NEED_DEVICE();
  test::Rng rng(3);
  for (int64_t rows : {1, 3})
    for (int64_t n : {1, 31, 32, 33, 4095}) {
      Ctxs cx(dev);
      Tensor x = host(DType::F32, {rows, n}, rng.floats(size_t(rows * n), -3, 3));
      Tensor y = host(DType::F32, {rows, n}, rng.floats(size_t(rows * n), -3, 3));
      Tensor w = host(DType::F32, {n}, rng.floats(size_t(n)));
      Tensor dx = on_device(dev, x), dy = on_device(dev, y);
      Tensor dw = *dev->upload_weight(w);
      EXPECT_LE(max_diff(read(dev, rms_norm(cx.gpu, dx, dw, 1e-6f, 1.0f)), values(rms_norm(cx.cpu, x, w, 1e-6f, 1.0f))),
                1e-5) << n;
      EXPECT_LE(max_diff(read(dev, swiglu(cx.gpu, dx, dy)), values(swiglu(cx.cpu, x, y))), 1e-5) << n;
      EXPECT_LE(max_diff(read(dev, geglu(cx.gpu, dx, dy)), values(geglu(cx.cpu, x, y))), 1e-5) << n;
      Tensor s = host(DType::F32, {rows, n}, values(x)), ds = on_device(dev, s);
      softmax_(cx.cpu, s);
      softmax_(cx.gpu, ds);
      EXPECT_LE(max_diff(read(dev, ds), values(s)), 1e-6) << n;
      add_(cx.cpu, x, y);
      add_(cx.gpu, dx, dy);
      scale_(cx.cpu, x, 0.37f);
      scale_(cx.gpu, dx, 0.37f);
      EXPECT_EQ(max_diff(read(dev, dx), values(x)), 0.0) << n;
    }
}

TEST(OpenclOps, RmsNormHeadsInPlace) {
  NEED_DEVICE();
  test::Rng rng(4);
  Ctxs cx(dev);
  for (int64_t hd : {8, 33, 128}) {
    Tensor x = host(DType::F32, {5, 3, hd}, rng.floats(size_t(15 * hd)));
    Tensor w = host(DType::F32, {hd}, rng.floats(size_t(hd)));
    Tensor dx = on_device(dev, x);
    rms_norm_heads_(cx.cpu, x, w, 1e-6f);
    rms_norm_heads_(cx.gpu, dx, *dev->upload_weight(w), 1e-6f);
    EXPECT_LE(max_diff(read(dev, dx), values(x)), 1e-5) << hd;
  }
}

TEST(OpenclOps, RopeAndMRope) {
  NEED_DEVICE();
  test::Rng rng(5);
  for (int64_t hd : {8, 64, 66})
    for (int64_t rot : {hd, hd / 2}) {  // full and partial rotary
      Ctxs cx(dev);
      const int64_t n = 7, n_head = 3, half = rot / 2;
      std::vector<float> inv_freq(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) inv_freq[size_t(i)] = std::pow(10000.0f, -2.0f * float(i) / float(rot));
      std::vector<int32_t> pos = {0, 1, 2, 3, 50, 51, 4095};
      Tensor x = host(DType::F32, {n, n_head, hd}, rng.floats(size_t(n * n_head * hd)));
      Tensor dx = on_device(dev, x);
      Tensor x2 = host(DType::F32, x.shape(), values(x)), dx2 = on_device(dev, x2);
      rope_(cx.cpu, x, pos, inv_freq, 0.9f);
      rope_(cx.gpu, dx, pos, inv_freq, 0.9f);
      EXPECT_LE(max_diff(read(dev, dx), values(x)), 1e-5) << hd << " " << rot;
      // M-RoPE: three position streams, frequencies assigned to them in sections
      std::vector<int32_t> mpos;
      for (int s = 0; s < 3; ++s)
        for (int64_t t = 0; t < n; ++t) mpos.push_back(int32_t(t * (s + 1) + s));
      std::vector<uint8_t> stream(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) stream[size_t(i)] = uint8_t(i * 3 / half);
      rope_multi_(cx.cpu, x2, mpos, stream, inv_freq);
      rope_multi_(cx.gpu, dx2, mpos, stream, inv_freq);
      EXPECT_LE(max_diff(read(dev, dx2), values(x2)), 1e-5) << hd << " " << rot;
    }
}

TEST(OpenclOps, EmbeddingGatherAndCopyRows) {
  NEED_DEVICE();
  test::Rng rng(6);
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    Ctxs cx(dev);
    const int64_t V = 37, E = dtype_is_quantized(dt) ? 96 : 33;
    Tensor table = host(dt, {V, E}, rng.floats(size_t(V * E)));
    std::vector<int32_t> ids = {0, 36, 5, 5, 17};
    auto dt_table = dev->upload_weight(table);
    ASSERT_TRUE(dt_table.is_ok()) << dt_table.status().message();
    Tensor want = embedding(cx.cpu, table, ids);
    Tensor got = embedding(cx.gpu, *dt_table, ids);
    EXPECT_EQ(max_diff(read(dev, got), values(want)), 0.0) << dtype_name(dt);
    std::vector<int64_t> rows = {4, 0, 2};
    EXPECT_EQ(max_diff(read(dev, gather_rows(cx.gpu, got, rows)), values(gather_rows(cx.cpu, want, rows))), 0.0);
    Tensor feats = host(DType::F32, {3, E + 5}, rng.floats(size_t(3 * (E + 5))));  // wider rows: DeepStack-like
    std::vector<int32_t> src = {-1, 2, -1, 0, 1};
    copy_rows_(cx.cpu, want, src, feats);
    copy_rows_(cx.gpu, got, src, feats);
    EXPECT_EQ(max_diff(read(dev, got), values(want)), 0.0) << dtype_name(dt);
  }
}

// ---- KV cache + attention ----
struct AttnCase {
  DType kv;
  int64_t n_head, n_head_kv, hd;
  int window;
  bool ring;
  float softcap;
};

TEST(OpenclOps, StoreKvAndAttention) {
  NEED_DEVICE();
  test::Rng rng(7);
  const AttnCase cases[] = {
      {DType::F32, 4, 2, 32, 0, false, 0.0f}, {DType::F16, 4, 1, 33, 0, false, 0.0f},
      {DType::F16, 6, 3, 64, 5, false, 0.0f}, {DType::F32, 2, 2, 16, 4, true, 0.0f},
      {DType::F32, 3, 1, 8, 0, false, 30.0f},
  };
  for (const auto& c : cases) {
    Ctxs cx(dev);
    const int64_t n_rows = c.ring ? c.window + 6 : 64;
    Tensor kc = Tensor::empty(c.kv, {n_rows, c.n_head_kv, c.hd}), vc = Tensor::empty(c.kv, {n_rows, c.n_head_kv, c.hd});
    Tensor dkc = dev->empty(c.kv, kc.shape()), dvc = dev->empty(c.kv, vc.shape());
    AttnParams ap{1.0f / std::sqrt(float(c.hd)), c.softcap, c.window, c.ring};
    int32_t p0 = 0;
    for (int64_t n : {6, 1, 5, 1, 1}) {  // prefill chunks then decode steps: the cache fills across calls
      std::vector<int32_t> pos;
      for (int64_t i = 0; i < n; ++i) pos.push_back(p0 + int32_t(i));
      p0 += int32_t(n);
      Tensor q = host(DType::F32, {n, c.n_head, c.hd}, rng.floats(size_t(n * c.n_head * c.hd)));
      Tensor k = host(DType::F32, {n, c.n_head_kv, c.hd}, rng.floats(size_t(n * c.n_head_kv * c.hd)));
      Tensor v = host(DType::F32, {n, c.n_head_kv, c.hd}, rng.floats(size_t(n * c.n_head_kv * c.hd)));
      store_kv(cx.cpu, k, kc, pos, c.ring);
      store_kv(cx.cpu, v, vc, pos, c.ring);
      store_kv(cx.gpu, on_device(dev, k), dkc, pos, c.ring);
      store_kv(cx.gpu, on_device(dev, v), dvc, pos, c.ring);
      Tensor want = Tensor::empty(DType::F32, q.shape()), got = dev->empty(DType::F32, q.shape());
      attention(cx.cpu, q, kc, vc, pos, ap, want);
      attention(cx.gpu, on_device(dev, q), dkc, dvc, pos, ap, got);
      EXPECT_LE(max_diff(read(dev, got), values(want)), 2e-6)
          << dtype_name(c.kv) << " heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.hd << " window "
          << c.window << " at " << p0;
    }
    // the cache rows themselves: f16 rounding equal to the CPU's conversion
    std::vector<uint8_t> a(kc.nbytes());
    dev->read(dkc, a.data(), a.size());
    EXPECT_EQ(std::memcmp(a.data(), kc.data(), a.size()), 0) << dtype_name(c.kv);
  }
}

// ---- decoder ops: MoE routing and combining, GPT-OSS's clamped SwiGLU, gates, soft-cap, row adds ----
std::vector<int32_t> read_i32(Device* dev, const Tensor& d) {
  std::vector<int32_t> v(size_t(d.numel()));
  dev->read(d, v.data(), v.size() * 4);
  EXPECT_TRUE(dev->take_error().is_ok());
  return v;
}

TEST(OpenclOps, MoeRouteBothOrdersAgainstTheCpu) {
  NEED_DEVICE();
  test::Rng rng(8);
  const std::vector<float> escale = rng.floats(60, 0.5f, 2.0f);
  struct Case {
    int64_t n, E, k;
    MoeOrder order;
    bool renorm;
    float scale;
    bool escale;
  };
  const Case cases[] = {
      {1, 8, 2, MoeOrder::kSoftmaxTopK, true, 1.0f, false},   {7, 60, 4, MoeOrder::kSoftmaxTopK, false, 2.5f, false},
      {5, 33, 8, MoeOrder::kSoftmaxTopK, true, 1.0f, true},   {9, 32, 4, MoeOrder::kTopKSoftmax, false, 1.0f, false},
      {3, 4, 4, MoeOrder::kTopKSoftmax, false, 1.0f, true},   {2, 5, 1, MoeOrder::kSoftmaxTopK, false, 1.0f, false},
  };
  for (const auto& c : cases) {
    Ctxs cx(dev);
    std::vector<float> lv = rng.floats(size_t(c.n * c.E), -4, 4);
    if (c.E > 6) lv[3] = lv[5] = 9.0f;  // a tie at the top of row 0: the lower expert index comes first
    Tensor l = host(DType::F32, {c.n, c.E}, lv);
    MoeRouteParams p{.k = c.k, .order = c.order, .renormalize = c.renorm, .scale = c.scale};
    if (c.escale) p.expert_scale = std::span<const float>(escale.data(), size_t(c.E));
    const MoeRoutes want = moe_route(cx.cpu, l, p), got = moe_route(cx.gpu, on_device(dev, l), p);
    const std::vector<int32_t> ws(want.sel.ptr<int32_t>(), want.sel.ptr<int32_t>() + want.sel.numel());
    EXPECT_EQ(read_i32(dev, got.sel), ws) << c.n << "x" << c.E << " top " << c.k;
    EXPECT_LE(max_diff(read(dev, got.wt), values(want.wt)), 1e-6) << c.n << "x" << c.E << " top " << c.k;
    if (c.E > 6) {
      EXPECT_EQ(ws[0], 3);
    }
    // and group_by_expert reads the device's routes back: the same groups as the CPU's
    const ExpertGroups gw = group_by_expert(cx.cpu, want, c.E), gg = group_by_expert(cx.gpu, got, c.E);
    EXPECT_EQ(gg.begin, gw.begin);
    EXPECT_EQ(gg.token, gw.token);
  }
}

TEST(OpenclOps, AddRowsScaledFillAndSwigluClamped) {
  NEED_DEVICE();
  test::Rng rng(9);
  for (int64_t d : {1, 33, 257}) {
    Ctxs cx(dev);
    const int64_t n = 9;
    Tensor out = host(DType::F32, {n, d}, std::vector<float>(size_t(n * d), 7.0f)), dout = on_device(dev, out);
    fill_(cx.cpu, out, 0.0f);
    fill_(cx.gpu, dout, 0.0f);
    EXPECT_EQ(max_diff(read(dev, dout), values(out)), 0.0);
    // two "experts" over overlapping token sets, summed in call order as moe_dispatch does
    for (const std::vector<int64_t>& rows : {std::vector<int64_t>{0, 3, 8, 4}, std::vector<int64_t>{3, 1}}) {
      const int64_t m = int64_t(rows.size());
      const std::vector<float> w = rng.floats(size_t(m), 0, 1);
      Tensor y = host(DType::F32, {m, d}, rng.floats(size_t(m * d), -3, 3));
      add_rows_scaled_(cx.cpu, out, rows, w, y);
      add_rows_scaled_(cx.gpu, dout, rows, w, on_device(dev, y));
    }
    EXPECT_EQ(max_diff(read(dev, dout), values(out)), 0.0) << d;  // one multiply-add per element: exact
    // GPT-OSS's activation, inputs past the limit on both sides
    Tensor gu = host(DType::F32, {5, 2 * d}, rng.floats(size_t(10 * d), -12, 12));
    EXPECT_LE(max_diff(read(dev, swiglu_clamped(cx.gpu, on_device(dev, gu), 1.702f, 7.0f)),
                       values(swiglu_clamped(cx.cpu, gu, 1.702f, 7.0f))), 1e-5) << d;
  }
}

TEST(OpenclOps, SigmoidMulSoftcapClampAndAddRowsOnStridedRows) {
  NEED_DEVICE();
  test::Rng rng(10);
  for (int64_t n : {1, 31, 300}) {
    Ctxs cx(dev);
    const int64_t rows = 6;
    // x is a column block of wider rows (strided), as the models' views into a batch buffer
    Tensor wide = host(DType::F32, {rows, 2 * n}, rng.floats(size_t(rows * 2 * n), -40, 40));
    Tensor dwide = on_device(dev, wide);
    Tensor x = wide.slice(1, n, 2 * n), dx = dwide.slice(1, n, 2 * n);
    Tensor g = host(DType::F32, {rows, n}, rng.floats(size_t(rows * n), -6, 6));
    sigmoid_mul_(cx.cpu, x, g);
    sigmoid_mul_(cx.gpu, dx, on_device(dev, g));
    EXPECT_LE(max_diff(read(dev, dwide), values(wide)), 1e-5) << n;
    softcap_(cx.cpu, x, 15.0f);
    softcap_(cx.gpu, dx, 15.0f);
    EXPECT_LE(max_diff(read(dev, dwide), values(wide)), 1e-5) << n;
    clamp_(cx.cpu, x, -3.0f, 2.5f);
    clamp_(cx.gpu, dx, -3.0f, 2.5f);
    EXPECT_LE(max_diff(read(dev, dwide), values(wide)), 1e-5) << n;
    // DeepStack: rows of a host tensor wider than x (its first n columns) added to some rows
    Tensor src = host(DType::F32, {3, n + 4}, rng.floats(size_t(3 * (n + 4))));
    const std::vector<int32_t> src_row = {-1, 2, 0, -1, 1, 2};
    Tensor y = host(DType::F32, {rows, n}, rng.floats(size_t(rows * n))), dy = on_device(dev, y);
    add_rows_(cx.cpu, y, src_row, src);
    add_rows_(cx.gpu, dy, src_row, src);
    EXPECT_EQ(max_diff(read(dev, dy), values(y)), 0.0) << n;
    add_rows_(cx.gpu, dy, std::vector<int32_t>(size_t(rows), -1), src);  // no row takes part: unchanged
    EXPECT_EQ(max_diff(read(dev, dy), values(y)), 0.0) << n;
  }
}

// ---- linear attention (Gated DeltaNet) ----
// The conv over a sequence fed in chunks (its window carried in the state) against the CPU, and against one pass.
TEST(OpenclOps, CausalConv1dSiluCarriesItsWindowAcrossCalls) {
  NEED_DEVICE();
  test::Rng rng(20);
  for (int64_t C : {1, 33, 200}) {
    Ctxs cx(dev);
    const int64_t K = 4, n = 13;
    // x is a column block of wider rows (the conv reads its slice of the q|k|v projection)
    Tensor wide = host(DType::F32, {n, C + 5}, rng.floats(size_t(n * (C + 5)), -2, 2));
    Tensor dwide = on_device(dev, wide);
    Tensor w = host(DType::F32, {K, C}, rng.floats(size_t(K * C))), dw = on_device(dev, w);
    Tensor state0 = host(DType::F32, {K, C}, rng.floats(size_t(K * C)));
    Tensor st = Tensor::empty(DType::F32, {K, C});
    std::memcpy(st.data(), state0.data(), st.nbytes());
    Tensor dst = on_device(dev, state0), dst1 = on_device(dev, state0);
    Tensor y = Tensor::empty(DType::F32, {n, C});
    Tensor dy = dev->empty(DType::F32, {n, C}), dy1 = dev->empty(DType::F32, {n, C});
    int64_t t0 = 0;
    for (int64_t len : {5, 1, 1, 2, 4}) {  // chunks shorter and longer than the window
      Tensor xs = wide.slice(0, t0, t0 + len).slice(1, 3, 3 + C);
      Tensor dxs = dwide.slice(0, t0, t0 + len).slice(1, 3, 3 + C);
      Tensor ys = y.slice(0, t0, t0 + len), dys = dy.slice(0, t0, t0 + len);
      causal_conv1d_silu(cx.cpu, xs, st, w, ys);
      causal_conv1d_silu(cx.gpu, dxs, dst, dw, dys);
      t0 += len;
    }
    ASSERT_EQ(t0, n);
    EXPECT_LE(max_diff(read(dev, dy), values(y)), 1e-6) << C;
    EXPECT_EQ(max_diff(read(dev, dst), values(st)), 0.0) << C;  // the window: copies, exact
    Tensor dx_all = dwide.slice(1, 3, 3 + C);
    causal_conv1d_silu(cx.gpu, dx_all, dst1, dw, dy1);  // one pass: the same outputs and window
    EXPECT_EQ(max_diff(read(dev, dy1), read(dev, dy)), 0.0) << C;
    EXPECT_EQ(max_diff(read(dev, dst1), read(dev, dst)), 0.0) << C;
  }
}

TEST(OpenclOps, L2NormGroupsDeltaGatesAndGatedRmsNorm) {
  NEED_DEVICE();
  test::Rng rng(21);
  for (int64_t n : {1, 7, 40}) {
    Ctxs cx(dev);
    // l2 norm of groups of 32 in a column block of wider rows, with the query's scale
    Tensor wide = host(DType::F32, {n, 3 * 32 + 8}, rng.floats(size_t(n * (3 * 32 + 8)), -3, 3));
    Tensor dwide = on_device(dev, wide);
    Tensor x = wide.slice(1, 8, 8 + 3 * 32), dx = dwide.slice(1, 8, 8 + 3 * 32);
    l2_norm_groups_(cx.cpu, x, 32, 1e-6f, 0.17677669f);
    l2_norm_groups_(cx.gpu, dx, 32, 1e-6f, 0.17677669f);
    EXPECT_LE(max_diff(read(dev, dwide), values(wide)), 1e-6) << n;
    // to_f32 of a column view (Qwen3.5's query / gate halves): a contiguous copy of the view's rows
    EXPECT_EQ(max_diff(read(dev, to_f32(cx.gpu, dx.slice(1, 5, 37))), values(to_f32(cx.cpu, x.slice(1, 5, 37)))),
              0.0) << n;
    // gates over [n, 5] heads: a around softplus' threshold (20) on both sides
    const int64_t nh = 5;
    Tensor a = host(DType::F32, {n, nh}, rng.floats(size_t(n * nh), -25, 25));
    Tensor b = host(DType::F32, {n, nh}, rng.floats(size_t(n * nh), -8, 8));
    Tensor al = host(DType::F32, {nh}, rng.floats(size_t(nh), -2, 1)), dt = host(DType::F32, {nh}, rng.floats(nh));
    Tensor da = on_device(dev, a), db = on_device(dev, b);
    delta_gates_(cx.cpu, a, b, al, dt);
    delta_gates_(cx.gpu, da, db, on_device(dev, al), on_device(dev, dt));
    EXPECT_LE(max_diff(read(dev, da), values(a)), 1e-4) << n;  // |g| up to ~70
    EXPECT_LE(max_diff(read(dev, db), values(b)), 1e-6) << n;
    // gated RMSNorm over rows of a head's dv (24: not a power of two)
    Tensor xr = host(DType::F32, {n * 3, 24}, rng.floats(size_t(n * 3 * 24), -4, 4));
    Tensor z = host(DType::F32, {n * 3, 24}, rng.floats(size_t(n * 3 * 24), -6, 6));
    Tensor wn = host(DType::F32, {24}, rng.floats(24));
    Tensor want = rms_norm_gated(cx.cpu, xr, wn, z, 1e-6f);
    Tensor got = rms_norm_gated(cx.gpu, on_device(dev, xr), on_device(dev, wn), on_device(dev, z), 1e-6f);
    EXPECT_LE(max_diff(read(dev, got), values(want)), 1e-5) << n;
  }
}

// The gated delta rule for two sequences of one batch, each with its own state: the device (token by token) against
// the CPU (token by token up to 32 tokens, chunked past that), then the same sequence prefilled in chunks and decoded
// token by token on the device equals one pass there, state included.
struct DeltaInputs {
  Tensor qkv;      // [n, 2 nk dk + nv dv + 3]: q | k | v and 3 spare columns (strided views, as the conv output)
  Tensor g, beta;  // [n, nv]
};

DeltaInputs delta_inputs(Ctxs& cx, test::Rng& rng, int64_t n, int64_t nk, int64_t nv, int64_t dk, int64_t dv) {
  const int64_t w = 2 * nk * dk + nv * dv + 3;
  DeltaInputs in{host(DType::F32, {n, w}, rng.floats(size_t(n * w))), Tensor(), Tensor()};
  Tensor qk = in.qkv.slice(1, 0, 2 * nk * dk);
  l2_norm_groups_(cx.cpu, qk, dk, 1e-6f);  // unit keys and queries, as the model's: the state stays bounded
  in.g = host(DType::F32, {n, nv}, rng.floats(size_t(n * nv), -1.5f, -0.01f));
  in.beta = host(DType::F32, {n, nv}, rng.floats(size_t(n * nv), 0.05f, 0.95f));
  return in;
}

TEST(OpenclOps, GatedDeltaRuleAgainstTheCpuAndAcrossCalls) {
  NEED_DEVICE();
  test::Rng rng(22);
  const int64_t nk = 2, nv = 4, dk = 32, dv = 24;
  for (auto [n0, n1] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {40, 1}, {70, 33}}) {
    Ctxs cx(dev);
    const int64_t n = n0 + n1;
    DeltaInputs in = delta_inputs(cx, rng, n, nk, nv, dk, dv);
    Tensor dqkv = on_device(dev, in.qkv), dg = on_device(dev, in.g), dbeta = on_device(dev, in.beta);
    auto views = [&](const Tensor& t) {
      return std::array<Tensor, 3>{t.slice(1, 0, nk * dk), t.slice(1, nk * dk, 2 * nk * dk),
                                   t.slice(1, 2 * nk * dk, 2 * nk * dk + nv * dv)};
    };
    const auto hv = views(in.qkv), dv3 = views(dqkv);
    Tensor s0 = host(DType::F32, {nv, dk, dv}, rng.floats(size_t(nv * dk * dv), -0.5f, 0.5f));
    Tensor s1 = host(DType::F32, {nv, dk, dv}, rng.floats(size_t(nv * dk * dv), -0.5f, 0.5f));
    Tensor ds0 = on_device(dev, s0), ds1 = on_device(dev, s1);
    Tensor out = Tensor::empty(DType::F32, {n, nv * dv}), dout = dev->empty(DType::F32, {n, nv * dv});
    const DeltaSeq hs[] = {{0, n0, s0}, {n0, n1, s1}}, ds[] = {{0, n0, ds0}, {n0, n1, ds1}};
    gated_delta_rule(cx.cpu, hv[0], hv[1], hv[2], dk, dv, in.g, in.beta, hs, out);
    gated_delta_rule(cx.gpu, dv3[0], dv3[1], dv3[2], dk, dv, dg, dbeta, ds, dout);
    // the chunked CPU form rounds otherwise than the recurrent one: ~1e-6 on outputs of order 1
    const double tol = n0 > 32 ? 2e-5 : 1e-6;
    EXPECT_LE(max_diff(read(dev, dout), values(out)), tol) << n0 << "+" << n1;
    EXPECT_LE(max_diff(read(dev, ds0), values(s0)), tol) << n0;
    EXPECT_LE(max_diff(read(dev, ds1), values(s1)), tol) << n1;
    // sequence 0 again from the same start state: prefill in two chunks, then token by token, on the device
    Tensor start = host(DType::F32, {nv, dk, dv}, rng.floats(size_t(nv * dk * dv), -0.5f, 0.5f));
    Tensor one = on_device(dev, start), steps = on_device(dev, start);
    Tensor dout1 = dev->empty(DType::F32, {n, nv * dv}), dout2 = dev->empty(DType::F32, {n, nv * dv});
    const DeltaSeq all[] = {{0, n, one}};
    gated_delta_rule(cx.gpu, dv3[0], dv3[1], dv3[2], dk, dv, dg, dbeta, all, dout1);
    std::vector<std::pair<int64_t, int64_t>> parts = {{0, n0 / 2}, {n0 / 2, n0 - n0 / 2}};
    for (int64_t t = n0; t < n; ++t) parts.push_back({t, 1});
    for (auto [b, len] : parts) {
      const DeltaSeq p[] = {{b, len, steps}};
      gated_delta_rule(cx.gpu, dv3[0], dv3[1], dv3[2], dk, dv, dg, dbeta, p, dout2);
    }
    EXPECT_EQ(max_diff(read(dev, dout2), read(dev, dout1)), 0.0) << n;
    EXPECT_EQ(max_diff(read(dev, steps), read(dev, one)), 0.0) << n;
    // and the one pass against the CPU's one pass
    Tensor hs_one = Tensor::empty(DType::F32, {nv, dk, dv});
    std::memcpy(hs_one.data(), start.data(), start.nbytes());
    Tensor out1 = Tensor::empty(DType::F32, {n, nv * dv});
    const DeltaSeq hall[] = {{0, n, hs_one}};
    gated_delta_rule(cx.cpu, hv[0], hv[1], hv[2], dk, dv, in.g, in.beta, hall, out1);
    EXPECT_LE(max_diff(read(dev, dout1), values(out1)), n > 32 ? 2e-5 : 1e-6) << n;
    EXPECT_LE(max_diff(read(dev, one), values(hs_one)), n > 32 ? 2e-5 : 1e-6) << n;
  }
}

TEST(OpenclOps, AttentionWithSinks) {
  NEED_DEVICE();
  test::Rng rng(11);
  for (int window : {0, 3}) {
    Ctxs cx(dev);
    const int64_t n_head = 4, n_head_kv = 2, hd = 16, n_rows = 32;
    const std::vector<float> sinks = rng.floats(size_t(n_head), -2, 3);
    Tensor kc = Tensor::empty(DType::F32, {n_rows, n_head_kv, hd}), vc = Tensor::empty(DType::F32, kc.shape());
    Tensor dkc = dev->empty(DType::F32, kc.shape()), dvc = dev->empty(DType::F32, vc.shape());
    AttnParams ap{0.25f, 0.0f, window, false, sinks.data()};
    int32_t p0 = 0;
    for (int64_t n : {5, 1, 1}) {
      std::vector<int32_t> pos;
      for (int64_t i = 0; i < n; ++i) pos.push_back(p0 + int32_t(i));
      p0 += int32_t(n);
      Tensor q = host(DType::F32, {n, n_head, hd}, rng.floats(size_t(n * n_head * hd)));
      Tensor k = host(DType::F32, {n, n_head_kv, hd}, rng.floats(size_t(n * n_head_kv * hd)));
      Tensor v = host(DType::F32, {n, n_head_kv, hd}, rng.floats(size_t(n * n_head_kv * hd)));
      store_kv(cx.cpu, k, kc, pos);
      store_kv(cx.cpu, v, vc, pos);
      store_kv(cx.gpu, on_device(dev, k), dkc, pos);
      store_kv(cx.gpu, on_device(dev, v), dvc, pos);
      Tensor want = Tensor::empty(DType::F32, q.shape()), got = dev->empty(DType::F32, q.shape());
      attention(cx.cpu, q, kc, vc, pos, ap, want);
      attention(cx.gpu, on_device(dev, q), dkc, dvc, pos, ap, got);
      EXPECT_LE(max_diff(read(dev, got), values(want)), 2e-6) << "window " << window << " at " << p0;
      // the sinks matter: without them the output differs
      Tensor plain = Tensor::empty(DType::F32, q.shape());
      attention(cx.cpu, q, kc, vc, pos, AttnParams{0.25f, 0.0f, window}, plain);
      EXPECT_GT(max_diff(values(plain), values(want)), 1e-3);
    }
  }
}

// ---- errors ----
TEST(OpenclDevice, BadIndexIsOneClearError) {
  NEED_DEVICE();
  auto d = open_device("opencl:99");
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("no device opencl:99"), std::string::npos) << d.status().message();
  for (const char* bad : {"opencl:", "opencl:-1", "opencl:x", "openc", "gpu"}) {
    auto e = open_device(bad);
    EXPECT_FALSE(e.is_ok()) << bad;
  }
  auto cpu = open_device("cpu");
  ASSERT_TRUE(cpu.is_ok());
  EXPECT_EQ(cpu->get(), nullptr);
}

TEST(OpenclDevice, KernelBuildFailureIsOneClearError) {
  NEED_DEVICE();
  ::setenv("PIPIT_OPENCL_OPTIONS", "-cl-no-such-option", 1);
  auto d = open_device("opencl:0");
  ::unsetenv("PIPIT_OPENCL_OPTIONS");
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("[opencl] building kernels/"), std::string::npos) << d.status().message();
  EXPECT_NE(d.status().message().find("-cl-no-such-option"), std::string::npos) << d.status().message();
}

TEST(OpenclDevice, ListsDevices) {
  NEED_DEVICE();
  auto l = list_devices();
  ASSERT_GE(l.size(), 2u);
  EXPECT_EQ(l[1].rfind("opencl:0: ", 0), 0u) << l[1];
}

}  // namespace
}  // namespace pipit
