// Shared CLI option parsing.
#include "cli/common.h"

#include "backends/device.h"
#include "models/mtp.h"
#include "runtime/generation_defaults.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace pipit::cli {

void add_model_options(Args& a) {
  a.option({"-m", "--model"}, "model: HF checkpoint dir, .pipit or .gguf file");
  a.option({"-t", "--threads"}, "threads (default: physical cores)");
  a.option({"-c", "--ctx-size", "--ctx"}, "context length (default: min(model max, 4096))");
  // f16 by default as llama.cpp (half the memory of f32; logits within ~3e-4 of the f32 cache on the test models);
  // f32 is the exact path the goldens are checked on, q8 (q8_0 blocks) a quarter of f32.
  a.option({"--kv-type"}, "KV cache dtype: f16, f32 or q8 (q8_0 blocks: head_dim a multiple of 32)", "f16");
  a.option({"--mmproj"},
           "llama.cpp mmproj file: the vision tower of a .gguf model (Qwen2-VL, Qwen2.5-VL, Qwen3.5, Qwen3-VL, "
           "Gemma 4)");
  a.flag({"--mmap"}, "use the weights the CPU reads as stored in place from the file mapping: a faster start and less "
                     "memory, a slower decode (default: copied into 2 MiB pages at load)");
  add_device_option(a);
}

void add_device_option(Args& a) {
  a.option({"--device"}, "where the decoder runs: cpu, opencl or opencl:N (pipit inspect --devices)", "cpu");
  a.option({"--precision"}, "exact | fast (f16/bf16 weights: bf16 dot products where the CPU has them, "
                            "x rounded to bf16; about 2x prefill)", "exact");
}

Result<LoadOptions> load_options(const Args& a, bool need_tokenizer) {
  LoadOptions o;
  o.need_tokenizer = need_tokenizer;
  if (a.has("--mmproj")) o.mmproj = a.get("--mmproj");
  if (a.get_flag("--mmap")) o.copy_weights = false;
  if (a.has("--precision")) {
    const std::string p = a.get("--precision");
    if (p != "exact" && p != "fast") return Error::invalid_argument("--precision {}: expected exact or fast", p);
    o.precision_fast = p == "fast";
  }
  if (a.has("--device")) {
    PIPIT_ASSIGN_OR_RETURN(o.device, open_device(a.get("--device")));
  }
  return o;
}

void add_sampling_options(Args& a) {
  a.option({"-n", "--n-predict"}, "tokens to generate (-1: until the context is full or the model stops)", "256");
  // the sampling defaults are the model's generation_config.json values where it has them (as HF generate() and
  // `pipit serve`), these where it does not
  a.option({"--temp"}, "temperature (0 = greedy; default: the model's generation_config.json, else 0.8)", "0.8");
  a.option({"--top-k"}, "top-k (0 = off; default: the model's, else 40)", "40");
  a.option({"--top-p"}, "top-p (1 = off; default: the model's, else 0.95)", "0.95");
  a.option({"--min-p"}, "min-p (0 = off; default: the model's, else 0.05)", "0.05");
  a.option({"--repeat-penalty"}, "repetition penalty (1 = off; default: the model's, else 1.0)", "1.0");
  a.option({"--presence-penalty"}, "presence penalty", "0");
  a.option({"--frequency-penalty"}, "frequency penalty", "0");
  a.option({"--seed"}, "random seed (-1: a new one each run, shown in the speed line and in --json)", "-1");
  a.multi({"--stop"}, "stop string (repeatable)");
  a.flag({"--ignore-eos"}, "do not stop at end-of-sequence tokens");
  a.multi({"-l", "--logit-bias"}, "TOKEN_ID(+|-)BIAS added to a token's logit, e.g. 15043+1 or 15043-inf (= -100: "
                                  "never); repeatable (llama.cpp's form; the server's logit_bias)");
  a.option({"--no-repeat-ngram"}, "ban tokens that would repeat an n-gram of this size (HF no_repeat_ngram_size; "
                                  "0: off; default: the model's, e.g. 20 for DeepSeek-OCR)", "-1");
}

Result<SessionOptions> session_options(const Args& a) {
  SessionOptions o;
  if (a.has("-t")) {
    PIPIT_ASSIGN_OR_RETURN(int64_t t, a.get_int("-t"));
    if (t < 1 || t > Limits::kMaxThreads)
      return Error::invalid_argument("-t {}: threads must be in [1, {}]", t, Limits::kMaxThreads);
    o.n_threads = int(t);
  }
  if (a.has("-c")) {
    PIPIT_ASSIGN_OR_RETURN(int64_t c, a.get_int("-c"));
    if (c < 1 || c > Limits::kMaxCtx)
      return Error::invalid_argument("-c {}: context must be in [1, {}]", c, Limits::kMaxCtx);
    o.n_ctx = int(c);
  }
  PIPIT_ASSIGN_OR_RETURN(o.kv_dtype, kv_type(a));
  return o;
}

