// GPT-OSS beyond the shared golden suite (golden_text_test.cpp runs gpt_oss, the bf16 checkpoint, at <= 1e-3):
// the MXFP4 checkpoint as shipped (*_blocks / *_scales) imported without widening — exact to the golden when its
// experts are widened to f32 afterwards (so the import's nibble order and scales are the HF ones), and within a
// stated bound on the default path, where the experts run as mxfp4 x int8 activations; bad MXFP4 inputs name what
// is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "convert/checkpoint.h"
#include "models/gpt_oss_import.h"
#include "format/safetensors.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/models/model_test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

constexpr double kTol = 1e-3;
// The mxfp4 x int8 path quantizes each expert input row to 8 bits per block of 32 (as llama.cpp does; the down
// projection's inputs reach ~50 after the clamped SwiGLU, so a block's step is ~0.2): measured max |logit - golden|
// 0.0723 on the golden prompt (largest logit 2.38); bound ~1.4x. Argmax must agree wherever the golden's top-1/top-2
// gap exceeds twice the bound.
constexpr double kMxfp4Int8Bound = 0.1;

struct Golden {
  SafetensorsFile f;
  std::vector<int32_t> ids(const std::string& n) const {
    Tensor t = *f.get(n);
    return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
  }
};
Golden golden(const char* file = "golden.safetensors") {
  return Golden{*SafetensorsFile::open(test::model_dir("gpt_oss_mxfp4") + "/" + file)};
}

// The mxfp4 checkpoint opened as the loader does, every mxfp4 tensor widened to f32 (exact: 2^(e-128) * small int).
std::map<std::string, Tensor> widened_tensors(int* n_mxfp4) {
  auto c = open_checkpoint(test::model_dir("gpt_oss_mxfp4"));
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  *n_mxfp4 = 0;
  for (auto& [name, t] : c->tensors) {
    if (t.dtype() != DType::MXFP4) continue;
    Tensor f = Tensor::empty(DType::F32, t.shape());
    ref_kernels().to_f32[int(DType::MXFP4)](t.data(), f.ptr<float>(), t.numel());
    t = f;
    ++*n_mxfp4;
  }
  return c->tensors;
}

TEST(GptOssMxfp4, ExpertsLoadAsMxfp4) {
  auto lm = load_model(test::model_dir("gpt_oss_mxfp4"));
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  for (const char* proj : {"gate_up_proj", "down_proj"}) {
    auto t = lm->weights->find(std::string("model.layers.3.mlp.experts.") + proj + ".weight");
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    // as they are, or as 16-row panels where this CPU has the panel kernel (the loader's choice, Kernels::pack_mxfp4)
    EXPECT_EQ(t->dtype(), kernels().pack_mxfp4 ? DType::MXFP4X16 : DType::MXFP4) << proj;
  }
  EXPECT_FALSE(lm->weights->has("model.layers.0.mlp.experts.gate_up_proj_blocks"));
}

