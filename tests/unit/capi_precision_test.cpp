// The C API's precision option (pipit_model_options::precision, as the CLI's --precision): see the test's comment.
// Skipped where the CPU has no bf16 dot products (both values then load the exact path).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "backends/cpu/kernels.h"
#include "include/pipit/pipit.h"
#include "runtime/loader.h"
#include "runtime/session.h"
#include "tests/test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

// The C API's pipit_model_options::precision reaches the loader: greedy generation through the C API with "fast"
// and with "exact" gives, token for token, the greedy continuation of the C++ path loaded with and without
// precision_fast; the two paths' sequences must differ (so that the test could not pass with the option ignored:
// the random-weight llama checkpoint, with stories260k's tokenizer of the same 512 ids beside it, has logits close
// enough for bf16 rounding to change a greedy choice; stories260k itself gives the same 48 tokens either way). A
// value other than exact / fast is refused by name.
TEST(PrecisionFastCapi, OptionSelectsThePath) {
  if (!kernels().bf16_dot) GTEST_SKIP() << "no bf16 dot products on this CPU (" << kernels().name << ")";
  namespace fs = std::filesystem;
  test::ScratchDir d("precision_fast_capi");
  const std::string hf = d.path("hf"), ll = test::model_dir("llama"), st = test::model_dir("stories260k");
  fs::create_directories(hf);
  for (const char* f : {"config.json", "model.safetensors"}) fs::create_symlink(ll + "/" + f, hf + "/" + f);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::create_symlink(st + "/" + f, hf + "/" + f);
  const std::string file = d.path("bf16.pipit");
  test::convert_or_fail(hf, file, "bf16");
  constexpr int kTokens = 48;
  const char* prompt = "Once upon a time";

  auto capi = [&](const char* precision, std::vector<int32_t>* prompt_ids) {
    std::vector<int32_t> got;
    pipit_model_options mo{0, nullptr, precision};
    pipit_model* m = nullptr;
    EXPECT_EQ(pipit_model_load(file.c_str(), &mo, &m), PIPIT_OK) << pipit_last_error();
    if (!m) return got;
    int32_t ids[64];
    size_t n = 0;
    EXPECT_EQ(pipit_tokenize(m, prompt, std::strlen(prompt), 1, ids, 64, &n), PIPIT_OK) << pipit_last_error();
    prompt_ids->assign(ids, ids + n);
    pipit_session* s = nullptr;
    pipit_session_options so;
    pipit_session_options_default(&so);
    so.n_threads = 2;
    so.kv_type = PIPIT_KV_F32;
    EXPECT_EQ(pipit_session_create(m, &so, &s), PIPIT_OK) << pipit_last_error();
    pipit_generate_options o;
    pipit_generate_options_default(&o);
    o.max_tokens = kTokens;
    o.temperature = 0;
    auto cb = [](const char*, size_t, int32_t tok, void* user) -> int32_t {
      if (tok >= 0) static_cast<std::vector<int32_t>*>(user)->push_back(tok);
      return 1;
    };
    EXPECT_EQ(pipit_session_generate(s, prompt, 0, &o, cb, &got), PIPIT_OK) << pipit_last_error();
    pipit_session_destroy(s);
    pipit_model_destroy(m);
    return got;
  };
  // greedy from the C++ API, up to as many tokens as the C API produced (it stops at end of sequence)
  auto cpp = [&](bool fast, const std::vector<int32_t>& prompt_ids, size_t n) {
    auto lm = load_model(file, LoadOptions{.precision_fast = fast});
    EXPECT_TRUE(lm.is_ok()) << lm.status().message();
    std::vector<int32_t> out;
    if (!lm.is_ok()) return out;
    Session s(*lm->model, SessionOptions{.n_ctx = 128, .n_threads = 2});
    auto r = s.eval(prompt_ids);
    const int64_t V = lm->model->info().n_vocab;
    while (r.is_ok() && out.size() < n) {
      const float* l = r->ptr<float>();
      out.push_back(int32_t(std::max_element(l, l + V) - l));
      r = s.eval(std::span<const int32_t>(&out.back(), 1));
    }
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return out;
  };
  std::vector<int32_t> pf, pe;
  const std::vector<int32_t> fast = capi("fast", &pf), exact = capi("exact", &pe);
  ASSERT_FALSE(fast.empty());
  ASSERT_FALSE(exact.empty());
  EXPECT_EQ(fast, cpp(true, pf, fast.size()));
  EXPECT_EQ(exact, cpp(false, pe, exact.size()));
  EXPECT_NE(fast, exact) << "the fast and exact paths gave the same tokens: this test cannot tell them apart";

  pipit_model_options bad{0, nullptr, "bf16"};
  pipit_model* m = nullptr;
  EXPECT_EQ(pipit_model_load(file.c_str(), &bad, &m), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(pipit_last_error()).find("precision 'bf16'"), std::string::npos) << pipit_last_error();
}

}  // namespace
}  // namespace pipit
