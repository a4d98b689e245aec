// Gemma 4 text decoder against the PyTorch goldens of ../shared/testdata/models/gemma4 (reference/gemma4.py): the
// text case's prefill logits, per-layer inputs (PLE) and residuals, greedy ids with the KV cache (KV-shared layers
// read their source layer's cache; the 24-token prompt and 32 steps run past the 16-token sliding window), token by
// token == full pass; the text part of the image / audio cases with the golden soft tokens spliced in; q8 / q4 / f16
// .pipit files; the flat gemma4_text config; media placeholders without features looked up as pad.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "core/storage.h"
#include "runtime/multimodal.h"
#include "runtime/sampler.h"
#include "tests/models/model_test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

constexpr double kTol = 1e-3;        // logits (issue 32: <= 1e-3 with f32 KV)
constexpr double kTraceTol = 1e-3;   // per_layer_inputs and residuals (measured ~1e-6, see the printed lines)

class Gemma4 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::load_suite_model("gemma4", &lm_, &g_); }
  static void TearDownTestSuite() { test::free_suite_model(&lm_, &g_); }
  static Tensor get(const std::string& name) { return test::golden_tensor(*g_, name); }
  static std::vector<int32_t> ids(const std::string& name) {
    Tensor t = get(name);
    return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
  }
  Model& model() { return *lm_->model; }
  int64_t V() { return lm_->model->info().n_vocab; }

  // Greedy decoding from the logits row `last` of a session: ids and the worst logit error against greedy_logits.
  struct Greedy {
    std::vector<int32_t> ids;
    double worst = 0;
  };
  Greedy greedy(Session& s, std::vector<float> last, const std::string& c) {
    auto want_ids = ids(c + ".greedy_ids");
    Tensor want = get(c + ".greedy_logits");
    Greedy g;
    for (size_t step = 0; step < want_ids.size(); ++step) {
      g.worst = std::max(g.worst, test::max_abs_diff(last.data(), want.ptr<float>() + step * V(), V()).max_abs);
      const int32_t next = argmax(std::span<const float>(last));
      g.ids.push_back(next);
      if (next != want_ids[step]) break;
      auto r = s.eval(std::span<const int32_t>(&next, 1));
      EXPECT_TRUE(r.is_ok()) << r.status().message();
      if (!r.is_ok()) break;
      last.assign(r->ptr<float>(), r->ptr<float>() + V());
    }
    return g;
  }

  static LoadedModel* lm_;
  static SafetensorsFile* g_;
};
LoadedModel* Gemma4::lm_ = nullptr;
SafetensorsFile* Gemma4::g_ = nullptr;

// One cache layer per non-shared layer (5 of 10), the sliding ones as rings; the model's facts.
TEST_F(Gemma4, KvCacheLayout) {
  const ModelInfo& info = model().info();
  EXPECT_EQ(info.arch, "gemma4");
  EXPECT_EQ(info.n_layer, 10);
  EXPECT_EQ(info.kv.n_layer, 5);
  EXPECT_EQ(info.kv.head_dim, 32);  // the widest (global_head_dim); sliding layers use 16 of it
  EXPECT_EQ(info.kv.window, (std::vector<int>{16, 16, 16, 16, 0}));
  // eos and <turn|> (config), <|tool_response> (generation_config)
  EXPECT_EQ(info.eos_ids, (std::vector<int32_t>{1, 106, 507}));
  EXPECT_EQ(info.bos_id, 2);
  KvCache kv(info.kv, 1, 128, DType::F32, /*n_batch=*/4);
  EXPECT_EQ(kv.n_rows(0), 20);
  EXPECT_EQ(kv.n_rows(4), 128);
}