Result<DType> kv_type(const Args& a) {
  const std::string kv = a.get("--kv-type");
  if (kv == "f32") return DType::F32;
  if (kv == "f16") return DType::F16;
  if (kv == "q8" || kv == "q8_0") return DType::Q8_0;
  return Error::invalid_argument("--kv-type {}: expected f32, f16 or q8", kv);
}

Status check_kv_type(const Model& m, DType kv) {
  const int64_t hd = m.info().kv.head_dim;
  if (kv == DType::Q8_0 && hd % kQBlock != 0)
    return Error::invalid_argument("--kv-type q8: this model's head_dim {} is not a multiple of {} (use f16)", hd,
                                   kQBlock);
  if (m.info().device && kv != DType::F32 && kv != DType::F16)
    return Error::invalid_argument("--kv-type {}: the KV cache on {} is f32 or f16", dtype_name(kv),
                                   m.info().device->name());
  return Status::ok();
}

Result<GenerateParams> generate_params(const Args& a) {
  GenerateParams p;
  PIPIT_ASSIGN_OR_RETURN(int64_t n, a.get_int("-n"));
  // -1: until the context is full or the model ends (llama.cpp's meaning); the generator stops at the context
  if (n < -1) return Error::invalid_argument("-n {}: expected a count of tokens, or -1 for no limit", n);
  p.max_tokens = n < 0 ? (1 << 24) : int(std::min<int64_t>(n, 1 << 24));
  auto& s = p.sampler;
  PIPIT_ASSIGN_OR_RETURN(double temp, a.get_float("--temp"));
  PIPIT_ASSIGN_OR_RETURN(int64_t top_k, a.get_int("--top-k"));
  PIPIT_ASSIGN_OR_RETURN(double top_p, a.get_float("--top-p"));
  PIPIT_ASSIGN_OR_RETURN(double min_p, a.get_float("--min-p"));
  PIPIT_ASSIGN_OR_RETURN(double rep, a.get_float("--repeat-penalty"));
  PIPIT_ASSIGN_OR_RETURN(double pres, a.get_float("--presence-penalty"));
  PIPIT_ASSIGN_OR_RETURN(double freq, a.get_float("--frequency-penalty"));
  PIPIT_ASSIGN_OR_RETURN(int64_t seed, a.get_int("--seed"));
  s.temperature = float(temp);
  s.top_k = int(std::clamp<int64_t>(top_k, -(1 << 30), 1 << 30));  // past any vocabulary: the same as off
  s.top_p = float(top_p);
  s.min_p = float(min_p);
  s.repetition_penalty = float(rep);
  s.presence_penalty = float(pres);
  s.frequency_penalty = float(freq);
  if (seed < -1) return Error::invalid_argument("--seed {}: expected a seed >= 0, or -1 for a new one", seed);
  s.seed = seed == -1 ? random_seed() : uint64_t(seed);
  // the server's ranges (validate() in runtime/sampler.h), named by our options
  PIPIT_TRY(validate(s, SamplerNames{.temperature = "--temp", .top_k = "--top-k", .top_p = "--top-p",
                                     .min_p = "--min-p", .repetition_penalty = "--repeat-penalty",
                                     .presence_penalty = "--presence-penalty",
                                     .frequency_penalty = "--frequency-penalty"}));
  p.stop = a.get_all("--stop");
  p.ignore_eos = a.get_flag("--ignore-eos");
  PIPIT_ASSIGN_OR_RETURN(int64_t ngram, a.get_int("--no-repeat-ngram"));
  if (ngram < -1 || ngram > Limits::kMaxNoRepeatNgram)
    return Error::invalid_argument("--no-repeat-ngram {}: expected 0 (off) to {}, or -1 for the model's default", ngram,
                                   Limits::kMaxNoRepeatNgram);
  p.no_repeat_ngram_size = int(ngram);
  for (const std::string& lb : a.get_all("--logit-bias")) {
    // ID, then a signed bias: "15043+1", "15043-0.5", "15043-inf" (ban)
    const Status bad = Error::invalid_argument("--logit-bias {}: expected TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. "
                                               "15043+1, 15043-inf)", lb);
    const size_t sign = lb.find_first_of("+-");
    if (sign == std::string::npos || sign == 0) return bad;
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(lb.data(), lb.data() + sign, id);
    if (ec != std::errc() || end != lb.data() + sign || id < 0 || id > INT32_MAX) return bad;
    const std::string num = lb.substr(sign);
    char* e = nullptr;
    const double bias = num == "-inf" ? -100.0 : num == "+inf" ? 100.0 : std::strtod(num.c_str(), &e);
    if (std::isnan(bias) || (e && (*e != '\0' || e == num.c_str()))) return bad;
    p.logit_bias.emplace_back(int32_t(id), float(bias));
  }
  return p;
}

