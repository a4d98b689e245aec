// GGUF architectures beyond llama / qwen2 / qwen3: gemma3, qwen3moe, smollm3 and qwen2vl (+ its mmproj vision file)
// written from the test checkpoints by gguf_arch_writer.h (llama.cpp's names, layouts and metadata) reproduce the
// goldens: text logits, and for Qwen2-VL / Qwen2.5-VL the image features and prefill logits of both case images,
// through `load_model(..., {.mmproj = ...})` as `pipit run --mmproj` loads them. Bad mmproj files give clear errors.
#include <gtest/gtest.h>

#include "convert/gguf_import.h"
#include "format/safetensors.h"
#include "models/vision/vision_model.h"
#include "runtime/multimodal.h"
#include "tests/unit/convert_test_util.h"
#include "tests/unit/gguf_arch_writer.h"

namespace pipit {
namespace {

constexpr double kTol = 1e-3;  // the f32 path's bound against the PyTorch goldens

std::vector<float> golden_logits(const std::string& model) {
  auto g = SafetensorsFile::open(test::model_dir(model) + "/golden.safetensors");
  EXPECT_TRUE(g.is_ok());
  Tensor t = *g->get("logits");
  return {t.ptr<float>(), t.ptr<float>() + t.numel()};
}

TEST(GgufArch, TextModelsReproduceGoldens) {
  test::ScratchDir d("gguf_arch");
  for (const char* m : {"gemma3_text", "qwen3_moe", "smollm3"}) {
    const std::string out = d.path(std::string(m) + ".gguf");
    test::hf_to_gguf_arch(test::model_dir(m), out);
    LoadedModel gg = test::load_or_fail(out);
    ASSERT_TRUE(gg.model) << m;
    EXPECT_EQ(gg.config.model_type(), m == std::string("gemma3_text") ? "gemma3_text" : m);
    const auto ids = test::golden_ids(m);
    const auto got = test::all_logits(*gg.model, ids);
    const auto want = golden_logits(m);
    ASSERT_EQ(got.size(), want.size()) << m;
    const double vs_golden = test::max_abs_diff(got.data(), want.data(), int64_t(want.size())).max_abs;
    EXPECT_LE(vs_golden, kTol) << m;
    // and the same numbers as the HF checkpoint (the GGUF holds the same values; Gemma's norms come back exactly)
    LoadedModel hf = test::load_or_fail(test::model_dir(m));
    const auto ref = test::all_logits(*hf.model, ids);
    EXPECT_EQ(test::max_abs_diff(got.data(), ref.data(), int64_t(ref.size())).max_abs, 0.0) << m;
    std::printf("[gguf %s] max |logits - golden| = %.3g\n", m, vs_golden);
  }
}

// What the importer derives for settings llama.cpp keeps in its graph code rather than the metadata.
TEST(GgufArch, LlamaCppDefaultsWhenMetadataIsSilent) {
  test::ScratchDir d("gguf_arch");
  test::GgufWriter g;
  g.str("general.architecture", "gemma3");
  for (auto [k, v] : std::vector<std::pair<const char*, uint32_t>>{{"embedding_length", 64}, {"block_count", 12},
                                                                     {"feed_forward_length", 128},
                                                                     {"attention.head_count", 4},
                                                                     {"attention.key_length", 32},
                                                                     {"attention.value_length", 32},
                                                                     {"rope.dimension_count", 32},
                                                                     {"attention.sliding_window", 512}})
    g.u32(std::string("gemma3.") + k, v);
  g.tensor("token_embd.weight", 0, {64, 8}, std::string(64 * 8 * 4, '\0'));
  g.write(d.path("g.gguf"));
  auto c = open_checkpoint(d.path("g.gguf"));
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const auto& types = c->config["layer_types"];
  ASSERT_EQ(types.size(), 12u);
  for (int il = 0; il < 12; ++il)  // pattern 6: five sliding layers, then a global one
    EXPECT_EQ(types[size_t(il)], il % 6 == 5 ? "full_attention" : "sliding_attention") << il;
  EXPECT_EQ(c->config["query_pre_attn_scalar"].get<double>(), 32.0);
  EXPECT_EQ(c->config["rope_local_base_freq"].get<double>(), 10000.0);
  EXPECT_EQ(c->config["sliding_window"].get<int64_t>(), 512);
}

class GgufVL : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVL, MmprojReproducesGoldens) {
  const std::string m = GetParam(), dir = test::model_dir(m);
  test::ScratchDir d("gguf_vl");
  test::hf_to_gguf_arch(dir, d.path("text.gguf"));
  test::hf_to_mmproj(dir, d.path("mmproj.gguf"));

  // the language model alone is a Qwen2 (text positions turn every M-RoPE stream alike): the same text logits as
  // the HF checkpoint's
  {
    LoadedModel text = test::load_or_fail(d.path("text.gguf"));
    EXPECT_EQ(text.model->vision(), nullptr);
    LoadedModel hf = test::load_or_fail(dir);
    const std::vector<int32_t> ids = {1001, 39, 413, 990, 380, 235, 86, 5, 77, 1002};
    const auto a = test::all_logits(*text.model, ids), b = test::all_logits(*hf.model, ids);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(test::max_abs_diff(a.data(), b.data(), int64_t(a.size())).max_abs, 0.0);
  }

