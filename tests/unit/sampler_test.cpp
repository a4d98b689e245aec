// The sampler against a plain reference (sort the whole vocabulary, then top-k, top-p, min-p as HF / llama.cpp
// apply them), its seeded determinism, and its cost at a 151,936-token vocabulary against the output head's matmul
// (the part of a decode step that every model has at that vocabulary).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "backends/ops.h"
#include "core/threads.h"
#include "runtime/sampler.h"

namespace pipit {
namespace {

// The reference: every token sorted by logit / temperature, softmax over the top-k, then the top-p prefix and the
// min-p cut. Returns token -> probability (normalised over what is kept).
std::map<int32_t, double> reference(std::span<const float> logits, const SamplerParams& p) {
  std::vector<std::pair<double, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({double(logits[i]) / p.temperature, int32_t(i)});
  std::stable_sort(c.begin(), c.end(), [](auto& a, auto& b) { return a.first > b.first; });
  if (p.top_k > 0 && size_t(p.top_k) < c.size()) c.resize(size_t(p.top_k));
  const double mx = c[0].first;
  double sum = 0;
  for (auto& e : c) sum += (e.first = std::exp(e.first - mx));
  for (auto& e : c) e.first /= sum;
  if (p.top_p < 1) {
    double acc = 0;
    size_t n = 0;
    while (n < c.size() && acc < p.top_p) acc += c[n++].first;
    c.resize(std::max<size_t>(n, 1));
  }
  if (p.min_p > 0) std::erase_if(c, [&](auto& e) { return e.first < p.min_p * c[0].first; });
  std::map<int32_t, double> out;
  double kept = 0;
  for (auto& e : c) kept += e.first;
  for (auto& e : c) out[e.second] = e.first / kept;
  return out;
}

std::vector<float> random_logits(size_t n, uint64_t seed, float spread) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<float> l(n);
  for (float& v : l) v = d(g);
  return l;
}

TEST(Sampler, DistributionEqualsTheSortingReference) {
  int cases = 0;
  for (size_t V : {size_t(7), size_t(512), size_t(32000)})
    for (float spread : {0.5f, 3.0f, 12.0f})
      for (float temp : {0.3f, 0.8f, 1.7f})
        for (int top_k : {0, 1, 40, 300})
          for (float top_p : {0.5f, 0.95f, 1.0f})
            for (float min_p : {0.0f, 0.05f}) {
              const auto l = random_logits(V, V * 131 + uint64_t(spread * 7 + temp * 3 + top_k), spread);
              const SamplerParams p{.temperature = temp, .top_k = top_k, .top_p = top_p, .min_p = min_p};
              Sampler s(p);
              std::map<int32_t, double> got;
              for (auto& [pr, id] : s.distribution(l, {})) got[id] += pr;
              const auto want = reference(l, p);
              SCOPED_TRACE(testing::Message() << "V " << V << " spread " << spread << " T " << temp << " top_k "
                                              << top_k << " top_p " << top_p << " min_p " << min_p);
              // the same probabilities to float rounding (an exp within 2 ulp of libm's), and so the same support,
              // except that a token below e^-87 of the top one (1.6e-38) is never drawn (the reference keeps it
              // with a double's range)
              std::map<int32_t, double> all = want;
              for (auto& [id, pr] : got) all[id] += 0;
              for (auto& [id, pr] : all) {
                const double w = want.count(id) ? want.at(id) : 0, g = got.count(id) ? got.at(id) : 0;
                ASSERT_NEAR(g, w, 2e-6 + 2e-5 * w) << "token " << id;
                if (w > 1e-30) {
                  ASSERT_TRUE(got.count(id)) << "token " << id;
                }
                if (!want.count(id)) {
                  ASSERT_LT(g, 1e-30) << "token " << id;
                }
              }
              ++cases;
            }
  EXPECT_EQ(cases, 648);
}

// -inf logits (a grammar's mask) are never drawn, NaN ones neither; all masked but one: that one.
TEST(Sampler, MaskedTokensAreNeverDrawn) {
  std::vector<float> l = random_logits(1000, 5, 2.0f);
  for (size_t i = 0; i < l.size(); ++i)
    if (i % 3) l[i] = -INFINITY;
  l[4] = NAN;
  for (float top_p : {1.0f, 0.9f}) {
    Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = top_p, .min_p = 0, .seed = 3});
    for (int i = 0; i < 2000; ++i) {
      const int32_t t = s.sample(l, {});
      ASSERT_EQ(t % 3, 0) << t;
    }
  }
  std::vector<float> one(1000, -INFINITY);
  one[777] = 1.0f;
  Sampler s({.temperature = 0.8f, .top_k = 0, .top_p = 0.95f, .min_p = 0.05f});
  EXPECT_EQ(s.sample(one, {}), 777);
}