// Prefill: logits, the PLE inputs of every layer and the residual after every layer.
TEST_F(Gemma4, TextPrefillLogitsAndTrace) {
  auto prompt = ids("text.input_ids");
  Session s(model(), SessionOptions{.n_threads = 2, .kv_dtype = DType::F32});
  std::map<std::string, std::vector<float>> seen;
  s.ctx().on_tensor = [&](const std::string& name, int layer, const Tensor& t) {
    if (name == "l_out") seen["llm.layer." + std::to_string(layer)].assign(t.ptr<float>(), t.ptr<float>() + t.numel());
    if (name == "per_layer_inputs") seen["llm.per_layer_inputs"].assign(t.ptr<float>(), t.ptr<float>() + t.numel());
    if (name == "embd") seen["inputs_embeds"].assign(t.ptr<float>(), t.ptr<float>() + t.numel());
  };
  auto r = s.eval(prompt, /*all_logits=*/true);
  s.ctx().on_tensor = nullptr;
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  Tensor want = get("text.logits");
  ASSERT_EQ(r->numel(), want.numel());
  auto d = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel());
  std::printf("[ measure  ] text logits: max abs %.3g\n", d.max_abs);
  EXPECT_LE(d.max_abs, kTol) << "worst at position " << d.worst / V();
  std::vector<std::string> names = {"inputs_embeds", "llm.per_layer_inputs"};
  for (int il = 0; il < 10; ++il) names.push_back("llm.layer." + std::to_string(il));
  for (const auto& n : names) {  // in forward order: the first one off names where it went wrong
    Tensor w = get("text." + n);
    ASSERT_EQ(int64_t(seen[n].size()), w.numel()) << n;
    const double e = test::max_abs_diff(seen[n].data(), w.ptr<float>(), w.numel()).max_abs;
    std::printf("[ measure  ] text %s: max abs %.3g\n", n.c_str(), e);
    EXPECT_LE(e, kTraceTol) << n;
  }
}

// Greedy continuation with the KV cache (positions 24..55: the sliding rings wrap, shared layers read them).
TEST_F(Gemma4, TextGreedyWithKvCache) {
  for (int n_batch : {512, 5}) {  // 5: the prompt in chunks through rings of 16 + 5 rows
    Session s(model(), SessionOptions{.n_threads = 2, .n_batch = n_batch, .kv_dtype = DType::F32});
    auto r = s.eval(ids("text.input_ids"));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    Greedy g = greedy(s, {r->ptr<float>(), r->ptr<float>() + V()}, "text");
    std::printf("[ measure  ] text greedy (n_batch %d): max abs logit error %.3g\n", n_batch, g.worst);
    EXPECT_EQ(g.ids, ids("text.greedy_ids")) << "n_batch " << n_batch;
    EXPECT_LE(g.worst, kTol) << "n_batch " << n_batch;
  }
}

TEST_F(Gemma4, TextTokenByTokenEqualsFullPass) {
  auto prompt = ids("text.input_ids");
  Session full(model(), SessionOptions{.n_threads = 1, .kv_dtype = DType::F32});
  auto rf = full.eval(prompt, true);
  ASSERT_TRUE(rf.is_ok()) << rf.status().message();
  Session s(model(), SessionOptions{.n_threads = 1, .n_batch = 1, .kv_dtype = DType::F32});
  Tensor want = get("text.logits");
  double worst_golden = 0, worst_full = 0;
  for (size_t t = 0; t < prompt.size(); ++t) {
    auto r = s.eval(std::span<const int32_t>(&prompt[t], 1));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    const float* w = want.ptr<float>() + t * V();
    worst_golden = std::max(worst_golden, test::max_abs_diff(r->ptr<float>(), w, V()).max_abs);
    worst_full = std::max(worst_full, test::max_abs_diff(r->ptr<float>(), rf->ptr<float>() + t * V(), V()).max_abs);
  }
  std::printf("[ measure  ] token by token: max abs vs golden %.3g, vs full pass %.3g\n", worst_golden, worst_full);
  EXPECT_LE(worst_golden, kTol);
  EXPECT_LE(worst_full, 1e-5);
}

