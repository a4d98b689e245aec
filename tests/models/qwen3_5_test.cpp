// Qwen3.5 (Gated DeltaNet + gated attention hybrid) beyond the shared golden suite: the 150-token prompt that
// crosses the 64-token chunks of the delta rule (also prefilled in pieces that continue a state), the per-layer
// trace and recurrent state, several sequences in one forward, truncate() through state snapshots, and the errors
// of a state that cannot continue. Goldens: ../shared/testdata/models/qwen3_5.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "format/safetensors.h"
#include "runtime/loader.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/models/model_test_util.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

constexpr double kTol = 1e-3;

class Qwen35 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::load_suite_model("qwen3_5", &lm_); }
  static void TearDownTestSuite() { test::free_suite_model(&lm_); }
  static SafetensorsFile golden(const char* name) {
    auto f = SafetensorsFile::open(test::model_dir("qwen3_5") + "/" + name);
    EXPECT_TRUE(f.is_ok()) << f.status().message();
    return std::move(f).value();
  }
  static std::vector<int32_t> ids(const SafetensorsFile& f, const std::string& name) {
    Tensor t = *f.get(name);
    return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
  }
  Model& model() { return *lm_->model; }
  int64_t V() { return lm_->model->info().n_vocab; }
  static LoadedModel* lm_;
};
LoadedModel* Qwen35::lm_ = nullptr;

// 150 tokens: chunks of 64, 64, 22 inside one forward (n_batch 512), and prefill pieces of 50 / 7 tokens that each
// continue the state of the previous piece (chunks no longer aligned to 64); then 16 greedy decode steps.
TEST_F(Qwen35, GoldenLongAcrossChunks) {
  auto g = golden("golden_long.safetensors");
  auto prompt = ids(g, "input_ids");
  Tensor want = *g.get("logits");
  auto want_ids = ids(g, "greedy_ids");
  Tensor want_greedy = *g.get("greedy_logits");
  for (int n_batch : {512, 50, 7}) {
    Session s(model(), SessionOptions{.n_threads = 2, .n_batch = n_batch});
    auto r = s.eval(prompt, true);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    auto d = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel());
    std::printf("[ measure  ] golden_long n_batch %d: max |logit diff| %.3g\n", n_batch, d.max_abs);
    EXPECT_LE(d.max_abs, kTol) << "n_batch " << n_batch << " worst at position " << d.worst / V();
    // greedy from the state the prefill left
    std::vector<float> last(r->ptr<float>() + (prompt.size() - 1) * size_t(V()), r->ptr<float>() + r->numel());
    std::vector<int32_t> got;
    double worst = 0;
    for (size_t step = 0; step < want_ids.size(); ++step) {
      worst = std::max(worst, test::max_abs_diff(last.data(), want_greedy.ptr<float>() + step * V(), V()).max_abs);
      const int32_t next = argmax(std::span<const float>(last));
      got.push_back(next);
      if (next != want_ids[step]) break;
      auto st = s.eval(std::span<const int32_t>(&next, 1));
      ASSERT_TRUE(st.is_ok()) << st.status().message();
      last.assign(st->ptr<float>(), st->ptr<float>() + V());
    }
    EXPECT_EQ(got, want_ids) << "n_batch " << n_batch;
    EXPECT_LE(worst, kTol) << "n_batch " << n_batch;
  }
}

