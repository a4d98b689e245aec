// Encode throughput of the Qwen3 tokenizer (single thread) on a few MB of mixed-language text, built from the
// golden corpus (testdata/tokenizers/qwen3/cases.jsonl: English, code, CJK, Arabic, emoji, ...) repeated.
// Run: build/tokenizer_bench  (PIPIT_TESTDATA overrides the test data folder). Reports bytes/s (MB/s).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace {

std::string testdata() {
  if (const char* e = std::getenv("PIPIT_TESTDATA"); e && *e) return e;
  return PIPIT_TESTDATA_DIR;
}

// The corpus texts joined by newlines, repeated to at least `min_bytes`.
std::string corpus(size_t min_bytes) {
  std::ifstream f(testdata() + "/tokenizers/qwen3/cases.jsonl");
  std::string line, once;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    once += nlohmann::json::parse(line).at("text").get<std::string>();
    once += "\n";
  }
  std::string text;
  while (!once.empty() && text.size() < min_bytes) text += once;
  return text;
}

std::shared_ptr<pipit::Tokenizer> qwen3() {
  static std::shared_ptr<pipit::Tokenizer> tok = [] {
    auto r = pipit::Tokenizer::load_dir(testdata() + "/tokenizers/qwen3");
    return r ? r.value() : nullptr;
  }();
  return tok;
}

void BM_EncodeQwen3(benchmark::State& state) {
  auto tok = qwen3();
  if (!tok) {
    state.SkipWithError("cannot load testdata/tokenizers/qwen3");
    return;
  }
  static const std::string text = corpus(4 << 20);
  size_t n_ids = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text, false);
    if (!ids) {
      state.SkipWithError(ids.status().message().c_str());
      return;
    }
    n_ids = ids->size();
    benchmark::DoNotOptimize(ids->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
  state.counters["tokens"] = static_cast<double>(n_ids);
}
BENCHMARK(BM_EncodeQwen3)->Unit(benchmark::kMillisecond)->MinTime(3.0);

// Short prompts: one corpus line per call (per-call overhead dominates).
void BM_EncodeQwen3Short(benchmark::State& state) {
  auto tok = qwen3();
  if (!tok) {
    state.SkipWithError("cannot load testdata/tokenizers/qwen3");
    return;
  }
  static const std::string text = corpus(1);
  size_t bytes = 0;
  for (auto _ : state) {
    size_t b = 0;
    while (b < text.size()) {
      size_t e = text.find('\n', b);
      auto ids = tok->encode(std::string_view(text).substr(b, e - b), true);
      benchmark::DoNotOptimize(ids);
      bytes += e - b + 1;
      b = e + 1;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_EncodeQwen3Short)->Unit(benchmark::kMillisecond);

// Building the tokenizer from the texts of a model file (tokenizer.json 11 MB + tokenizer_config.json), as a load
// does: the largest part of a cold start for a small model (issue 38 item 4).
void BM_LoadQwen3(benchmark::State& state) {
  auto slurp = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  };
  const std::string tj = slurp(testdata() + "/tokenizers/qwen3/tokenizer.json");
  const std::string cfg = slurp(testdata() + "/tokenizers/qwen3/tokenizer_config.json");
  for (auto _ : state) {
    auto t = pipit::Tokenizer::load(tj, cfg);
    if (!t) {
      state.SkipWithError(t.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(t);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * tj.size()));
}
BENCHMARK(BM_LoadQwen3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
