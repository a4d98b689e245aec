// `pipit bench`: prompt and generation speed in the manner of llama-bench, so the two can be compared on the same
// file. pp N: N random tokens evaluated in one call on an empty context (chunked by n_batch), logits for the last
// one only. tg N: N single-token steps from an empty context, no sampling. Each test runs once unmeasured, then
// -r times; tok/s is given as mean ± stddev over the repetitions, with model size, bits/weight and peak RSS.
// --image (vision-language models), as mllm's bench --image measures: "image" is the image processor + vision tower
// for the (already decoded) image, reported in ms and in image tokens/s; "pp N+img" prefills the multimodal prompt
// (the image's tokens with their features spliced in, then N random text tokens) on an empty context, tok/s over
// all its tokens; "tg" is unchanged.
// --draft MODEL / --lookup: greedy generation of -n tokens after a prompt (-f text, else -p random tokens), plain and
// speculative, each -r times after a warm-up: tok/s of both (decode after the first token), the guesses' acceptance
// rate, and whether the tokens are identical (they must be).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <random>
#include <sstream>

#include "backends/cpu/kernels.h"
#include "backends/device.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/image_args.h"
#include "core/page_migration.h"
#include "models/media_note.h"
#include "runtime/engine.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace pipit::cli {

namespace {

struct TestResult {
  std::string name;  // "pp512", "tg128", "image", "pp64+img"
  int threads;
  std::vector<double> tps;  // tok/s per repetition
  int64_t n_tokens = 0;     // tokens per repetition
  bool decode = false;      // a tg test (its roofline: see BenchReport::decode_bytes)
  int depth = 0;            // positions in the context before it
  double mean() const {
    double s = 0;
    for (double v : tps) s += v;
    return tps.empty() ? 0 : s / double(tps.size());
  }
  double stddev() const {
    if (tps.size() < 2) return 0;
    const double m = mean();
    double s = 0;
    for (double v : tps) s += (v - m) * (v - m);
    return std::sqrt(s / double(tps.size() - 1));
  }
};

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

// -t 1,2,4: every item a whole number of threads in [1, Limits::kMaxThreads], at least one ("-t ," ran nothing).
// "1,2,4" -> {1, 2, 4}; `flag` names the option in errors (-t, --parallel).
Result<std::vector<int>> parse_thread_list(const std::string& s, const char* flag = "-t") {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    errno = 0;
    const long long t = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || errno || t < 1 || t > Limits::kMaxThreads)
      return Error::invalid_argument("{} {}: expected counts in [1, {}] separated by commas, got '{}'", flag, s,
                                     Limits::kMaxThreads, item);
    v.push_back(int(t));
  }
  if (v.empty() || s.back() == ',')
    return Error::invalid_argument("{} '{}': expected counts separated by commas ({} 1,2,4)", flag, s, flag);
  return v;
}

using Clock = std::chrono::steady_clock;

// Read bandwidth of `pool` over a buffer far larger than the caches (GB/s): the decode roofline is this divided by
// the weight bytes a token reads. Each thread sums its own contiguous part, as matmuls stream distinct rows.
double read_bandwidth(ThreadPool& pool, std::vector<uint64_t>& buf) {
  const int64_t n = int64_t(buf.size());
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<uint64_t> sums(size_t(pool.size()) * 8, 0);
    const auto t0 = Clock::now();
    auto job = [&](int ith, int nth) {
      const int64_t b = n * ith / nth, e = n * (ith + 1) / nth;
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = b; i + 4 <= e; i += 4) s0 += buf[size_t(i)], s1 += buf[size_t(i + 1)], s2 += buf[size_t(i + 2)], s3 += buf[size_t(i + 3)];
      sums[size_t(ith) * 8] = s0 + s1 + s2 + s3;
    };
    pool.run(JobRef(job));
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, double(n) * 8 / sec / 1e9);
  }
  return best;
}