TEST(GptOssMxfp4, WidenedExpertsMatchGolden) {
  int n = 0;
  MapWeightSource w(widened_tensors(&n));
  EXPECT_EQ(n, 8);  // 4 layers x (gate_up, down)
  const HfConfig cfg = *HfConfig::load(test::model_dir("gpt_oss_mxfp4") + "/config.json");
  auto m = create_model(cfg, w);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  Golden g = golden();
  auto ids = g.ids("input_ids");
  Session s(**m, SessionOptions{.n_threads = 2});
  auto r = s.eval(ids, true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  Tensor want = *g.f.get("logits");
  EXPECT_LE(test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs, kTol);

  // greedy with the KV cache: the golden ids
  const int64_t V = (*m)->info().n_vocab;
  auto want_ids = g.ids("greedy_ids");
  Session u(**m, SessionOptions{.n_threads = 2});
  auto o = u.eval(ids);
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  std::vector<int32_t> got;
  for (size_t step = 0; step < want_ids.size(); ++step) {
    int32_t next = argmax(std::span<const float>(o->ptr<float>(), size_t(V)));
    got.push_back(next);
    if (next != want_ids[step]) break;
    o = u.eval(std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(o.is_ok()) << o.status().message();
  }
  EXPECT_EQ(got, want_ids);

  // the batch prompts, chunked prefill across the sliding window's ring
  Golden b = golden("golden_batch.safetensors");
  for (int i = 0; i < 2; ++i) {
    auto bi = b.ids("input_ids_" + std::to_string(i));
    Tensor wl = *b.f.get("logits_" + std::to_string(i));
    Session sb(**m, SessionOptions{.n_threads = 2, .n_batch = 5});
    auto rb = sb.eval(bi, true);
    ASSERT_TRUE(rb.is_ok()) << rb.status().message();
    EXPECT_LE(test::max_abs_diff(rb->ptr<float>(), wl.ptr<float>(), wl.numel()).max_abs, kTol) << "prompt " << i;
  }
}

double top_gap(const float* l, int64_t V) {
  std::vector<float> v(l, l + V);
  std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
  return double(v[0]) - v[1];
}
int64_t argmax_of(const float* l, int64_t V) { return std::max_element(l, l + V) - l; }

// Default path (mxfp4 experts x int8 activations): bounded error on the prompt and along the golden greedy
// continuation (teacher-forced through the KV cache), clear argmaxes kept, and token by token equal to the full
// pass (the kernels are batch-invariant).
TEST(GptOssMxfp4, IntegerPathBounded) {
  auto lm = load_model(test::model_dir("gpt_oss_mxfp4"));
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  Golden g = golden();
  auto ids = g.ids("input_ids");
  const int64_t V = lm->model->info().n_vocab;
  Session s(*lm->model, SessionOptions{.n_threads = 2});
  auto r = s.eval(ids, true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const std::vector<float> full(r->ptr<float>(), r->ptr<float>() + r->numel());
  Tensor want = *g.f.get("logits");
  const double d = test::max_abs_diff(full.data(), want.ptr<float>(), want.numel()).max_abs;
  int clear = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    const float* w = want.ptr<float>() + t * size_t(V);
    if (top_gap(w, V) <= 2 * kMxfp4Int8Bound) continue;
    ++clear;
    EXPECT_EQ(argmax_of(full.data() + t * size_t(V), V), argmax_of(w, V)) << "prompt position " << t;
  }

  // the golden greedy continuation fed back token by token (teacher forcing): each step's logits within the bound
  auto want_ids = g.ids("greedy_ids");
  Tensor want_steps = *g.f.get("greedy_logits");
  Session u(*lm->model, SessionOptions{.n_threads = 2});
  auto o = u.eval(ids);
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  double dg = 0;
  for (size_t step = 0; step < want_ids.size(); ++step) {
    const float* w = want_steps.ptr<float>() + step * size_t(V);
    dg = std::max(dg, test::max_abs_diff(o->ptr<float>(), w, V).max_abs);
    if (top_gap(w, V) > 2 * kMxfp4Int8Bound) {
      ++clear;
      EXPECT_EQ(argmax_of(o->ptr<float>(), V), argmax_of(w, V)) << "greedy step " << step;
    }
    o = u.eval(std::span<const int32_t>(&want_ids[step], 1));
    ASSERT_TRUE(o.is_ok()) << o.status().message();
  }
  std::printf("[ measure  ] gpt_oss_mxfp4 int8 path: max |logit - golden| prompt %.5f, greedy steps %.5f (bound %.2f), "
              "%d clear argmaxes checked\n", d, dg, kMxfp4Int8Bound, clear);
  EXPECT_GT(d, 0.0);
  EXPECT_LE(d, kMxfp4Int8Bound);
  EXPECT_LE(dg, kMxfp4Int8Bound);
  EXPECT_GT(clear, 10);

  Session t(*lm->model, SessionOptions{.n_threads = 1});
  double worst = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto p = t.eval(std::span<const int32_t>(&ids[i], 1));
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    worst = std::max(worst, test::max_abs_diff(p->ptr<float>(), full.data() + i * size_t(V), V).max_abs);
  }
  EXPECT_LE(worst, 1e-5) << "token by token vs full pass";
}

// convert keeps mxfp4 experts as they are under every --quant (byte for byte what the import made); a .pipit of the
// source types gives the HF directory's logits bit for bit.
TEST(GptOssMxfp4, ConvertKeepsMxfp4) {
  test::ScratchDir d("gptoss");
  auto hf = open_checkpoint(test::model_dir("gpt_oss_mxfp4"));
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  const std::string name = "model.layers.1.mlp.experts.down_proj.weight";
  const Tensor& src = hf->tensors.at(name);
  for (const char* q : {"auto", "q8", "q4", "bf16"}) {
    const std::string out = d.path(std::string("m_") + q + ".pipit");
    test::convert_or_fail(test::model_dir("gpt_oss_mxfp4"), out, q);
    auto c = open_checkpoint(out);
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    const Tensor& t = c->tensors.at(name);
    EXPECT_EQ(t.dtype(), DType::MXFP4) << q;
    ASSERT_EQ(t.nbytes(), src.nbytes()) << q;
    EXPECT_EQ(std::memcmp(t.data(), src.data(), src.nbytes()), 0) << q;
    // the precise tensors of the recipe: router 16-bit, expert biases and sinks f32 (see convert/recipe.h)
    EXPECT_EQ(c->tensors.at("model.layers.1.mlp.router.weight").dtype(), DType::BF16) << q;
    EXPECT_EQ(c->tensors.at("model.layers.1.mlp.experts.down_proj_bias").dtype(),
              std::string(q) == "auto" ? DType::BF16 : DType::F32) << q;
  }
  auto ids = test::golden_ids("gpt_oss_mxfp4");
  LoadedModel a = test::load_or_fail(test::model_dir("gpt_oss_mxfp4"));
  LoadedModel b = test::load_or_fail(d.path("m_auto.pipit"));
  const auto la = test::all_logits(*a.model, ids), lb = test::all_logits(*b.model, ids);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0);
}