TEST(Sampler, SeededDrawsRepeat) {
  const auto l = random_logits(32000, 9, 2.0f);
  for (int top_k : {0, 40}) {
    const SamplerParams p{.temperature = 0.8f, .top_k = top_k, .top_p = 0.95f, .min_p = 0.0f, .seed = 42};
    Sampler a(p), b(p);
    std::vector<int32_t> hist;
    for (int i = 0; i < 200; ++i) {
      const int32_t x = a.sample(l, hist), y = b.sample(l, hist);
      ASSERT_EQ(x, y);
      hist.push_back(x);
    }
  }
}

// Draws follow the distribution: over 20,000 draws with top_p 0.9, the frequency of each kept token is within 4
// standard deviations of its probability, and nothing outside the top-p set is drawn.
TEST(Sampler, DrawsFollowTheDistribution) {
  const auto l = random_logits(2000, 17, 1.5f);
  const SamplerParams p{.temperature = 0.7f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f, .seed = 1};
  const auto want = reference(l, p);
  Sampler s(p);
  std::map<int32_t, int> n;
  const int N = 20000;
  for (int i = 0; i < N; ++i) n[s.sample(l, {})]++;
  for (auto& [id, c] : n) ASSERT_TRUE(want.count(id)) << id;
  for (auto& [id, pr] : want) {
    const double sd = std::sqrt(pr * (1 - pr) / N);
    EXPECT_NEAR(double(n[id]) / N, pr, 4 * sd + 1e-4) << id;
  }
}

double min_ms(int reps, const std::function<void()>& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

// Every OpenAI client sends no top_k: at Qwen3's vocabulary (151,936) a token's sampling must cost a small fraction
// of the output head's matmul (q8_0, n_embd 1024, 2 threads), which is itself only part of a decode step. Sorting
// the vocabulary (the sampler before this test) took ~5x the head; the bound is a fifth of it.
TEST(Sampler, CostIsASmallFractionOfTheOutputHead) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "timing under a sanitizer";
#endif
  const int64_t V = 151936, n_embd = 1024;
  Tensor w = Tensor::empty(DType::Q8_0, {V, n_embd});
  std::memset(w.data(), 1, size_t(w.nbytes()));  // written, so that the pages are real memory
  Tensor x = Tensor::empty(DType::F32, {1, n_embd});
  for (int64_t i = 0; i < n_embd; ++i) x.ptr<float>()[i] = float(i % 13) * 0.1f;
  Arena arena;
  ThreadPool pool(2);
  Ctx ctx{&arena, &pool, &kernels(), {}};
  const double head_ms = min_ms(7, [&] {
    arena.reset();
    linear(ctx, x, w);
  });
  const auto l = random_logits(size_t(V), 23, 3.0f);
  std::vector<int32_t> hist(64, 11);
  struct Case {
    const char* name;
    SamplerParams p;
  };
  const Case cases[] = {
      {"server defaults (T 1, no top-k / top-p / min-p)", {.temperature = 1.0f, .top_k = 0, .top_p = 1, .min_p = 0}},
      {"OpenAI SDK (T 0.8, top_p 0.95)", {.temperature = 0.8f, .top_k = 0, .top_p = 0.95f, .min_p = 0}},
      {"CLI defaults (top_k 40, top_p 0.95, min_p 0.05)", {}},
      {"min_p 0.05 alone + penalties", {.top_k = 0, .top_p = 1, .min_p = 0.05f, .frequency_penalty = 0.5f}},
  };
  for (const Case& c : cases) {
    Sampler s(c.p);
    const double ms = min_ms(7, [&] {
      for (int i = 0; i < 4; ++i) s.sample(l, hist);
    }) / 4;
    std::printf("[sampler] %-48s %.3f ms per token; output head %.3f ms\n", c.name, ms, head_ms);
    EXPECT_LT(ms, 0.2 * head_ms) << c.name;
  }
}

}  // namespace
}  // namespace pipit