// Residual stream after every layer, and every linear-attention layer's conv window and delta-rule state after
// the prefill (HF layout: conv_state [1, conv_dim, K], recurrent_state [1, v_heads, dk, dv]).
TEST_F(Qwen35, TraceResidualsAndRecurrentState) {
  auto g = golden("golden_trace.safetensors");
  auto prompt = ids(g, "input_ids");
  Session s(model(), SessionOptions{.n_threads = 2});
  std::map<int, std::vector<float>> l_out;
  s.ctx().on_tensor = [&](const std::string& name, int layer, const Tensor& t) {
    if (name == "l_out") l_out[layer].assign(t.ptr<float>(), t.ptr<float>() + t.numel());
  };
  ASSERT_TRUE(s.eval(prompt).is_ok());
  s.ctx().on_tensor = nullptr;
  const int n_layer = int(model().info().n_layer);
  ASSERT_EQ(int(l_out.size()), n_layer);
  for (int il = 0; il < n_layer; ++il) {
    Tensor want = *g.get("layer." + std::to_string(il));
    ASSERT_EQ(int64_t(l_out[il].size()), want.numel());
    const double d = test::max_abs_diff(l_out[il].data(), want.ptr<float>(), want.numel()).max_abs;
    EXPECT_LE(d, 1e-4) << "residual after layer " << il;
    const KvCache& kv = s.cache();
    if (!kv.is_recurrent(il)) {
      EXPECT_FALSE(g.get("conv_state." + std::to_string(il)).is_ok()) << "layer " << il << " is full attention";
      continue;
    }
    Tensor conv = kv.state(il, 0, 0), rec = kv.state(il, 0, 1);  // [K, C], [nv, dk, dv]
    Tensor want_conv = *g.get("conv_state." + std::to_string(il));
    Tensor want_rec = *g.get("recurrent_state." + std::to_string(il));
    const int64_t C = want_conv.dim(1), K = want_conv.dim(2);
    ASSERT_EQ(conv.shape(), std::vector<int64_t>({K, C}));
    double dc = 0;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < K; ++j)
        dc = std::max(dc, double(std::fabs(conv.ptr<float>()[j * C + c] - want_conv.ptr<float>()[c * K + j])));
    EXPECT_LE(dc, 1e-5) << "conv state of layer " << il;
    ASSERT_EQ(rec.numel(), want_rec.numel());
    const double dr = test::max_abs_diff(rec.ptr<float>(), want_rec.ptr<float>(), rec.numel()).max_abs;
    EXPECT_LE(dr, 1e-4) << "delta-rule state of layer " << il;
    std::printf("[ measure  ] layer %d: residual %.3g, conv state %.3g, recurrent state %.3g\n", il, d, dc, dr);
  }
}

// Both golden_batch prompts in one forward over a 2-slot cache (one sequence's chunk next to the other's), all
// logits rows == each prompt alone (golden); then a decode step of one beside a prefill chunk of the other.
TEST_F(Qwen35, SequencesInOneForward) {
  auto g = golden("golden_batch.safetensors");
  auto p0 = ids(g, "input_ids_0"), p1 = ids(g, "input_ids_1");
  Tensor w0 = *g.get("logits_0"), w1 = *g.get("logits_1");
  KvCache kv(model().info().kv, 2, 64, DType::F32);
  ThreadPool pool(2);
  Arena arena(size_t(1) << 22);
  Ctx ctx{&arena, &pool, &kernels()};
  // step 1: all of p0 (slot 1) + the first 12 tokens of p1 (slot 0)
  Batch b;
  auto add = [&](const std::vector<int32_t>& p, int64_t from, int64_t n, int slot) {
    b.seqs.push_back({slot, b.n_tokens(), n});
    for (int64_t i = from; i < from + n; ++i) {
      b.logits_rows.push_back(b.n_tokens());
      b.tokens.push_back(p[size_t(i)]);
      b.pos.push_back(int32_t(i));
    }
  };
  add(p0, 0, int64_t(p0.size()), 1);
  add(p1, 0, 12, 0);
  Tensor logits;
  ASSERT_TRUE(model().forward(ctx, b, kv, &logits).is_ok());
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>(), w0.ptr<float>(), w0.numel()).max_abs, kTol);
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>() + w0.numel(), w1.ptr<float>(), 12 * V()).max_abs, kTol);
  EXPECT_EQ(kv.state_pos(1), int(p0.size()));
  EXPECT_EQ(kv.state_pos(0), 12);
  // step 2: the rest of p1 continues slot 0's state; slot 1 is left alone
  b = Batch();
  add(p1, 12, int64_t(p1.size()) - 12, 0);
  arena.reset();
  ASSERT_TRUE(model().forward(ctx, b, kv, &logits).is_ok());
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>(), w1.ptr<float>() + 12 * V(), (int64_t(p1.size()) - 12) * V()).max_abs,
            kTol);
  EXPECT_EQ(kv.state_pos(1), int(p0.size()));
  // a batch that does not continue a slot's state is refused, naming the positions
  b = Batch();
  add(p1, 3, 2, 1);
  arena.reset();
  Status st = model().forward(ctx, b, kv, &logits);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("holds 7 tokens"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("position 3"), std::string::npos) << st.message();
}