std::vector<std::string> apply_model_sampling(const Args& a, const LoadedModel& lm, GenerateParams& p) {
  std::vector<std::string> ignored;
  const SamplerParams m = model_sampling(lm.generation_config, p.sampler, &ignored);
  auto& s = p.sampler;
  if (!a.has("--temp")) s.temperature = m.temperature;
  if (!a.has("--top-k")) s.top_k = m.top_k;
  if (!a.has("--top-p")) s.top_p = m.top_p;
  if (!a.has("--min-p")) s.min_p = m.min_p;
  if (!a.has("--repeat-penalty")) s.repetition_penalty = m.repetition_penalty;
  return ignored;
}

Status check_model_sampling(const LoadedModel& lm, const GenerateParams& p) {
  return check_logit_bias(p.logit_bias, lm.model->info().n_vocab, "--logit-bias");
}

void add_speculative_options(Args& a) {
  a.option({"--draft"}, "speculative decoding with this draft model (same vocabulary, e.g. a small Qwen3 for a big one)");
  a.flag({"--lookup"}, "speculative decoding with prompt lookup: guesses copied from earlier text (no extra model)");
  a.option({"--draft-max"}, "speculative decoding: tokens guessed per verification pass", "8");
  a.flag({"--mtp"}, "speculative decoding with the model's own multi-token-prediction head (Qwen3.5's mtp.* layer; "
                    "no extra model)");
  a.option({"--mtp-n"}, "with --mtp: tokens guessed per verification pass (the head is trained for 1; more chain "
                        "its own guesses)", "1");
}

Status SpecSetup::attach(Session& target) {
  if (!mtp) return Status::ok();
  detach();
  PIPIT_ASSIGN_OR_RETURN(mtp_draft, MtpDraft::create(target));
  params.mtp = mtp_draft.get();
  return Status::ok();
}

void SpecSetup::detach() {
  params.mtp = nullptr;
  mtp_draft.reset();
}

Result<std::unique_ptr<SpecSetup>> speculative_setup(const Args& a, const Model& target, const SessionOptions& so,
                                                     std::shared_ptr<ThreadPool> pool) {
  auto out = std::make_unique<SpecSetup>();
  if (a.get_flag("--mtp")) {
    if (a.has("--draft") || a.get_flag("--lookup")) return Error::invalid_argument("--mtp with --draft or --lookup: choose one");
    PIPIT_ASSIGN_OR_RETURN(int64_t k, a.get_int("--mtp-n"));
    if (k < 1 || k > 16) return Error::invalid_argument("--mtp-n {}: expected a value in [1, 16]", k);
    if (auto h = mtp_of(const_cast<Model&>(target)); !h) return h.status().with_context("--mtp");
    if (target.info().device) return Error::unsupported("--mtp: the MTP head runs on the CPU only");
    out->params.n_draft = int(k);
    out->mtp = true;
    return out;
  }
  if (!a.has("--draft") && !a.get_flag("--lookup")) return out;
  if (a.has("--draft") && a.get_flag("--lookup")) return Error::invalid_argument("--draft and --lookup: choose one");
  PIPIT_ASSIGN_OR_RETURN(int64_t k, a.get_int("--draft-max"));
  if (k < 1 || k > 16) return Error::invalid_argument("--draft-max {}: expected a value in [1, 16]", k);
  out->params.n_draft = int(k);
  if (a.has("--draft")) {
    auto dm = load_model(a.get("--draft"));
    if (!dm) return dm.status().with_context("--draft");
    if (dm->model->info().n_vocab != target.info().n_vocab)
      return Error::invalid_argument("--draft {}: its vocabulary has {} tokens, the model's {}; a draft model must "
                                     "share the vocabulary", a.get("--draft"), dm->model->info().n_vocab,
                                     target.info().n_vocab);
    out->draft_model = std::move(dm).value();
    auto ds = Session::create(*out->draft_model->model, so, std::move(pool));
    if (!ds) return ds.status().with_context("--draft");
    out->draft_session = std::move(ds).value();
    out->draft.session = out->draft_session.get();
    out->params.draft = &out->draft;
  }
  return out;
}

