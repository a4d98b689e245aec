// Gemma 3 past its sliding window: the tiny checkpoint with sliding_window = 4 (and soft-capping on) against a
// PyTorch golden (tests/data/make_gemma3_long_golden.py), with the sliding layers' KV cache as a ring of
// window + n_batch rows; plus the ring against a full cache, rewinding, and the ring-aware attention kernel.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/dtype.h"
#include "format/safetensors.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/models/model_test_util.h"

namespace pipit {
namespace {

constexpr double kTol = 1e-3;

const std::string kLongDir = std::string(PIPIT_SOURCE_DIR) + "/tests/data/gemma3_long";

struct LongGolden {
  SafetensorsFile f = *SafetensorsFile::open(kLongDir + "/golden.safetensors");
  std::vector<int32_t> ids(const char* n) const {
    Tensor t = *f.get(n);
    return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
  }
  const float* logits(const char* n) const { return f.get(n)->ptr<float>(); }
};

class Gemma3Long : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = load_model(ckpt_.dir());
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    lm_ = std::move(m).value();
    V_ = lm_.model->info().n_vocab;
  }
  test::EditedCheckpoint ckpt_{"gemma3_text", [](nlohmann::json&) {}, kLongDir + "/config.json"};
  LoadedModel lm_;
  LongGolden g_;
  int64_t V_ = 0;
};

TEST_F(Gemma3Long, KvCacheRingSizes) {
  const KvCacheSpec& spec = lm_.model->info().kv;
  ASSERT_EQ(spec.window, (std::vector<int>{4, 0, 4, 0}));
  KvCache kv(spec, 1, 128, DType::F32, /*n_batch=*/3);
  EXPECT_EQ(kv.n_rows(0), 7);  // window + n_batch
  EXPECT_EQ(kv.n_rows(1), 128);
  EXPECT_TRUE(kv.is_ring(2));
  EXPECT_FALSE(kv.is_ring(3));
  EXPECT_EQ(kv.max_chunk(), 4);
  KvCache full(spec, 1, 128, DType::F32);  // no n_batch: every layer full
  EXPECT_EQ(full.n_rows(0), 128);
  EXPECT_LT(kv.bytes(), full.bytes());
}

// Prefill in chunks of every size (1 = token by token) through a ring of window + n_batch rows: the logits of every
// prompt position equal the golden's full pass, and the ring run equals a run with a full-size cache.
TEST_F(Gemma3Long, RingPrefillMatchesGolden) {
  auto ids = g_.ids("input_ids");
  const float* want = g_.logits("logits");
  // n_batch 64 >= n_ctx - window: no ring at all (the full cache, window applied by the mask only)
  Session full(*lm_.model, SessionOptions{.n_ctx = 64, .n_threads = 1, .n_batch = 64});
  auto rf = full.eval(ids, true);
  ASSERT_TRUE(rf.is_ok()) << rf.status().message();
  std::vector<float> ref(rf->ptr<float>(), rf->ptr<float>() + rf->numel());
  EXPECT_LE(test::max_abs_diff(ref.data(), want, int64_t(ref.size())).max_abs, kTol);
  for (int nb : {1, 2, 3, 4, 5, 7, 16}) {
    Session s(*lm_.model, SessionOptions{.n_ctx = 64, .n_threads = 1, .n_batch = nb});
    EXPECT_LT(s.kv_bytes(), full.kv_bytes());
    auto r = s.eval(ids, true);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    auto d = test::max_abs_diff(r->ptr<float>(), want, int64_t(ref.size()));
    EXPECT_LE(d.max_abs, kTol) << "n_batch " << nb << ", position " << d.worst / V_;
    EXPECT_LE(test::max_abs_diff(r->ptr<float>(), ref.data(), int64_t(ref.size())).max_abs, 1e-5) << "n_batch " << nb;
  }
}