// One repetition of a test: seconds spent evaluating.
// One repetition of a test after `depth` positions already in the context (llama-bench -d): the depth is
// evaluated once, untimed, and each repetition cuts the context back to it (a recurrent state goes back to its
// snapshot at the depth, taken at the end of that prefill), so only the test's own tokens are timed.
// --mtp: the pieces of a speculative step on the bench prompt, median ms over n steps of greedy decoding: a plain
// decode step, a verification of [last token, guess] (the recurrent state's checkpoint, the 2-row pass, the rewind),
// and one MTP guess (the head over the newest pair and the shared lm_head).
Result<std::array<double, 3>> mtp_costs(Session& s, SpecSetup& setup, const std::vector<int32_t>& prompt, int n) {
  s.reset();
  PIPIT_TRY(setup.attach(s));
  struct Detach {
    SpecSetup& d;
    ~Detach() { d.detach(); }
  } detach{setup};
  PIPIT_ASSIGN_OR_RETURN(Tensor r, s.eval(prompt));
  const int64_t V = s.model().info().n_vocab;
  std::vector<int32_t> hist = prompt;
  hist.push_back(argmax(std::span<const float>(r.ptr<float>(), size_t(V))));
  PIPIT_TRY(setup.mtp_draft->propose(hist, 0, 1).status());  // the prompt's pairs, not timed
  std::vector<double> step, verify, guess;
  auto ms = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  for (int i = 0; i < n && s.n_past() + 3 < s.n_ctx(); ++i) {
    auto t0 = Clock::now();
    PIPIT_ASSIGN_OR_RETURN(std::vector<int32_t> g, setup.mtp_draft->propose(hist, 0, 1));
    guess.push_back(ms(t0));
    const int n0 = s.n_past();
    const int32_t pair[2] = {hist.back(), g.empty() ? hist.back() : g[0]};
    t0 = Clock::now();
    s.checkpoint();
    PIPIT_TRY(s.eval(pair, /*all_logits=*/true).status());
    s.truncate(n0);
    verify.push_back(ms(t0));
    if (s.n_past() != n0) return Error::internal("[bench] the state did not go back to {}", n0);
    t0 = Clock::now();
    PIPIT_ASSIGN_OR_RETURN(Tensor l, s.eval(std::span<const int32_t>(&hist.back(), 1)));
    step.push_back(ms(t0));
    hist.push_back(argmax(std::span<const float>(l.ptr<float>(), size_t(V))));
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  return std::array<double, 3>{median(step), median(verify), median(guess)};
}

Result<double> run_once(Session& s, bool prompt, int n, std::mt19937& rng, int64_t n_vocab, int depth = 0) {
  std::uniform_int_distribution<int32_t> tok(0, int32_t(n_vocab - 1));
  s.truncate(depth);
  if (s.n_past() != depth) {
    s.reset();
    if (depth > 0) {
      std::vector<int32_t> ids(static_cast<size_t>(depth));
      for (auto& t : ids) t = tok(rng);
      PIPIT_TRY(s.eval(ids).status());
    }
  }
  if (prompt) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& t : ids) t = tok(rng);
    const auto t0 = Clock::now();
    PIPIT_TRY(s.eval(ids).status());
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    const int32_t id = tok(rng);
    PIPIT_TRY(s.eval(std::span<const int32_t>(&id, 1)).status());
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One repetition of the multimodal prefill: seconds in eval (the features are computed already).
Result<double> run_multimodal(Session& s, const MultimodalPrompt& p) {
  s.reset();
  const auto t0 = Clock::now();
  PIPIT_TRY(s.eval(p).status());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The prompt of the "pp N+img" test: the model's image placeholder (expanded to the image's tokens by
// build_multimodal_prompt), then n random text tokens that are not image markers.
Result<MultimodalPrompt> bench_image_prompt(const Model& m, const EncodedImage& img, int n, std::mt19937& rng) {
  std::vector<int32_t> ids = image_placeholder_tokens(m);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(m.info().n_vocab - 1));
  const std::vector<int32_t> marks = ids;
  while (int(ids.size()) < int(marks.size()) + n) {
    const int32_t t = tok(rng);
    if (std::find(marks.begin(), marks.end(), t) == marks.end()) ids.push_back(t);
  }
  return build_multimodal_prompt(m, ids, {img});
}

// read_bandwidth for each thread count, in a child process so that its 1 GiB buffer stays out of our peak RSS.
std::vector<std::pair<int, double>> measure_bandwidth(const std::vector<int>& threads) {
  std::vector<std::pair<int, double>> out;
  int fd[2];
  if (pipe(fd) != 0) return out;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    std::vector<uint64_t> buf(size_t(1) << 27, 1);  // 1 GiB
    for (int nt : threads) {
      ThreadPool pool(nt);
      const double gbs = read_bandwidth(pool, buf);
      if (write(fd[1], &gbs, sizeof gbs) != sizeof gbs) break;
    }
    _exit(0);
  }
  close(fd[1]);
  for (int nt : threads) {
    double gbs;
    if (pid < 0 || read(fd[0], &gbs, sizeof gbs) != sizeof gbs) break;
    out.emplace_back(nt, gbs);
  }
  close(fd[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  return out;
}

void add_bench_options(Args& a) {
  a.option({"-m", "--model"}, "model: HF checkpoint dir, .pipit or .gguf file");
  a.option({"-p", "--n-prompt"}, "prompt tokens (0: skip the prompt test)", "512");
  a.option({"-n", "--n-gen"}, "generated tokens (0: skip the generation test)", "128");
  a.option({"-t", "--threads"}, "thread counts, comma-separated (default: physical cores)");
  a.option({"-r", "--repetitions"}, "measured repetitions per test", "5");
  a.option({"-d", "--n-depth"}, "positions already in the context before each test (llama-bench -d): pp N @ dD",
           "0");
  a.option({"-c", "--ctx-size", "--ctx"}, "context length (default: max(n_prompt, n_gen) + depth)");
  a.option({"-b", "--batch"}, "prefill chunk (n_batch)", "512");
  a.option({"--kv-type"}, "KV cache dtype: f16, f32 or q8", "f16");
  add_device_option(a);
  a.flag({"--json"}, "print one JSON object instead of the table");
  a.flag({"--bandwidth"}, "also measure memory read bandwidth per thread count (decode roofline)");
  a.option({"--parallel"}, "also decode this many sequences at once through the server's engine "
           "(comma-separated, e.g. 1,4,8; llama-batched-bench's -npl): aggregate tok/s of tgN xP, OpenAI-default "
           "sampling (temperature 1, no top-k / top-p / min-p), 32-token prompts");
  a.option({"--image"}, "vision-language models: also time this image's encoding and a prefill with it");
  a.option({"--mmproj"}, "llama.cpp mmproj file: the vision tower of a .gguf model");
  a.option({"--image-max-pixels"}, "cap the pixels the image is resized to (Qwen2-VL: fewer image tokens)");
  a.option({"--image-mode"}, "DeepSeek-OCR resolution mode: tiny, small, base, large, gundam (default gundam)");
  add_speculative_options(a);
  a.option({"-f", "--file"}, "speculative tests: the prompt, as text (default: -p random tokens)");
}

// The numbers of a bench run, read and checked before the model is loaded.
struct BenchArgs {
  int64_t n_prompt = 0, n_gen = 0, reps = 0;
  int depth = 0;
  std::vector<int> threads;
  SessionOptions so;
  std::string kv;  // --kv-type as given
};

Result<BenchArgs> bench_args(const Args& a) {
  BenchArgs b;
  PIPIT_ASSIGN_OR_RETURN(b.n_prompt, a.get_int("-p"));
  PIPIT_ASSIGN_OR_RETURN(b.n_gen, a.get_int("-n"));
  PIPIT_ASSIGN_OR_RETURN(b.reps, a.get_int("-r"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_batch, a.get_int("-b"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_depth, a.get_int("-d"));
  if (b.n_prompt < 0 || b.n_gen < 0 || n_depth < 0 || b.reps < 1 || n_batch < 1)
    return Error::invalid_argument("-p, -n and -d must be >= 0, -r and -b >= 1");
  if (b.n_prompt > Limits::kMaxCtx || b.n_gen > Limits::kMaxCtx || n_batch > Limits::kMaxBatch || b.reps > 1000000 ||
      n_depth + std::max(b.n_prompt, b.n_gen) > Limits::kMaxCtx)
    return Error::invalid_argument("-p and -n (plus -d) must be <= {}, -b <= {}, -r <= 1000000", Limits::kMaxCtx,
                                   Limits::kMaxBatch);
  b.depth = int(n_depth);
  if (b.n_prompt == 0 && b.n_gen == 0 && !a.has("--image"))
    return Error::invalid_argument("-p 0 -n 0: nothing to measure (give a prompt length, a generation length or both)");
  if (a.has("-t")) {
    PIPIT_ASSIGN_OR_RETURN(b.threads, parse_thread_list(a.get("-t")));
  } else {
    b.threads = {ThreadPool::default_threads()};
  }
  b.so.n_batch = int(n_batch);
  b.so.n_ctx = int(std::max<int64_t>({b.n_prompt + b.depth, b.n_gen + b.depth, 1}));
  if (a.has("-c")) {
    auto c = a.get_int("-c");
    if (!c || *c < b.so.n_ctx)
      return Error::invalid_argument("-c {}: must be >= max(n_prompt, n_gen) + depth = {}", a.get("-c"), b.so.n_ctx);
    if (*c > Limits::kMaxCtx)
      return Error::invalid_argument("-c {}: the context must be in [1, {}]", *c, Limits::kMaxCtx);
    b.so.n_ctx = int(*c);
  }
  b.kv = a.get("--kv-type");
  PIPIT_ASSIGN_OR_RETURN(b.so.kv_dtype, kv_type(a));
  return b;
}

// --draft / --lookup / --mtp: the prompt of the greedy generations (-f text, else -p random tokens).
Result<std::vector<int32_t>> speculative_prompt(const Args& a, const LoadedModel& lm, int64_t n_prompt) {
  std::vector<int32_t> out;
  if (a.has("-f")) {
    PIPIT_ASSIGN_OR_RETURN(std::string text, read_prompt_file(a.get("-f")));
    PIPIT_ASSIGN_OR_RETURN(out, lm.tokenizer->encode(text, true));
    return out;
  }
  std::uniform_int_distribution<int32_t> tok(0, int32_t(lm.model->info().n_vocab - 1));
  std::mt19937 r0(99);
  for (int64_t i = 0; i < std::max<int64_t>(n_prompt, 1); ++i) out.push_back(tok(r0));
  return out;
}

struct SpecRow {
  int threads;
  double plain_ts = 0, spec_ts = 0, acceptance = 0;
  int64_t drafted = 0, accepted = 0;
  bool same = true;
  double step_ms = 0, verify_ms = 0, mtp_ms = 0;  // --mtp: the pieces of a step (mtp_costs)
};

// Greedy generation of n_gen tokens after `prompt`, plain then speculative, -r times after a warm-up each.
Result<SpecRow> bench_speculative(const Args& a, const LoadedModel& lm, Session& s, const SessionOptions& so,
                                  std::shared_ptr<ThreadPool> pool, const std::vector<int32_t>& prompt,
                                  const BenchArgs& b, int nt) {
  PIPIT_ASSIGN_OR_RETURN(auto setup, speculative_setup(a, *lm.model, so, std::move(pool)));
  GenerateParams gp;
  gp.max_tokens = int(b.n_gen);
  gp.sampler.temperature = 0;
  gp.ignore_eos = true;
  SpecRow row{nt};
  std::vector<int32_t> plain_tokens;
  for (int i = 0; i <= b.reps; ++i) {  // the first run of each warms up
    for (int with = 0; with < 2; ++with) {
      s.reset();
      // --mtp: the head follows the session in the speculative runs only (plain ones compute no hidden states)
      if (with) PIPIT_TRY(setup->attach(s));
      gp.spec = with ? setup->params : SpecParams{};
      auto res = generate(s, nullptr, prompt, gp);
      setup->detach();
      PIPIT_TRY(res.status());
      const double ts = res->gen_ms > 0 ? double(res->tokens.size() - 1) * 1000.0 / res->gen_ms : 0;
      if (with == 0) plain_tokens = res->tokens;
      else row.same = row.same && res->tokens == plain_tokens;
      if (i == 0) continue;
      (with ? row.spec_ts : row.plain_ts) += ts / double(b.reps);
      if (with) row.drafted += res->spec.drafted, row.accepted += res->spec.accepted;
    }
  }
  row.acceptance = row.drafted ? double(row.accepted) / double(row.drafted) : 0;
  if (a.get_flag("--mtp")) {
    PIPIT_ASSIGN_OR_RETURN(auto c, mtp_costs(s, *setup, prompt, int(std::max<int64_t>(b.reps, 3) * 4)));
    row.step_ms = c[0], row.verify_ms = c[1], row.mtp_ms = c[2];
  }
  return row;
}

// --image: the "image" test (processing + vision tower, -r times after a warm-up) and the multimodal prompt of the
// "pp N+img" test.
Result<MultimodalPrompt> bench_image(const LoadedModel& lm, const ImageProcessorConfig& proc, const Image& image,
                                     ThreadPool& pool, const BenchArgs& b, std::mt19937& rng, int nt,
                                     std::vector<TestResult>& results) {
  TestResult r{"image", nt, {}};
  std::optional<EncodedImage> enc;
  for (int i = 0; i <= b.reps; ++i) {  // the first run warms up
    const auto t0 = Clock::now();
    PIPIT_ASSIGN_OR_RETURN(EncodedImage e, encode_image(*lm.model, proc, image, pool));
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    r.n_tokens = e.features.dim(0);
    if (i > 0) r.tps.push_back(double(r.n_tokens) / sec);
    enc = std::move(e);
  }
  results.push_back(std::move(r));
  return bench_image_prompt(*lm.model, *enc, int(b.n_prompt), rng);
}

// The pp / pp+img / tg tests on one session: a warm-up run, then -r measured ones each.
Status bench_session(Session& s, const BenchArgs& b, const std::optional<MultimodalPrompt>& mm, int64_t n_vocab,
                     std::mt19937& rng, int nt, std::vector<TestResult>& results) {
  for (int kind = 0; kind < 3; ++kind) {
    const bool prompt = kind == 0, multimodal = kind == 1;
    if (multimodal && !mm) continue;
    const int n = int(prompt ? b.n_prompt : multimodal ? int64_t(mm->tokens.size()) : b.n_gen);
    if (n == 0) continue;
    std::string name =
        multimodal ? "pp" + std::to_string(b.n_prompt) + "+img" : (prompt ? "pp" : "tg") + std::to_string(n);
    if (b.depth > 0 && !multimodal) name += " @ d" + std::to_string(b.depth);
    TestResult r{name, nt, {}, n, kind == 2, b.depth};
    auto once = [&]() { return multimodal ? run_multimodal(s, *mm) : run_once(s, prompt, n, rng, n_vocab, b.depth); };
    PIPIT_TRY(once().status());  // warm-up
    for (int i = 0; i < b.reps; ++i) {
      PIPIT_ASSIGN_OR_RETURN(double sec, once());
      r.tps.push_back(n / sec);
    }
    results.push_back(std::move(r));
  }
  return Status::ok();
}

// --parallel: P sequences decode at once in one Engine (the server's continuous batching): P requests of 32 random
// prompt tokens, submitted together so their prompts share the first pass, each then generating n tokens with the
// sampling an OpenAI client gets. Aggregate tok/s: the tokens after every request's first one, over the time from
// the last first token to the last token (only decode steps with all P sequences in them, whatever the prefill).
Status bench_parallel(Model& m, const BenchArgs& b, const std::vector<int>& nps, int nt, std::mt19937& rng,
                      std::vector<TestResult>& results) {
  constexpr int kPrompt = 32;
  const int64_t n_vocab = m.info().n_vocab;
  for (int np : nps) {
    EngineOptions eo;
    eo.n_slots = np;
    eo.n_ctx = int(kPrompt + b.n_gen + 8);
    eo.n_threads = nt;
    eo.kv_dtype = b.so.kv_dtype;
    eo.max_queue = np;
    Engine eng(m, nullptr, eo);
    TestResult r{"tg" + std::to_string(b.n_gen) + " x" + std::to_string(np), nt, {}, b.n_gen * np};
    for (int rep = -1; rep < b.reps; ++rep) {  // -1: warm-up
      const size_t n = size_t(np);
      std::vector<Clock::time_point> first(n), last(n);
      std::vector<int64_t> count(n, 0);
      std::vector<std::promise<Status>> done(n);
      std::uniform_int_distribution<int32_t> tok(0, int32_t(n_vocab - 1));
      for (int i = 0; i < np; ++i) {
        EngineRequest q;
        for (int j = 0; j < kPrompt; ++j) q.prompt.push_back(tok(rng));
        q.params.max_tokens = int(b.n_gen);
        q.params.ignore_eos = true;
        q.params.sampler = SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                                         .seed = uint64_t(rng())};
        q.on_token = [&, i](const std::string&, int32_t t) {
          if (t < 0) return true;
          const auto now = Clock::now();
          if (count[size_t(i)]++ == 0) first[size_t(i)] = now;
          last[size_t(i)] = now;
          return true;
        };
        q.on_done = [&done, i](const Result<GenerateResult>& res) { done[size_t(i)].set_value(res.status()); };
        PIPIT_TRY(eng.submit(std::move(q)).status());
      }
      for (auto& d : done) PIPIT_TRY(d.get_future().get());
      const auto from = *std::max_element(first.begin(), first.end()), to = *std::max_element(last.begin(), last.end());
      int64_t tokens = 0;
      for (int64_t c : count) tokens += c - 1;
      const double sec = std::chrono::duration<double>(to - from).count();
      if (rep >= 0 && sec > 0) r.tps.push_back(double(tokens) / sec);
    }
    results.push_back(std::move(r));
  }
  return Status::ok();
}

// What the printers need besides the results.
struct BenchReport {
  std::string model, arch, kernels, kv;
  int64_t bytes = 0, params = 0;
  int n_ctx = 0, depth = 0;
  size_t kv_bytes = 0;  // the session's KV cache (and recurrent state), as allocated
  KvCacheSpec kvi;
  DType kv_dtype = DType::F16;
  std::string spec_kind, spec_label;  // "mtp" / "draft" / "lookup"; "MTP head" / "draft M" / "prompt lookup"
  int spec_guesses = 0;
  int64_t n_gen = 0;
  size_t spec_prompt = 0;
  double bpw() const { return params ? 8.0 * double(bytes) / double(params) : 0; }
  // What one token of a tg test reads, for the decode roofline: every weight (an untied input embedding table, of
  // which a token reads one row, counts whole, so such a model's fraction reads low) and, on average over the test,
  // the K/V rows its attention layers see (a sliding window's at most) plus the recurrent layers' state.
  std::pair<double, double> decode_bytes(const TestResult& r) const {
    const double pos = double(r.depth) + double(r.n_tokens + 1) / 2;  // keys a token of the test sees, on average
    const double row = 2.0 * double(kvi.n_head_kv) * double(dtype_row_bytes(kv_dtype, kvi.head_dim));  // K and V
    double kv = 0;
    for (int l = 0; l < kvi.n_layer; ++l) {
      if (size_t(l) < kvi.state.size() && !kvi.state[size_t(l)].empty()) {
        for (const auto& shape : kvi.state[size_t(l)]) {
          double n = 4;
          for (int64_t d : shape) n *= double(d);
          kv += n;
        }
        continue;
      }
      const int w = size_t(l) < kvi.window.size() ? kvi.window[size_t(l)] : 0;
      kv += row * (w > 0 ? std::min(pos, double(w)) : pos);
    }
    return {double(bytes), kv};
  }
  struct Roofline {
    double gbs, weight_bytes, kv_bytes, tps, fraction;
  };
  // A tg test's roofline at the bandwidth measured for its thread count (none for other tests or without one).
  std::optional<Roofline> roofline(const TestResult& r, const std::vector<std::pair<int, double>>& bandwidth) const {
    if (!r.decode) return std::nullopt;
    for (const auto& [nt, gbs] : bandwidth)
      if (nt == r.threads) {
        const auto [w, kv] = decode_bytes(r);
        return Roofline{gbs, w, kv, gbs * 1e9 / (w + kv), r.mean() * (w + kv) / (gbs * 1e9)};
      }
    return std::nullopt;
  }
};

void print_bench_json(const BenchReport& rep, const std::vector<TestResult>& results,
                      const std::vector<SpecRow>& spec_rows, const std::vector<std::pair<int, double>>& bandwidth) {
  nlohmann::json j = {{"model", rep.model},         {"size_bytes", rep.bytes},  {"params", rep.params},
                      {"bits_per_weight", rep.bpw()}, {"kernels", rep.kernels},
                      {"kv_type", rep.kv},           {"n_ctx", rep.n_ctx},       {"peak_rss_mib", peak_rss_mib()},
                      {"kv_bytes", rep.kv_bytes},    {"n_depth", rep.depth},
                      {"tests", nlohmann::json::array()}};
  for (const auto& r : results) {
    nlohmann::json t = {{"test", r.name}, {"threads", r.threads}, {"n_tokens", r.n_tokens}, {"avg_ts", r.mean()},
                        {"stddev_ts", r.stddev()}, {"samples_ts", r.tps}};
    if (const auto f = rep.roofline(r, bandwidth))
      t["roofline"] = {{"read_gb_s", f->gbs}, {"weight_bytes", f->weight_bytes}, {"kv_bytes", f->kv_bytes},
                       {"roofline_ts", f->tps}, {"fraction", f->fraction}};
    j["tests"].push_back(std::move(t));
  }
  for (const auto& r : spec_rows)
    j["speculative"].push_back({{"threads", r.threads}, {"kind", rep.spec_kind},
                                {"n_gen", rep.n_gen}, {"n_prompt", rep.spec_prompt}, {"plain_ts", r.plain_ts},
                                {"spec_ts", r.spec_ts}, {"speedup", r.plain_ts > 0 ? r.spec_ts / r.plain_ts : 0},
                                {"acceptance", r.acceptance}, {"drafted", r.drafted}, {"accepted", r.accepted},
                                {"same_tokens", r.same}});
  for (const auto& [nt, gbs] : bandwidth)
    j["bandwidth"].push_back({{"threads", nt}, {"read_gb_s", gbs}, {"roofline_ts", gbs * 1e9 / double(rep.bytes)}});
  std::printf("%s\n", j.dump(2).c_str());
}

void print_bench_table(const BenchReport& rep, const std::vector<TestResult>& results,
                       const std::vector<SpecRow>& spec_rows, const std::vector<std::pair<int, double>>& bandwidth) {
  const double size_mib = double(rep.bytes) / (1024.0 * 1024.0);
  std::printf("| model | size | params | bpw | kernels | threads | test | t/s |\n");
  std::printf("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |\n");
  for (const auto& r : results) {
    std::printf("| %s | %.2f MiB | %.2f M | %.2f | %s | %d | %s | %.2f ± %.2f |", rep.arch.c_str(), size_mib,
                double(rep.params) / 1e6, rep.bpw(), rep.kernels.c_str(), r.threads, r.name.c_str(), r.mean(),
                r.stddev());
    if (r.name == "image")
      std::printf(" %lld image tokens in %.1f ms", (long long)r.n_tokens, 1e3 * double(r.n_tokens) / r.mean());
    if (r.name.ends_with("+img")) std::printf(" (%lld tokens)", (long long)r.n_tokens);
    std::printf("\n");
  }
  for (const auto& r : spec_rows)
    std::printf("speculative (%s, %d guesses) %d threads, tg%lld after %zu prompt tokens: plain %.2f t/s, speculative "
                "%.2f t/s (x%.2f), acceptance %.1f%% (%lld of %lld), greedy tokens %s\n",
                rep.spec_label.c_str(), rep.spec_guesses, r.threads, (long long)rep.n_gen, rep.spec_prompt,
                r.plain_ts, r.spec_ts, r.plain_ts > 0 ? r.spec_ts / r.plain_ts : 0, 100 * r.acceptance,
                (long long)r.accepted, (long long)r.drafted, r.same ? "identical" : "DIFFER");
  for (const auto& r : spec_rows) {
    if (r.step_ms <= 0) continue;
    // a verification cycle emits 2 tokens either way (accepted: the guess and the next; rejected: the next, then
    // the catch-up pass's token) and costs a verification + a guess, plus a catch-up pass when rejected
    std::printf("MTP costs %d threads (median of steps): decode step %.2f ms, 2-row verification with the state "
                "checkpoint and rewind %.2f ms, one MTP guess %.2f ms (%.2f of a step); predicted speed-up at "
                "acceptance 0.5 / 0.7 / 0.8 / 0.9:", r.threads, r.step_ms, r.verify_ms, r.mtp_ms,
                r.mtp_ms / r.step_ms);
    for (double acc : {0.5, 0.7, 0.8, 0.9})
      std::printf(" x%.2f", 2 * r.step_ms / (r.verify_ms + r.mtp_ms + (1 - acc) * r.step_ms));
    std::printf("\n");
  }
  for (const auto& [nt, gbs] : bandwidth)
    std::printf("read bandwidth %d threads: %.1f GB/s -> decode roofline %.1f tok/s (%.0f MB of weights per token)\n",
                nt, gbs, gbs * 1e9 / double(rep.bytes), double(rep.bytes) / 1e6);
  const bool state = std::any_of(rep.kvi.state.begin(), rep.kvi.state.end(), [](auto& s) { return !s.empty(); });
  for (const auto& r : results)
    if (const auto f = rep.roofline(r, bandwidth))
      std::printf("%s, %d threads: %.2f t/s = %.2f of the roofline (%.0f MB of weights + %.1f MB of %s a token on "
                  "average, at %.1f GB/s: %.1f t/s)\n",
                  r.name.c_str(), r.threads, r.mean(), f->fraction, f->weight_bytes / 1e6, f->kv_bytes / 1e6,
                  state ? "K/V and recurrent state" : "K/V", f->gbs, f->tps);
  std::printf("KV cache %.2f MiB (%s, context %d: %lld layers x %lld KV heads x %lld dims, K and V)\n",
              double(rep.kv_bytes) / (1024.0 * 1024.0), rep.kv.c_str(), rep.n_ctx, (long long)rep.kvi.n_layer,
              (long long)rep.kvi.n_head_kv, (long long)rep.kvi.head_dim);
  std::printf("peak RSS %.1f MiB (context %d, KV %s)\n", peak_rss_mib(), rep.n_ctx, rep.kv.c_str());
}

int cmd_bench(Args& a) {
  add_bench_options(a);
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || !a.has("-m")) {
    std::printf("usage: pipit bench -m MODEL [-p 512] [-n 128] [-t 1,2] [-r 5] [--json] [--image IMG]\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  auto ba = bench_args(a);
  if (!ba) return fail(a, ba.status().message());
  BenchArgs& b = *ba;
  SessionOptions& so = b.so;

  const bool with_spec = a.has("--draft") || a.get_flag("--lookup") || a.get_flag("--mtp");
  auto lor = load_options(a);
  if (!lor) return fail(a, lor.status().message());
  LoadOptions lo = *lor;
  lo.need_tokenizer = lo.need_tokenizer || (with_spec && a.has("-f"));
  auto lm = load_model(a.get("-m"), lo);
  if (!lm) return fail(a, lm.status().message());
  // Timed at steady state: matrices a file holds as the kernels want them are read from its mapping until a background
  // thread has moved them to huge pages (core/page_migration.h); on a busy machine that can outlast the warm-up.
  if (auto* mw = dynamic_cast<const MapWeightSource*>(lm->weights.get()))
    for (const auto& [name, t] : mw->tensors())
      if (auto* moving = dynamic_cast<const MigratingStorage*>(t.storage().get())) moving->wait();
  std::vector<int32_t> spec_prompt;
  if (with_spec) {
    if (b.n_gen < 2) return fail(a, "--draft / --lookup / --mtp: -n must be >= 2");
    auto p = speculative_prompt(a, *lm, b.n_prompt);
    if (!p) return fail(a, p.status().message());
    spec_prompt = std::move(*p);
    so.n_ctx = std::max<int>(so.n_ctx, int(spec_prompt.size() + b.n_gen + 1));
  }
  if (auto st = check_kv_type(*lm->model, so.kv_dtype); !st) return fail(a, st.message());

  // --image: decoded once here; its processing and encoding are what the "image" test times
  const bool with_image = a.has("--image");
  Image image;
  ImageProcessorConfig proc;
  if (with_image) {
    if (!lm->model->vision())
      return fail(a, fmt("--image: {} is a text-only model{}", a.get("-m"), media_note_suffix(lm->model->info().arch)));
    auto img = load_image(a.get("--image"));
    if (!img) return fail(a, img.status().message());
    image = std::move(img).value();
    auto opt = image_options(a);
    if (!opt) return fail(a, opt.status().message());
    auto pp = preprocessor_config_of(*lm);
    if (!pp) return fail(a, pp.status().message());
    auto pc = image_processor_for(*lm->model, *pp, *opt);
    if (!pc) return fail(a, pc.status().message());
    proc = std::move(pc).value();
  }

  std::vector<int> nps;  // --parallel
  if (a.has("--parallel")) {
    auto l = parse_thread_list(a.get("--parallel"), "--parallel");
    if (!l) return fail(a, l.status().message());
    if (b.n_gen < 2) return fail(a, "--parallel: -n must be >= 2");
    for (int np : *l)
      if (np > 64) return fail(a, fmt("--parallel {}: at most 64 sequences", np));
    nps = std::move(l).value();
  }
  std::vector<TestResult> results;
  std::vector<SpecRow> spec_rows;
  std::vector<std::pair<int, double>> bandwidth;  // threads, GB/s
  if (a.get_flag("--bandwidth")) bandwidth = measure_bandwidth(b.threads);
  std::mt19937 rng(1234);
  size_t kv_bytes = 0;
  for (int nt : b.threads) {
    auto pool = std::make_shared<ThreadPool>(nt);
    std::optional<MultimodalPrompt> mm;
    if (with_image) {
      auto p = bench_image(*lm, proc, image, *pool, b, rng, nt, results);
      if (!p) return fail(a, p.status().message());
      mm = std::move(p).value();
      so.n_ctx = std::max(so.n_ctx, int(mm->tokens.size()));
    }
    auto sp = Session::create(*lm->model, so, pool);
    if (!sp) return fail(a, sp.status().message());
    Session& s = **sp;
    kv_bytes = s.kv_bytes();
    if (auto st = bench_session(s, b, mm, lm->model->info().n_vocab, rng, nt, results); !st)
      return fail(a, st.message());
    if (!nps.empty()) {
      if (auto st = bench_parallel(*lm->model, b, nps, nt, rng, results); !st) return fail(a, st.message());
    }
    if (with_spec) {
      auto row = bench_speculative(a, *lm, s, so, pool, spec_prompt, b, nt);
      if (!row) return fail(a, row.status().message());
      spec_rows.push_back(*row);
    }
  }

  BenchReport rep;
  rep.model = a.get("-m");
  rep.arch = lm->config.model_type();
  // the device the decoder ran on names the "kernels" column (the CPU's ISA table otherwise)
  rep.kernels = lm->model->info().device ? lm->model->info().device->name() : kernels().name;
  rep.kv = b.kv;
  for (const auto& [name, t] : static_cast<const MapWeightSource&>(*lm->weights).tensors()) {
    rep.bytes += int64_t(t.nbytes());
    rep.params += t.numel();
  }
  rep.n_ctx = so.n_ctx;
  rep.depth = b.depth;
  rep.kv_bytes = kv_bytes;
  rep.kvi = lm->model->info().kv;
  rep.kv_dtype = so.kv_dtype;
  rep.spec_kind = a.get_flag("--mtp") ? "mtp" : a.has("--draft") ? "draft" : "lookup";
  rep.spec_label = a.get_flag("--mtp") ? "MTP head" : a.has("--draft") ? "draft " + a.get("--draft") : "prompt lookup";
  rep.spec_guesses = a.get_flag("--mtp") ? int(*a.get_int("--mtp-n")) : int(*a.get_int("--draft-max"));
  rep.n_gen = b.n_gen;
  rep.spec_prompt = spec_prompt.size();
  if (a.get_flag("--json")) print_bench_json(rep, results, spec_rows, bandwidth);
  else print_bench_table(rep, results, spec_rows, bandwidth);
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("bench", "prompt and generation speed (tok/s) in the manner of llama-bench", cmd_bench);

}  // namespace pipit::cli
