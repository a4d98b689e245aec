// The text-golden checks written once over (model, device, tolerance): golden_text_test.cpp runs them on the CPU,
// opencl_golden_test.cpp on the OpenCL device (the model loaded there; Session puts the KV cache and activations
// where the model is). Goldens: ../shared/testdata/models/<arch>; a multimodal golden whose text case carries the
// text keys (text.<name>: Gemma 4, Qwen3.5-VL) works too.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "runtime/loader.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace pipit::test {

struct GoldenCase {
  Model& model;
  std::string arch;  // the checkpoint under test::model_dir
  int n_threads;
  double tol;  // max |logit - golden|
};

inline SafetensorsFile golden_file(const std::string& arch, const char* file = "golden.safetensors") {
  auto g = SafetensorsFile::open(model_dir(arch) + "/" + file);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return std::move(g).value();
}

// `name`, or text.<name> in a multimodal golden
inline Tensor golden_key(const SafetensorsFile& f, const std::string& name) {
  auto t = f.get(f.has(name) ? name : "text." + name);
  EXPECT_TRUE(t.is_ok()) << name << ": " << t.status().message();
  return t.is_ok() ? *t : Tensor::empty(DType::F32, {0});
}

inline std::vector<int32_t> golden_ids(const SafetensorsFile& f, const std::string& name) {
  Tensor t = golden_key(f, name);
  if (t.dtype() != DType::I32) return {};
  return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
}

// f32 logits of one full pass over input_ids against the golden's; returns the max |diff| (printed by the caller
// where it measures).
inline double check_full_forward(const GoldenCase& c, DType kv = DType::F32) {
  SafetensorsFile g = golden_file(c.arch);
  auto ids = golden_ids(g, "input_ids");
  Session s(c.model, SessionOptions{.n_threads = c.n_threads, .kv_dtype = kv});
  auto r = s.eval(ids, /*all_logits=*/true);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (!r.is_ok()) return 1e30;
  Tensor want = golden_key(g, "logits");
  EXPECT_EQ(r->numel(), want.numel());
  if (r->numel() != want.numel()) return 1e30;
  auto d = max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel());
  const int64_t V = c.model.info().n_vocab;
  EXPECT_LE(d.max_abs, c.tol) << c.arch << ": worst at position " << d.worst / V << ", token " << d.worst % V;
  return d.max_abs;
}

// The greedy continuation with the KV cache: the golden's ids, each step's logits within tol.
inline void check_greedy(const GoldenCase& c) {
  SafetensorsFile g = golden_file(c.arch);
  auto ids = golden_ids(g, "input_ids");
  auto want_ids = golden_ids(g, "greedy_ids");
  Tensor want_logits = golden_key(g, "greedy_logits");
  const int64_t V = c.model.info().n_vocab;
  Session s(c.model, SessionOptions{.n_threads = c.n_threads});
  auto r = s.eval(ids);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::vector<int32_t> got;
  double worst = 0;
  for (size_t step = 0; step < want_ids.size(); ++step) {
    worst = std::max(worst, max_abs_diff(r->ptr<float>(), want_logits.ptr<float>() + step * V, V).max_abs);
    const int32_t next = argmax(std::span<const float>(r->ptr<float>(), size_t(V)));
    got.push_back(next);
    if (next != want_ids[step]) break;
    r = s.eval(std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
  }
  EXPECT_EQ(got, want_ids) << c.arch;
  EXPECT_LE(worst, c.tol) << c.arch;
}

// The prompt one token at a time (decode steps over the growing cache) against the full pass's golden logits.
inline void check_token_by_token(const GoldenCase& c) {
  SafetensorsFile g = golden_file(c.arch);
  auto ids = golden_ids(g, "input_ids");
  Tensor want = golden_key(g, "logits");
  const int64_t V = c.model.info().n_vocab;
  Session s(c.model, SessionOptions{.n_threads = c.n_threads});
  double worst = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    auto r = s.eval(std::span<const int32_t>(&ids[t], 1));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    worst = std::max(worst, max_abs_diff(r->ptr<float>(), want.ptr<float>() + t * V, V).max_abs);
  }
  EXPECT_LE(worst, c.tol) << c.arch;
}

// golden_batch's two prompts prefilled in chunks of 5 (a prefill spanning chunks). False: the checkpoint has no
// golden_batch (the caller skips).
inline bool check_batch_prompts(const GoldenCase& c) {
  if (!file_exists(model_dir(c.arch) + "/golden_batch.safetensors")) return false;
  SafetensorsFile g = golden_file(c.arch, "golden_batch.safetensors");
  for (int i = 0; i < 2; ++i) {
    auto ids = golden_ids(g, "input_ids_" + std::to_string(i));
    Tensor want = golden_key(g, "logits_" + std::to_string(i));
    Session s(c.model, SessionOptions{.n_threads = c.n_threads, .n_batch = 5});
    auto r = s.eval(ids, true);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    if (!r.is_ok()) continue;
    EXPECT_LE(max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs, c.tol)
        << c.arch << " prompt " << i;
  }
  return true;
}

}  // namespace pipit::test