// Two sequences in one forward over a 2-slot cache with sliding rings (n_batch 24: rings of 40 rows): the prompt in
// slot 1 beside its first 10 tokens in slot 0, then slot 0's other 14 tokens beside slot 1's first decode step.
// Every row equals the golden's (KV-shared layers read their own slot's source rows).
TEST_F(Gemma4, SequencesInOneForward) {
  auto p = ids("text.input_ids");
  auto greedy_ids = ids("text.greedy_ids");
  Tensor want = get("text.logits"), want_greedy = get("text.greedy_logits");
  KvCache kv(model().info().kv, 2, 64, DType::F32, /*n_batch=*/24);
  ASSERT_TRUE(kv.is_ring(0));
  ThreadPool pool(2);
  Arena arena(size_t(1) << 22);
  Ctx ctx{&arena, &pool, &kernels()};
  Batch b;
  auto add = [&](std::span<const int32_t> toks, int32_t pos0, int slot) {
    b.seqs.push_back({slot, b.n_tokens(), int64_t(toks.size())});
    for (size_t i = 0; i < toks.size(); ++i) {
      b.logits_rows.push_back(b.n_tokens());
      b.tokens.push_back(toks[i]);
      b.pos.push_back(pos0 + int32_t(i));
    }
  };
  add(p, 0, 1);
  add(std::span<const int32_t>(p).first(10), 0, 0);
  Tensor logits;
  ASSERT_TRUE(model().forward(ctx, b, kv, &logits).is_ok());
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>(), want.ptr<float>(), want.numel()).max_abs, kTol);
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>() + want.numel(), want.ptr<float>(), 10 * V()).max_abs, kTol);
  b = Batch();
  arena.reset();
  add(std::span<const int32_t>(p).subspan(10), 10, 0);
  add(std::span<const int32_t>(greedy_ids).first(1), int32_t(p.size()), 1);
  ASSERT_TRUE(model().forward(ctx, b, kv, &logits).is_ok());
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>(), want.ptr<float>() + 10 * V(), 14 * V()).max_abs, kTol);
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>() + 14 * V(), want_greedy.ptr<float>() + V(), V()).max_abs, kTol);
}

// The decoder part of the multimodal cases: the golden soft tokens (vision_embeds / audio_embeds, what the towers
// would give) spliced in at the placeholder rows through the Batch's embedding rows; the model looks those rows up
// as pad for PLE. Prefill logits and greedy ids with the cache.
TEST_F(Gemma4, MultimodalCasesWithGoldenSoftTokens) {
  constexpr int32_t kImage = 502, kAudio = 503;  // image_token_id, audio_token_id of the test config
  for (const std::string c : {"image", "audio", "image_audio"}) {
    MultimodalPrompt mm;
    mm.tokens = ids(c + ".input_ids");
    Tensor vis = g_->get(c + ".vision_embeds").is_ok() ? get(c + ".vision_embeds") : Tensor();
    Tensor aud = g_->get(c + ".audio_embeds").is_ok() ? get(c + ".audio_embeds") : Tensor();
    const int64_t n_vis = vis.defined() ? vis.dim(0) : 0, n_aud = aud.defined() ? aud.dim(0) : 0;
    const int64_t E = model().info().n_embd;
    mm.embd = Tensor::empty(DType::F32, {n_vis + n_aud, E});  // image rows, then audio rows
    for (int64_t i = 0; i < n_vis * E; ++i) mm.embd.ptr<float>()[i] = vis.ptr<float>()[i];
    for (int64_t i = 0; i < n_aud * E; ++i) mm.embd.ptr<float>()[n_vis * E + i] = aud.ptr<float>()[i];
    int32_t next_vis = 0, next_aud = int32_t(n_vis);
    for (int32_t id : mm.tokens)
      mm.embd_row.push_back(id == kImage ? next_vis++ : id == kAudio ? next_aud++ : -1);
    ASSERT_EQ(next_vis, n_vis) << c;
    ASSERT_EQ(next_aud, n_vis + n_aud) << c;
    Session s(model(), SessionOptions{.n_threads = 2, .kv_dtype = DType::F32});
    std::vector<float> embd;
    s.ctx().on_tensor = [&](const std::string& name, int, const Tensor& t) {
      if (name == "embd") embd.assign(t.ptr<float>(), t.ptr<float>() + t.numel());
    };
    auto r = s.eval(mm, /*all_logits=*/true);
    s.ctx().on_tensor = nullptr;
    ASSERT_TRUE(r.is_ok()) << c << ": " << r.status().message();
    Tensor want_e = get(c + ".inputs_embeds"), want = get(c + ".logits");
    ASSERT_EQ(int64_t(embd.size()), want_e.numel());
    const double de = test::max_abs_diff(embd.data(), want_e.ptr<float>(), want_e.numel()).max_abs;
    ASSERT_EQ(r->numel(), want.numel());
    auto d = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel());
    const int64_t T = int64_t(mm.tokens.size());
    Greedy g = greedy(s, {r->ptr<float>() + (T - 1) * V(), r->ptr<float>() + T * V()}, c);
    std::printf("[ measure  ] %s: inputs_embeds max abs %.3g, logits max abs %.3g, greedy logits %.3g\n", c.c_str(),
                de, d.max_abs, g.worst);
    EXPECT_LE(de, 1e-6) << c;
    EXPECT_LE(d.max_abs, kTol) << c << " worst at position " << d.worst / V();
    EXPECT_EQ(g.ids, ids(c + ".greedy_ids")) << c;
    EXPECT_LE(g.worst, kTol) << c;
  }
}