  auto lm = load_model(d.path("text.gguf"), LoadOptions{.mmproj = d.path("mmproj.gguf")});
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  ASSERT_NE(lm->model->vision(), nullptr);
  EXPECT_EQ(lm->model->info().arch, m);
  auto golden = SafetensorsFile::open(dir + "/golden.safetensors");
  ASSERT_TRUE(golden.is_ok());
  ThreadPool pool(2);
  for (const char* cs : {"img_100x75", "img_300x200"}) {
    const std::string c = cs;
    Tensor ids_t = *golden->get(c + ".input_ids_unexpanded");
    std::vector<int32_t> ids(ids_t.ptr<int32_t>(), ids_t.ptr<int32_t>() + ids_t.numel());
    auto p = prepare_multimodal_prompt(*lm, ids, {dir + "/" + c + ".png"}, {}, pool);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    Tensor want_ids = *golden->get(c + ".input_ids");
    ASSERT_EQ(int64_t(p->tokens.size()), want_ids.numel()) << c;  // the same image token count: same resize
    Tensor ve = *golden->get(c + ".vision_embeds");
    ASSERT_EQ(p->embd.numel(), ve.numel()) << c;
    const double d_vis = test::max_abs_diff(p->embd.ptr<float>(), ve.ptr<float>(), ve.numel()).max_abs;
    EXPECT_LE(d_vis, kTol) << c << " vision_embeds";
    Session s(*lm->model, SessionOptions{.n_ctx = int(p->tokens.size()) + 8, .n_threads = 2});
    auto r = s.eval(*p, /*all_logits=*/true);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    Tensor want = *golden->get(c + ".logits");
    ASSERT_EQ(r->numel(), want.numel());
    const double d_log = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs;
    EXPECT_LE(d_log, kTol) << c << " logits";
    std::printf("[gguf %s %s] vision_embeds %.3g, logits %.3g\n", m.c_str(), cs, d_vis, d_log);
  }
}

INSTANTIATE_TEST_SUITE_P(Qwen, GgufVL, ::testing::Values("qwen2_vl", "qwen2_5_vl"));

void expect_error(const Status& st, const std::string& part) {
  ASSERT_FALSE(st.is_ok()) << "expected an error containing '" << part << "'";
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

TEST(GgufArch, MmprojErrors) {
  test::ScratchDir d("gguf_vl");
  const std::string dir = test::model_dir("qwen2_vl");
  test::hf_to_gguf_arch(dir, d.path("text.gguf"));
  test::hf_to_mmproj(dir, d.path("mmproj.gguf"));
  // an mmproj with a language model of another arch
  test::hf_to_gguf(test::model_dir("qwen3"), d.path("qwen3.gguf"));
  expect_error(load_model(d.path("qwen3.gguf"), LoadOptions{.mmproj = d.path("mmproj.gguf")}).status(),
               "needs a qwen2vl language model");
  // a projector pipit has no tower for
  test::GgufWriter g;
  g.str("general.architecture", "clip");
  g.str("clip.projector_type", "pixtral");
  g.write(d.path("pixtral.gguf"));
  expect_error(load_model(d.path("text.gguf"), LoadOptions{.mmproj = d.path("pixtral.gguf")}).status(),
               "projector type 'pixtral' is not supported");
  // a text GGUF given as the mmproj
  expect_error(load_model(d.path("text.gguf"), LoadOptions{.mmproj = d.path("text.gguf")}).status(),
               "not an mmproj file");
  // an HF directory with --mmproj
  expect_error(load_model(dir, LoadOptions{.mmproj = d.path("mmproj.gguf")}).status(), "goes with a .gguf model");
  // an mmproj missing a tensor names it
  auto mm = GgufFile::open(d.path("mmproj.gguf"));
  ASSERT_TRUE(mm.is_ok());
  auto text = GgufFile::open(d.path("text.gguf"));
  ASSERT_TRUE(text.is_ok());
  test::GgufWriter h;
  for (const auto& [k, v] : mm->metadata()) {
    if (v.type == GgufType::kString) h.str(k, v.s);
    else if (v.type == GgufType::kArray) h.f32s(k, std::vector<float>{0.5f, 0.5f, 0.5f});
    else if (v.type == GgufType::kBool) h.boolean(k, v.as_int() != 0);
    else if (v.is_int()) h.u32(k, uint32_t(v.as_int()));
    else h.f32(k, float(v.as_double()));
  }
  h.write(d.path("empty_mm.gguf"));
  expect_error(load_model(d.path("text.gguf"), LoadOptions{.mmproj = d.path("empty_mm.gguf")}).status(),
               "missing tensor 'v.patch_embd.weight'");
}

}  // namespace
}  // namespace pipit
