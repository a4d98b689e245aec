// Shared CLI option parsing.
#include "cli/common.h"

namespace pipit::cli {

void add_model_options(Args& a) {
  a.option({"-m", "--model"}, "model: HF checkpoint dir, .pipit or .gguf file");
  a.option({"-t", "--threads"}, "threads (default: physical cores)");
  a.option({"-c", "--ctx"}, "context length (default: min(model max, 4096))");
  a.option({"--kv-type"}, "KV cache dtype: f32, f16 or q8 (q8_0 blocks: head_dim a multiple of 32)", "f32");
}

void add_sampling_options(Args& a) {
  a.option({"-n", "--n-predict"}, "tokens to generate", "256");
  a.option({"--temp"}, "temperature (0 = greedy)", "0.8");
  a.option({"--top-k"}, "top-k (0 = off)", "40");
  a.option({"--top-p"}, "top-p (1 = off)", "0.95");
  a.option({"--min-p"}, "min-p (0 = off)", "0.05");
  a.option({"--repeat-penalty"}, "repetition penalty (1 = off)", "1.0");
  a.option({"--presence-penalty"}, "presence penalty", "0");
  a.option({"--frequency-penalty"}, "frequency penalty", "0");
  a.option({"--seed"}, "random seed", "12648430");
  a.multi({"--stop"}, "stop string (repeatable)");
  a.flag({"--ignore-eos"}, "do not stop at end-of-sequence tokens");
}

Result<SessionOptions> session_options(const Args& a) {
  SessionOptions o;
  if (a.has("-t")) {
    PIPIT_ASSIGN_OR_RETURN(int64_t t, a.get_int("-t"));
    if (t < 1 || t > 1024) return Error::invalid_argument("-t {}: threads must be in [1, 1024]", t);
    o.n_threads = int(t);
  }
  if (a.has("-c")) {
    PIPIT_ASSIGN_OR_RETURN(int64_t c, a.get_int("-c"));
    if (c < 1 || c > (1 << 24)) return Error::invalid_argument("-c {}: context must be in [1, 16777216]", c);
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
  return Status::ok();
}

Result<GenerateParams> generate_params(const Args& a) {
  GenerateParams p;
  PIPIT_ASSIGN_OR_RETURN(int64_t n, a.get_int("-n"));
  if (n < 0) return Error::invalid_argument("-n {}: must be >= 0", n);
  p.max_tokens = int(std::min<int64_t>(n, 1 << 24));
  auto& s = p.sampler;
  PIPIT_ASSIGN_OR_RETURN(double temp, a.get_float("--temp"));
  PIPIT_ASSIGN_OR_RETURN(int64_t top_k, a.get_int("--top-k"));
  PIPIT_ASSIGN_OR_RETURN(double top_p, a.get_float("--top-p"));
  PIPIT_ASSIGN_OR_RETURN(double min_p, a.get_float("--min-p"));
  PIPIT_ASSIGN_OR_RETURN(double rep, a.get_float("--repeat-penalty"));
  PIPIT_ASSIGN_OR_RETURN(double pres, a.get_float("--presence-penalty"));
  PIPIT_ASSIGN_OR_RETURN(double freq, a.get_float("--frequency-penalty"));
  PIPIT_ASSIGN_OR_RETURN(int64_t seed, a.get_int("--seed"));
  if (rep <= 0) return Error::invalid_argument("--repeat-penalty {}: must be > 0", rep);
  s.temperature = float(temp);
  s.top_k = int(top_k);
  s.top_p = float(top_p);
  s.min_p = float(min_p);
  s.repetition_penalty = float(rep);
  s.presence_penalty = float(pres);
  s.frequency_penalty = float(freq);
  s.seed = uint64_t(seed);
  p.stop = a.get_all("--stop");
  p.ignore_eos = a.get_flag("--ignore-eos");
  return p;
}

}  // namespace pipit::cli