// A placeholder with no features behind it (text-only use, or a placeholder the model generated) is looked up as
// pad, as HF's Gemma4Model does: the same logits as the prompt with pad there.
TEST_F(Gemma4, MediaPlaceholderWithoutFeaturesIsPad) {
  std::vector<int32_t> with = {2, 105, 135, 423, 502, 336, 503, 406}, pad = with;
  pad[4] = pad[6] = 0;
  Session a(model(), SessionOptions{.n_threads = 1}), b(model(), SessionOptions{.n_threads = 1});
  auto ra = a.eval(with, true);
  auto rb = b.eval(pad, true);
  ASSERT_TRUE(ra.is_ok()) << ra.status().message();
  ASSERT_TRUE(rb.is_ok()) << rb.status().message();
  EXPECT_EQ(test::max_abs_diff(ra->ptr<float>(), rb->ptr<float>(), rb->numel()).max_abs, 0.0);
}

// The same decoder from a flat gemma4_text config (Gemma4ForCausalLM; the weights keep their model.language_model.
// names here): identical logits.
TEST_F(Gemma4, FlatTextConfig) {
  std::ifstream in(test::model_dir("gemma4") + "/config.json");
  const nlohmann::json text = nlohmann::json::parse(in)["text_config"];
  test::EditedCheckpoint ckpt("gemma4", [&](nlohmann::json& j) { j = text; });
  auto m = load_model(ckpt.dir());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->model->info().arch, "gemma4_text");
  Session s(*m->model, SessionOptions{.n_threads = 2, .kv_dtype = DType::F32});
  auto r = s.eval(ids("text.input_ids"), true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  Tensor want = get("text.logits");
  EXPECT_LE(test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs, kTol);
}

// Config values that do not fit the checkpoint or the limits are load errors naming the field or the tensor.
TEST_F(Gemma4, BadConfigsAreLoadErrors) {
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* expect;  // in the message
  };
  const Case cases[] = {
      {"global_head_dim", int64_t(1) << 40, "global_head_dim"},
      {"hidden_size_per_layer_input", 32, "embed_tokens_per_layer.weight"},
      {"num_kv_shared_layers", 11, "num_kv_shared_layers"},
      {"enable_moe_block", true, "num_experts"},  // the MoE block needs its sizes
      {"use_bidirectional_attention", "all", "use_bidirectional_attention"},
      {"num_global_key_value_heads", 3, "num_key_value_heads"},  // 4 heads are not a multiple of 3 (k_eq_v on below)
      {"layer_types", nlohmann::json::array({"sliding_attention"}), "layer_types"},
  };
  for (const auto& c : cases) {
    test::EditedCheckpoint ckpt("gemma4", [&](nlohmann::json& j) {
      j["text_config"][c.key] = c.value;
      j["text_config"]["attention_k_eq_v"] = std::string(c.key) == "num_global_key_value_heads";
    });
    auto m = load_model(ckpt.dir());
    ASSERT_FALSE(m.is_ok()) << c.key;
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos) << c.key << ": " << m.status().message();
  }
}