void add_template_options(Args& a) {
  a.option({"--chat-template"}, "a Jinja chat template file, used instead of the model's");
  a.option({"--chat-template-kwargs"}, "JSON object of template variables, e.g. '{\"enable_thinking\": false}'");
}

Result<nlohmann::json> template_context(const Args& a) {
  nlohmann::json ctx = nlohmann::json::object();
  if (a.has("--chat-template-kwargs")) {
    auto j = nlohmann::json::parse(a.get("--chat-template-kwargs"), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return Error::invalid_argument("--chat-template-kwargs: expected a JSON object of template variables, got '{}'",
                                     a.get("--chat-template-kwargs").substr(0, 60));
    ctx = std::move(j);
  }
  if (a.has("--chat-template")) {  // a literal template in the extra context replaces the model's (chat_template.h)
    auto t = read_file(a.get("--chat-template"), Limits::kMaxPromptFile);
    if (!t) return t.status().with_context("--chat-template");
    if (t->empty()) return Error::invalid_argument("--chat-template {}: the file is empty", a.get("--chat-template"));
    ctx["chat_template"] = std::move(t).value();
  }
  return ctx;
}

Status check_system_option(const Args& a) {
  if (!a.typed("-s")) return Status::ok();
  const std::string v = a.get("-s");
  char* end = nullptr;
  errno = 0;
  std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno) return Status::ok();
  return Error::invalid_argument("-s {}: -s is the system message here (llama.cpp's -s is the seed): use --seed {} "
                                 "for a seed, or --system {} for a system message that is a number", v, v, v);
}

Result<std::string> read_prompt_file(const std::string& path) {
  auto t = read_file(path == "-" ? "/dev/stdin" : path, Limits::kMaxPromptFile);
  if (!t) return t.status().with_context(path == "-" ? "-f - (stdin)" : "-f");
  return t;
}

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
bool g_line_open = false;  // a progress line without its newline is on stderr

void on_sigint(int) {
  if (g_interrupted) {  // the second Ctrl-C: the first one was not seen by a loop (tokenizing); leave now
    const char msg[] = "\npipit: interrupted\n";
    ssize_t w = ::write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(130);
  }
  g_interrupted = 1;
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
}

bool interrupted() { return g_interrupted != 0; }

Session::Progress prefill_progress(bool quiet) {
  const char* env = std::getenv("PIPIT_PROGRESS");
  const bool tty = isatty(2) == 1;
  const bool show = !quiet && (env ? std::string(env) == "1" : tty);
  using Clock = std::chrono::steady_clock;
  struct State {
    Clock::time_point t0 = Clock::now(), last{};
    bool shown = false;     // a progress line is on stderr
    bool finished = false;  // the prompt's eval is over: later calls are decode steps, never shown
  };
  auto st = std::make_shared<State>();
  return [show, tty, st](int64_t done, int64_t total) {
    if (!show || st->finished) return !interrupted();
    const auto now = Clock::now();
    const double sec = std::chrono::duration<double>(now - st->t0).count();
    if (done >= total) {  // the prompt is in: take the line away (a terminal) or end it (a log), and stay quiet
      st->finished = true;
      if (st->shown) std::fputs(tty ? "\r\033[K" : "\n", stderr);
      std::fflush(stderr);
      g_line_open = false;
      return !interrupted();
    }
    // after half a second, at most 4 updates a second
    if (sec > 0.5 && std::chrono::duration<double>(now - st->last).count() > 0.25) {
      const double tps = double(done) / sec;
      const double left = tps > 0 ? double(total - done) / tps : 0;
      std::fprintf(stderr, "\r[pipit] prompt %lld/%lld tokens (%.0f%%), %.1f tok/s, %.0f s left   ", (long long)done,
                   (long long)total, 100.0 * double(done) / double(total), tps, left);
      std::fflush(stderr);
      st->last = now;
      st->shown = true;
      g_line_open = true;
    }
    return !interrupted();
  };
}

int interrupted_exit(const Args& a, const std::string& what) {
  std::fprintf(stderr, "%spipit %s: interrupted (Ctrl-C) %s\n", g_line_open ? "\n" : "", a.command().c_str(),
               what.c_str());
  return 130;
}

}  // namespace pipit::cli
