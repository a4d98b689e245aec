// Decode throughput (tokens/s) of checkpoints given on the command line: a 32-token prompt, then greedy decode
// steps of one token through Session::eval. Compares e.g. a MoE model with a dense one of the same active
// parameters (bench/make_decode_bench_models.py writes such a pair).
// Run: build/decode_bench DIR... [--threads=N] [--benchmark_* flags]; reports tok/s per model and the resident
// memory after the run (an MoE model's untouched experts stay unread in the mapping).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/loader.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace {

constexpr int kPrompt = 32, kSteps = 64;

long rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6)) / 1024;
  return -1;
}

void decode(benchmark::State& state, const std::string& dir, int threads) {
  auto lm = pipit::load_model(dir);
  if (!lm.is_ok()) {
    state.SkipWithError(lm.status().message().c_str());
    return;
  }
  std::vector<int32_t> prompt;
  for (int i = 0; i < kPrompt; ++i) prompt.push_back(int32_t(3 + (i * 7919) % (lm->model->info().n_vocab - 3)));
  for (auto _ : state) {
    state.PauseTiming();
    pipit::Session s(*lm->model, pipit::SessionOptions{.n_ctx = 256, .n_threads = threads});
    auto r = s.eval(prompt);
    state.ResumeTiming();
    for (int i = 0; i < kSteps && r.is_ok(); ++i) {
      int32_t next = pipit::argmax(std::span<const float>(r->ptr<float>(), size_t(lm->model->info().n_vocab)));
      r = s.eval(std::span<const int32_t>(&next, 1));
    }
    if (!r.is_ok()) state.SkipWithError(r.status().message().c_str());
  }
  state.counters["tok/s"] = benchmark::Counter(double(kSteps) * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
  state.counters["rss_MB"] = double(rss_mb());
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  std::vector<char*> rest;
  std::vector<std::string> dirs;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strncmp(argv[i], "--threads=", 10) == 0) {
      threads = std::atoi(argv[i] + 10);
    } else if (i > 0 && argv[i][0] != '-') {
      dirs.push_back(argv[i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "usage: decode_bench MODEL_DIR... [--threads=N] [--benchmark_* flags]\n");
    return 2;
  }
  for (const auto& d : dirs)
    benchmark::RegisterBenchmark(("decode/" + d).c_str(), decode, d, threads)->Unit(benchmark::kMillisecond)->UseRealTime();
  int n = int(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