// attention_k_eq_v (31B / 26B-A4B; no golden covers it): a full layer without v_proj takes its values from the raw
// k projection (HF Gemma4TextAttention: value_states = key_states before k_norm, then v_norm). Checked by
// equivalence on this checkpoint: (A) k_eq_v with layer 4's v_proj dropped == (B) the plain model with layer 4's
// v_proj set to its k_proj, exactly; (C) num_global_key_value_heads = 2 with layer 4's k_proj rows given twice (two
// identical KV heads, rows wider than the sliding layers' in the cache) == (A) exactly.
TEST_F(Gemma4, KEqVLayersTakeValuesFromTheKeyProjection) {
  auto src = SafetensorsFile::open(test::model_dir("gemma4") + "/model.safetensors");
  ASSERT_TRUE(src.is_ok()) << src.status().message();
  const std::string lp = "model.language_model.layers.4.self_attn.";
  std::ifstream in(test::model_dir("gemma4") + "/config.json");
  const nlohmann::json cfg = nlohmann::json::parse(in);
  test::ScratchDir d("gemma4_keqv");
  auto make = [&](const std::string& name, bool k_eq_v, int kv_global, bool v_from_k) {
    const std::string dir = d.path(name);
    std::filesystem::create_directories(dir);
    nlohmann::json c = cfg;
    c["text_config"]["attention_k_eq_v"] = k_eq_v;
    c["text_config"]["num_global_key_value_heads"] = kv_global;
    std::ofstream(dir + "/config.json") << c.dump(2);
    std::vector<std::pair<std::string, Tensor>> ts;
    Tensor k = *src->get(lp + "k_proj.weight");  // [32, 64] bf16
    Tensor k2 = Tensor::empty(k.dtype(), {2 * k.dim(0), k.dim(1)});
    std::memcpy(k2.data(), k.data(), k.nbytes());
    std::memcpy(k2.data() + k.nbytes(), k.data(), k.nbytes());
    for (const auto& [n, t] : src->tensors()) {
      if (n.rfind("model.language_model.", 0) != 0) continue;  // the towers are not read
      if (n == lp + "v_proj.weight" && k_eq_v) continue;
      Tensor use = t;
      if (n == lp + "v_proj.weight" && v_from_k) use = k;
      if (n == lp + "k_proj.weight" && kv_global == 2) use = k2;
      ts.push_back({n, use});
    }
    EXPECT_TRUE(write_safetensors(dir + "/model.safetensors", ts).is_ok());
    auto m = load_model(dir);
    EXPECT_TRUE(m.is_ok()) << name << ": " << m.status().message();
    return std::move(m).value();
  };
  auto logits = [&](LoadedModel& lm) {
    Session s(*lm.model, SessionOptions{.n_threads = 1, .n_batch = 7});  // chunks through the rings
    auto r = s.eval(ids("text.input_ids"), true);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return std::vector<float>(r->ptr<float>(), r->ptr<float>() + r->numel());
  };
  LoadedModel a = make("a", true, 1, false), b = make("b", false, 1, true), c = make("c", true, 2, false);
  EXPECT_EQ(c.model->info().kv.n_head_kv, 1);
  EXPECT_EQ(c.model->info().kv.head_dim, 64);  // 2 x 32 (full) > 1 x 16 (sliding)
  const auto la = logits(a), lb = logits(b), lc = logits(c);
  Tensor golden = get("text.logits");
  ASSERT_EQ(int64_t(la.size()), golden.numel());
  EXPECT_EQ(test::max_abs_diff(la.data(), lb.data(), golden.numel()).max_abs, 0.0);
  EXPECT_EQ(test::max_abs_diff(la.data(), lc.data(), golden.numel()).max_abs, 0.0);
  EXPECT_GT(test::max_abs_diff(la.data(), golden.ptr<float>(), golden.numel()).max_abs, 1e-2);  // v_proj mattered
}

