// `--precision fast` (LoadOptions::precision_fast): f16 / bf16 files load their matrices as bf16dot and every
// matmul with them rounds x to bf16 (AVX512-BF16 vdpbf16ps). Checked per text architecture on its golden, from a
// bf16 and an f16 file made by the converter:
//  - the matrices really are bf16dot (else nothing here would be measured);
//  - the logits' relative RMS error against the f32 golden stays within kFastBound (about 1.5x the worst measured;
//    the printed figures are what set it), and the last position's greedy token is the exact path's wherever the
//    exact path's top two logits are further apart than the fast path's largest deviation;
//  - decoding token by token equals the full pass (bf16dot matmuls are batch-invariant like every other). Qwen3.5
//    gets 1e-2 instead of 1e-3: its prefill (chunked delta rule) and decode (recurrent step) round differently in
//    f32 already, and an f32 difference of one ulp can move x across a bf16 rounding boundary (2^-9 relative);
//    measured up to 3.3e-3 there.
// Skipped where the CPU has no bf16 dot products (the loader then keeps the exact path).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "backends/cpu/kernels.h"
#include "runtime/loader.h"
#include "runtime/session.h"
#include "tests/test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

// measured 2026-12-04 (avx512): 0.0029 (smollm3) to 0.0093 (gpt_oss), the same for bf16 and f16 files
constexpr double kFastBound = 0.015;

class PrecisionFast : public ::testing::TestWithParam<std::string> {};

TEST_P(PrecisionFast, Bf16DotWithinBound) {
  if (!kernels().bf16_dot) GTEST_SKIP() << "no bf16 dot products on this CPU (" << kernels().name << ")";
  const std::string dir = test::model_dir(GetParam());
  const std::vector<int32_t> ids = test::golden_ids(GetParam());
  auto gf = SafetensorsFile::open(dir + "/golden.safetensors");
  ASSERT_TRUE(gf.is_ok()) << gf.status().message();
  Tensor gl = *gf->get("logits");
  const std::vector<float> golden(gl.ptr<float>(), gl.ptr<float>() + gl.numel());
  test::ScratchDir d("precision_fast");
  for (const char* quant : {"bf16", "f16"}) {
    const std::string file = d.path(std::string(quant) + ".pipit");
    test::convert_or_fail(dir, file, quant);
    LoadedModel exact = test::load_or_fail(file);
    auto fr = load_model(file, LoadOptions{.precision_fast = true});
    ASSERT_TRUE(fr.is_ok()) << fr.status().message();
    LoadedModel fast = std::move(fr).value();
    int64_t n_dot = 0;
    for (const auto& [name, t] : static_cast<const MapWeightSource&>(*fast.weights).tensors())
      n_dot += t.dtype() == DType::BF16DOT;
    ASSERT_GT(n_dot, 0) << quant << ": no matrix loaded as bf16dot";

    const std::vector<float> le = test::all_logits(*exact.model, ids), lf = test::all_logits(*fast.model, ids);
    ASSERT_EQ(lf.size(), golden.size());
    const double err = test::rel_rms(lf, golden), err_exact = test::rel_rms(le, golden);
    std::printf("[ measure  ] %s %s: precision fast relative RMS logit error %.5f (exact from the same file %.5f), "
                "%lld bf16dot matrices\n", GetParam().c_str(), quant, err, err_exact, static_cast<long long>(n_dot));
    EXPECT_LE(err, kFastBound) << quant;
    EXPECT_GT(err, err_exact) << quant << ": rounding x to bf16 changed nothing?";

    const int64_t V = fast.model->info().n_vocab, last = int64_t(ids.size()) - 1;
    const float* e = le.data() + last * V;
    const float* f = lf.data() + last * V;
    double dev = 0;
    for (int64_t v = 0; v < V; ++v) dev = std::max(dev, std::fabs(double(e[v]) - f[v]));
    std::vector<float> top(e, e + V);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
    if (top[0] - top[1] > 2 * dev) {
      EXPECT_EQ(std::max_element(f, f + V) - f, std::max_element(e, e + V) - e) << quant << ": greedy token changed";
    }

    Session s(*fast.model, SessionOptions{.n_ctx = int(ids.size()) + 8, .n_threads = 2});
    for (size_t i = 0; i < ids.size(); ++i) {
      auto r = s.eval(std::span<const int32_t>(&ids[i], 1));
      ASSERT_TRUE(r.is_ok()) << r.status().message();
      EXPECT_LE(test::max_abs_diff(r->ptr<float>(), lf.data() + i * size_t(V), V).max_abs,
                GetParam() == "qwen3_5" ? 1e-2 : 1e-3)
          << quant << " position " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Text, PrecisionFast, ::testing::Values("llama", "qwen2", "qwen3", "gemma3_text", "smollm3",
                                                           "qwen3_moe", "minicpm", "qwen3_5", "gpt_oss"));

}  // namespace
}  // namespace pipit