// q4 of the bf16 checkpoint stores its experts as mxfp4: exactly the shipped checkpoint's bytes.
TEST(GptOss, Q4ExpertsAreTheShippedMxfp4) {
  test::ScratchDir d("gptoss_q4");
  test::convert_or_fail(test::model_dir("gpt_oss"), d.path("q4.pipit"), "q4");
  auto q4 = open_checkpoint(d.path("q4.pipit"));
  auto hub = open_checkpoint(test::model_dir("gpt_oss_mxfp4"));
  ASSERT_TRUE(q4.is_ok() && hub.is_ok());
  for (const char* n : {"model.layers.0.mlp.experts.gate_up_proj.weight", "model.layers.3.mlp.experts.down_proj.weight"}) {
    const Tensor& a = q4->tensors.at(n);
    const Tensor& b = hub->tensors.at(n);
    EXPECT_EQ(a.dtype(), DType::MXFP4) << n;
    ASSERT_EQ(a.shape(), b.shape()) << n;
    std::vector<float> fa(size_t(a.numel())), fb(size_t(b.numel()));
    ref_kernels().to_f32[int(DType::MXFP4)](a.data(), fa.data(), a.numel());
    ref_kernels().to_f32[int(DType::MXFP4)](b.data(), fb.data(), b.numel());
    EXPECT_EQ(test::max_abs_diff(fa.data(), fb.data(), a.numel()).max_abs, 0.0) << n;
  }
  EXPECT_EQ(dtype_unpanel(q4->tensors.at("model.layers.0.self_attn.q_proj.weight").dtype()), DType::Q8_0);
  auto ids = test::golden_ids("gpt_oss");
  LoadedModel hf = test::load_or_fail(test::model_dir("gpt_oss"));
  LoadedModel lq = test::load_or_fail(d.path("q4.pipit"));
  LoadedModel mx = test::load_or_fail(test::model_dir("gpt_oss_mxfp4"));
  const auto want = test::all_logits(*hf.model, ids);
  std::printf("[ measure  ] gpt_oss q4 rel RMS %.5f, gpt_oss_mxfp4 int8 path rel RMS %.5f\n",
              test::rel_rms(test::all_logits(*lq.model, ids), want), test::rel_rms(test::all_logits(*mx.model, ids), want));
}

TEST(GptOssMxfp4, MissingScalesAreNamed) {
  auto c = open_checkpoint(test::model_dir("gpt_oss_mxfp4"));
  ASSERT_TRUE(c.is_ok());
  auto set = SafetensorsSet::open_dir(test::model_dir("gpt_oss_mxfp4"));
  ASSERT_TRUE(set.is_ok());
  Checkpoint raw;
  raw.config = c->config;
  raw.tensors = set->tensors();
  const std::string name = "model.layers.2.mlp.experts.down_proj_scales";
  ASSERT_EQ(raw.tensors.erase(name), 1u);
  Status st = import_gpt_oss_experts(raw);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
}

TEST(GptOssMxfp4, WrongScaleShapeIsNamed) {
  auto set = SafetensorsSet::open_dir(test::model_dir("gpt_oss_mxfp4"));
  ASSERT_TRUE(set.is_ok());
  Checkpoint raw;
  raw.config = {{"model_type", "gpt_oss"}};
  raw.tensors = set->tensors();
  const std::string name = "model.layers.1.mlp.experts.gate_up_proj_scales";
  raw.tensors[name] = raw.tensors[name].slice(1, 0, 100);
  Status st = import_gpt_oss_experts(raw);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
}

TEST(GptOssMxfp4, WrongExpertCountIsNamed) {
  for (const char* model : {"gpt_oss", "gpt_oss_mxfp4"}) {
    test::EditedCheckpoint ckpt(model, [](nlohmann::json& j) { j["num_local_experts"] = 5; });
    auto m = load_model(ckpt.dir());
    ASSERT_FALSE(m.is_ok()) << model;
    EXPECT_NE(m.status().message().find("num_local_experts is 5"), std::string::npos) << m.status().message();
  }
}

TEST(GptOss, UnknownLayerTypeIsNamed) {
  test::EditedCheckpoint ckpt("gpt_oss", [](nlohmann::json& j) { j["layer_types"][1] = "linear_attention"; });
  auto m = load_model(ckpt.dir());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("linear_attention"), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace pipit