// The same ring with an f16 KV cache: within f16 rounding of the golden.
TEST_F(Gemma3Long, RingWithF16Cache) {
  auto ids = g_.ids("input_ids");
  Session s(*lm_.model, SessionOptions{.n_ctx = 64, .n_threads = 1, .n_batch = 3, .kv_dtype = DType::F16});
  auto r = s.eval(ids, true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_LE(test::max_abs_diff(r->ptr<float>(), g_.logits("logits"), r->numel()).max_abs, 1e-2);
}

// Decode one token at a time (a ring of window + 1 rows) well past the window: greedy ids and logits as the golden.
TEST_F(Gemma3Long, GreedyTokenByTokenPastWindow) {
  auto ids = g_.ids("input_ids");
  auto want_ids = g_.ids("greedy_ids");
  Session s(*lm_.model, SessionOptions{.n_threads = 1, .n_batch = 1});
  auto r = s.eval(ids);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::vector<int32_t> got;
  double worst = 0;
  for (size_t step = 0; step < want_ids.size(); ++step) {
    std::span<const float> l(r->ptr<float>(), size_t(V_));
    worst = std::max(worst, test::max_abs_diff(l.data(), g_.logits("greedy_logits") + step * V_, V_).max_abs);
    got.push_back(argmax(l));
    if (got.back() != want_ids[step]) break;
    r = s.eval(std::span<const int32_t>(&got.back(), 1));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
  }
  EXPECT_EQ(got, want_ids);
  EXPECT_LE(worst, kTol);
}

// Cutting a sequence back: within reach of the ring the session continues, beyond it the session starts over.
TEST_F(Gemma3Long, TruncateWithinRing) {
  auto ids = g_.ids("input_ids");
  const float* want = g_.logits("logits");
  Session s(*lm_.model, SessionOptions{.n_ctx = 64, .n_threads = 1, .n_batch = 4});  // ring of 8 rows
  ASSERT_TRUE(s.eval(ids).is_ok());
  s.truncate(44);  // the ring holds positions 40..47; position 44 needs 41..43
  ASSERT_EQ(s.n_past(), 44);
  auto r = s.eval(std::span<const int32_t>(ids).subspan(44), true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_LE(test::max_abs_diff(r->ptr<float>(), want + 44 * V_, 4 * V_).max_abs, kTol);
  s.truncate(20);  // long overwritten
  EXPECT_EQ(s.n_past(), 0);
}

// The dispatched attention kernel follows AttnRowArgs::ring like the reference (keys wrapping around the ring).
TEST(AttnRing, DispatchedKernelMatchesRef) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (DType dt : {DType::F32, DType::F16}) {
    for (int64_t hd : {32, 40, 64}) {
      const int64_t rows = 13, n_head_kv = 2;
      std::vector<float> q(static_cast<size_t>(hd));
      for (auto& x : q) x = nd(rng);
      Tensor k = Tensor::empty(dt, {rows, n_head_kv, hd}), v = Tensor::empty(dt, {rows, n_head_kv, hd});
      std::vector<float> tmp(static_cast<size_t>(rows * n_head_kv * hd));
      for (Tensor* t : {&k, &v}) {
        for (auto& x : tmp) x = nd(rng);
        ref_kernels().from_f32[int(dt)](tmp.data(), t->data(), int64_t(tmp.size()));
      }
      for (auto [k0, n] : {std::pair<int64_t, int64_t>{9, 11}, {12, 13}, {1, 12}, {5, 9}}) {
        std::vector<float> out_ref(static_cast<size_t>(hd)), out(out_ref);
        std::vector<float> scratch(static_cast<size_t>(attn_scratch_floats(1, rows, hd)));
        AttnRowArgs a;
        a.q = q.data();
        a.k = k.data() + hd * dtype_elem_stride(dt);  // kv head 1
        a.v = v.data() + hd * dtype_elem_stride(dt);
        a.kv_stride = k.stride(0);
        a.scratch = scratch.data();
        a.head_dim = hd;
        a.k0 = k0;
        a.k1 = k0 + n;
        a.ring = a.k1 > rows ? rows : 0;
        a.scale = 0.2f;
        a.softcap = 0.0f;
        a.out = out_ref.data();
        ref_kernels().attn_row[int(dt)](a);
        a.out = out.data();
        kernels().attn_row[int(dt)](a);
        EXPECT_LE(test::max_abs_diff(out.data(), out_ref.data(), hd).max_abs, 1e-5)
            << kernels().name << " " << dtype_name(dt) << " head_dim " << hd << " keys " << k0 << "+" << n;
        // the wrapped range equals the same keys laid out contiguously
        if (a.ring) {
          const int64_t esz = dtype_elem_stride(dt), row = k.stride(0);
          std::vector<uint8_t> kc(size_t(n * row)), vc(size_t(n * row));
          for (int64_t j = 0; j < n; ++j) {
            const int64_t r = (k0 + j) % rows;
            std::memcpy(kc.data() + j * row, k.data() + r * row, size_t(row));
            std::memcpy(vc.data() + j * row, v.data() + r * row, size_t(row));
          }
          AttnRowArgs c = a;
          c.k = kc.data() + hd * esz;
          c.v = vc.data() + hd * esz;
          c.k0 = 0;
          c.k1 = n;
          c.ring = 0;
          std::vector<float> out_lin(out_ref.size());
          c.out = out_lin.data();
          ref_kernels().attn_row[int(dt)](c);
          EXPECT_LE(test::max_abs_diff(out_lin.data(), out_ref.data(), hd).max_abs, 1e-6);
        }
      }
    }
  }
}

}  // namespace
}  // namespace pipit