// truncate(): the recurrent state goes back to the latest snapshot at or before n (taken at the end of each
// multi-token chunk), and the tokens after it are evaluated again — logits equal the golden full pass.
TEST_F(Qwen35, TruncateRewindsToSnapshots) {
  auto g = golden("golden.safetensors");
  auto prompt = ids(g, "input_ids");  // 24 tokens
  Tensor want = *g.get("logits");
  Session s(model(), SessionOptions{.n_threads = 2, .n_batch = 8, .n_state_snapshots = 2});
  ASSERT_TRUE(s.eval(prompt).is_ok());
  EXPECT_EQ(s.state_snapshots(), std::vector<int>({16, 24}));  // chunks end at 8, 16, 24; the latest 2 kept
  auto check_from = [&](int n) {  // re-evaluate prompt[n_past..] and compare its logits with the golden rows
    const int from = s.n_past();
    auto r = s.eval(std::span<const int32_t>(prompt).subspan(size_t(from)), true);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_LE(test::max_abs_diff(r->ptr<float>(), want.ptr<float>() + from * V(), (24 - from) * V()).max_abs, kTol)
        << "after truncate(" << n << ") -> " << from;
  };
  s.truncate(20);
  EXPECT_EQ(s.n_past(), 16);  // snapshot at 16
  EXPECT_EQ(s.state_snapshots(), std::vector<int>({16}));
  check_from(20);
  // decode steps take no snapshot: cutting one back goes to the end of the prompt
  const int32_t next = 7;
  ASSERT_TRUE(s.eval(std::span<const int32_t>(&next, 1)).is_ok());
  ASSERT_TRUE(s.eval(std::span<const int32_t>(&next, 1)).is_ok());
  EXPECT_EQ(s.n_past(), 26);
  s.truncate(25);
  EXPECT_EQ(s.n_past(), 24);
  s.truncate(24);  // where the state is: nothing to do
  EXPECT_EQ(s.n_past(), 24);
  s.truncate(10);  // before every snapshot: from the start
  EXPECT_EQ(s.n_past(), 0);
  check_from(10);
}

TEST_F(Qwen35, StateSizedFromConfig) {
  const KvCacheSpec& spec = model().info().kv;
  ASSERT_EQ(spec.state.size(), 4u);
  EXPECT_EQ(spec.state[0], StateShapes({{4, 256}, {4, 32, 32}}));  // conv window [K, 2*2*32 + 4*32], [v_heads, dk, dv]
  EXPECT_TRUE(spec.state[3].empty());                              // full attention: K/V rows
  KvCache kv(spec, 3, 100, DType::F32);
  EXPECT_EQ(kv.n_rows(0), 0);
  EXPECT_EQ(kv.n_rows(3), 100);
  EXPECT_EQ(kv.state_bytes_per_slot(), size_t(3 * (4 * 256 + 4 * 32 * 32) * 4));
  EXPECT_EQ(kv.bytes(), size_t(3 * 2 * 100 * 2 * 64 * 4) + 3 * kv.state_bytes_per_slot());
}

TEST(Qwen35Config, UnknownLayerTypeNamed) {
  test::EditedCheckpoint ck("qwen3_5", [](nlohmann::json& c) { c["layer_types"][1] = "mamba2"; });
  auto m = load_model(ck.dir());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("layer_types[1] is 'mamba2'"), std::string::npos) << m.status().message();
}

// The multimodal layout (model_type qwen3_5, fields under text_config) with the default layer pattern (every 4th
// layer full) gives the same logits.
TEST(Qwen35Config, NestedTextConfigAndDefaultLayerTypes) {
  test::EditedCheckpoint ck("qwen3_5", [](nlohmann::json& c) {
    nlohmann::json tc = c;
    tc.erase("layer_types");
    tc.erase("tie_word_embeddings");
    c = {{"model_type", "qwen3_5"}, {"tie_word_embeddings", true}, {"text_config", tc}};
  });
  auto m = load_model(ck.dir());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto f = SafetensorsFile::open(test::model_dir("qwen3_5") + "/golden.safetensors");
  ASSERT_TRUE(f.is_ok());
  Tensor in = *f->get("input_ids"), want = *f->get("logits");
  std::vector<int32_t> prompt(in.ptr<int32_t>(), in.ptr<int32_t>() + in.numel());
  Session s(*m->model, SessionOptions{.n_threads = 2});
  auto r = s.eval(prompt, true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_LE(test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs, kTol);
}

}  // namespace
}  // namespace pipit