// enable_moe_block (26B-A4B; no golden covers it): the test checkpoint with a synthetic expert block added to every
// layer (4 experts, top 2, width 32; weights from a fixed seed). Checked: it loads and runs, token by token == full
// pass (single-token dispatch), the block changes the logits, and with every expert identical the routing cannot
// matter (the kept weights are renormalised to 1): logits equal for two different routers.
TEST_F(Gemma4, MoeBlockShapesAndRoutingInvariance) {
  auto src = SafetensorsFile::open(test::model_dir("gemma4") + "/model.safetensors");
  ASSERT_TRUE(src.is_ok()) << src.status().message();
  std::ifstream in(test::model_dir("gemma4") + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  const int64_t E = 4, K = 2, I = 32, H = 64;
  cfg["text_config"]["enable_moe_block"] = true;
  cfg["text_config"]["num_experts"] = E;
  cfg["text_config"]["top_k_experts"] = K;
  cfg["text_config"]["moe_intermediate_size"] = I;
  test::ScratchDir d("gemma4_moe");
  auto make = [&](const std::string& name, uint32_t router_seed, bool same_experts) {
    std::mt19937 rng(7), rng_router(router_seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto rnd = [&](std::vector<int64_t> shape, float sd, float mean, std::mt19937& g) {
      Tensor t = Tensor::empty(DType::F32, shape);
      for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = mean + sd * nd(g);
      return t;
    };
    std::vector<std::pair<std::string, Tensor>> ts;
    for (const auto& [n, t] : src->tensors())
      if (n.rfind("model.language_model.", 0) == 0) ts.push_back({n, t});
    for (int il = 0; il < 10; ++il) {
      const std::string p = "model.language_model.layers." + std::to_string(il) + ".";
      Tensor gu = rnd({E, 2 * I, H}, 0.1f, 0.0f, rng), dn = rnd({E, H, I}, 0.1f, 0.0f, rng);
      if (same_experts)
        for (int64_t e = 1; e < E; ++e) {
          std::memcpy(gu.select(0, e).data(), gu.select(0, 0).data(), gu.select(0, 0).nbytes());
          std::memcpy(dn.select(0, e).data(), dn.select(0, 0).data(), dn.select(0, 0).nbytes());
        }
      ts.push_back({p + "router.proj.weight", rnd({E, H}, 0.3f, 0.0f, rng_router)});
      ts.push_back({p + "router.scale", rnd({H}, 0.1f, 1.0f, rng)});
      ts.push_back({p + "router.per_expert_scale", rnd({E}, same_experts ? 0.0f : 0.1f, 1.0f, rng)});
      ts.push_back({p + "experts.gate_up_proj", gu});
      ts.push_back({p + "experts.down_proj", dn});
      for (const char* nrm :
           {"post_feedforward_layernorm_1", "pre_feedforward_layernorm_2", "post_feedforward_layernorm_2"})
        ts.push_back({p + nrm + ".weight", rnd({H}, 0.1f, 1.0f, rng)});
    }
    const std::string dir = d.path(name);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << cfg.dump(2);
    EXPECT_TRUE(write_safetensors(dir + "/model.safetensors", ts).is_ok());
    auto m = load_model(dir);
    EXPECT_TRUE(m.is_ok()) << name << ": " << m.status().message();
    return std::move(m).value();
  };
  auto prompt = ids("text.input_ids");
  auto logits = [&](LoadedModel& lm, int n_batch) {
    Session s(*lm.model, SessionOptions{.n_threads = 2, .n_batch = n_batch});
    std::vector<float> out;
    for (size_t b = 0; b < prompt.size(); b += size_t(n_batch)) {
      const size_t n = std::min(prompt.size() - b, size_t(n_batch));
      auto r = s.eval(std::span<const int32_t>(prompt).subspan(b, n), true);
      EXPECT_TRUE(r.is_ok()) << r.status().message();
      if (!r.is_ok()) return out;
      out.insert(out.end(), r->ptr<float>(), r->ptr<float>() + r->numel());
    }
    return out;
  };
  LoadedModel a = make("a", 11, false);
  const auto full = logits(a, 512), one = logits(a, 1);
  Tensor golden = get("text.logits");
  ASSERT_EQ(int64_t(full.size()), golden.numel());
  for (float v : full) ASSERT_TRUE(std::isfinite(v));
  EXPECT_LE(test::max_abs_diff(one.data(), full.data(), golden.numel()).max_abs, 1e-5);
  EXPECT_GT(test::max_abs_diff(full.data(), golden.ptr<float>(), golden.numel()).max_abs, 1e-2);
  LoadedModel s1 = make("s1", 11, true), s2 = make("s2", 12, true);
  const auto l1 = logits(s1, 512), l2 = logits(s2, 512);
  EXPECT_LE(test::max_abs_diff(l1.data(), l2.data(), golden.numel()).max_abs, 1e-4);
  // q8 / q4 files: the stacked experts become q8_0 / mxfp4, the router keeps its dtype, the attention is q8_0 under q4
  // (Gemma 4's recipe rules, models/gemma4.cpp). Bounds ~1.4x the measured 0.222 / 0.442: this random router is
  // nearly uniform, so the dense layers' rounding flips top-k choices (with router and experts at f32 the q8 error
  // is the same, 0.219).
  for (const char* q : {"q8", "q4"}) {
    const std::string out = d.path(std::string("moe_") + q + ".pipit");
    test::convert_or_fail(d.path("a"), out, q);
    LoadedModel lq = test::load_or_fail(out);
    auto gu = lq.weights->find("model.language_model.layers.0.experts.gate_up_proj");
    ASSERT_TRUE(gu.is_ok());
    const auto lqv = logits(lq, 512);
    const double e = test::rel_rms(lqv, full);
    std::printf("[ measure  ] MoE %s (experts %s): relative RMS logits vs f32 %.3g\n", q,
                std::string(dtype_name(gu->dtype())).c_str(), e);
    EXPECT_LE(e, std::string(q) == "q8" ? 0.3 : 0.62) << q;
  }
}

// pipit convert to f16 / q8 / q4 (tied embedding, PLE table [512, 160] quantized like any matrix and read by rows):
// the file loads and runs; relative RMS of the text case's prefill logits against the f32 golden within the bound
// (~1.5x what was measured at the commit that added this: f16 9.6e-7 (bf16 -> f16 is exact but for subnormals),
// q8 0.0432, q4 0.375), and argmax agreement on the prompt positions whose golden top-2 margin is above 0.05: all
// 19 under f16 and q8; q4 measured 10 of 19 on this random-weight model. No single tensor dominates the error: kept
// at f16 one kind at a time, the q4 relative RMS is 0.27 (attention), 0.31 (MLPs), 0.36 (PLE gates), 0.37 (PLE table,
// which is quantized like any matrix and only read by rows), 0.38 (PLE model projection, output head).
struct QuantCase {
  const char* quant;
  double rel_rms;
  double min_agree;        // fraction of the clear positions whose argmax must agree
  const char* file_dtype;  // the PLE table's
};
const QuantCase kQuantCases[] = {{"f16", 1e-4, 1.0, "f16"}, {"q8", 0.065, 1.0, "q8_0"}, {"q4", 0.56, 0.4, "q4_0"}};

TEST_F(Gemma4, QuantizedFilesWithinBounds) {
  test::ScratchDir d("gemma4_quant");
  auto prompt = ids("text.input_ids");
  Tensor want_t = get("text.logits");
  const std::vector<float> want(want_t.ptr<float>(), want_t.ptr<float>() + want_t.numel());
  for (const auto& q : kQuantCases) {
    const std::string out = d.path(std::string(q.quant) + ".pipit");
    test::convert_or_fail(test::model_dir("gemma4"), out, q.quant);
    LoadedModel lq = test::load_or_fail(out);
    ASSERT_TRUE(lq.model) << q.quant;
    // the PLE table and the (unused) audio tower stay in the file mapping in their file dtype
    // (models/mapped_weights.h); the vision tower is read like any weight
    auto ple = lq.weights->find("model.language_model.embed_tokens_per_layer.weight");
    ASSERT_TRUE(ple.is_ok()) << ple.status().message();
    EXPECT_EQ(dtype_name(ple->dtype()), q.file_dtype) << q.quant;
    EXPECT_NE(dynamic_cast<const MmapStorage*>(ple->storage().get()), nullptr) << q.quant;
    auto tower = lq.weights->find("model.audio_tower.layers.0.feed_forward1.ffw_layer_1.linear.weight");
    ASSERT_TRUE(tower.is_ok()) << tower.status().message();
    EXPECT_NE(dynamic_cast<const MmapStorage*>(tower->storage().get()), nullptr) << q.quant;
    EXPECT_FALSE(dtype_is_panel(tower->dtype())) << q.quant;
    Session s(*lq.model, SessionOptions{.n_threads = 2});
    auto r = s.eval(prompt, true);
    ASSERT_TRUE(r.is_ok()) << q.quant << ": " << r.status().message();
    const std::vector<float> got(r->ptr<float>(), r->ptr<float>() + r->numel());
    ASSERT_EQ(got.size(), want.size());
    int clear = 0, agree = 0;
    for (size_t t = 0; t < prompt.size(); ++t) {
      std::vector<float> row(want.begin() + long(t * V()), want.begin() + long((t + 1) * V()));
      const int32_t top = argmax(std::span<const float>(row));
      float second = -1e30f;
      for (int64_t v = 0; v < V(); ++v)
        if (v != top) second = std::max(second, row[size_t(v)]);
      if (row[size_t(top)] - second <= 0.05f) continue;
      ++clear;
      agree += argmax(std::span<const float>(got.data() + t * V(), size_t(V()))) == top;
    }
    const double e = test::rel_rms(got, want);
    std::printf("[ measure  ] %s: relative RMS logits %.3g (bound %.3g), argmax agrees on %d of %d clear positions\n",
                q.quant, e, q.rel_rms, agree, clear);
    EXPECT_LE(e, q.rel_rms) << q.quant;
    EXPECT_GT(e, 0.0) << q.quant;
    EXPECT_GE(agree, int(q.min_agree * clear + 0.5)) << q.quant;
  }
}

// --target x86 stores q4/q8 matrices as 16-row panels, but not the PLE table (read by rows) nor the towers: the
// same logits as the generic file.
TEST_F(Gemma4, PanelTargetKeepsRowTablesPlain) {
  test::ScratchDir d("gemma4_target");
  std::vector<std::vector<float>> got;
  for (const char* target : {"generic", "x86"}) {
    ConvertOptions o;
    o.output = d.path(std::string(target) + ".pipit");
    o.quant = "q4";
    o.target = target;
    o.n_threads = 2;
    o.progress = false;
    auto r = convert_file(test::model_dir("gemma4"), o);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    LoadedModel lm = test::load_or_fail(o.output);
    auto ple = lm.weights->find("model.language_model.embed_tokens_per_layer.weight");
    ASSERT_TRUE(ple.is_ok());
    EXPECT_EQ(dtype_name(ple->dtype()), "q4_0") << target;
    Session s(*lm.model, SessionOptions{.n_threads = 2});
    auto l = s.eval(ids("text.input_ids"), true);
    ASSERT_TRUE(l.is_ok()) << l.status().message();
    got.emplace_back(l->ptr<float>(), l->ptr<float>() + l->numel());
  }
  EXPECT_EQ(test::max_abs_diff(got[0].data(), got[1].data(), int64_t(got[0].size())).max_abs, 0.0);
}

}  // namespace
}  // namespace pipit
