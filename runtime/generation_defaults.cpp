// The model's recommended sampling (generation_config.json) and fresh seeds; see generation_defaults.h.
#include "runtime/generation_defaults.h"

#include <random>

namespace pipit {

namespace {

const nlohmann::json* field(const nlohmann::json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

SamplerParams model_sampling(const nlohmann::json& gc, const SamplerParams& base, std::vector<std::string>* ignored) {
  SamplerParams s = base;
  if (!gc.is_object()) return s;
  auto num = [&](const char* name, float& out) {
    if (const auto* v = field(gc, name); v && v->is_number()) out = v->get<float>();
  };
  num("temperature", s.temperature);
  num("top_p", s.top_p);
  num("min_p", s.min_p);
  num("repetition_penalty", s.repetition_penalty);
  if (const auto* v = field(gc, "top_k"); v && v->is_number_integer())
    s.top_k = int(std::clamp<int64_t>(v->get<int64_t>(), -(1 << 30), 1 << 30));
  if (const auto* v = field(gc, "do_sample"); v && v->is_boolean() && !v->get<bool>()) s.temperature = 0.0f;
  const char* bad = nullptr;
  for (int i = 0; i < 8 && !validate(s, {}, &bad).is_ok() && bad; ++i) {
    const std::string name = bad;
    if (ignored) ignored->push_back(name);
    if (name == "temperature") s.temperature = base.temperature;
    else if (name == "top_p") s.top_p = base.top_p;
    else if (name == "min_p") s.min_p = base.min_p;
    else if (name == "top_k") s.top_k = base.top_k;
    else if (name == "repetition_penalty") s.repetition_penalty = base.repetition_penalty;
    else return base;  // a field this function does not read: keep nothing of the file's
  }
  return s;
}

Status check_logit_bias(const std::vector<std::pair<int32_t, float>>& bias, int64_t n_vocab, const char* what) {
  for (const auto& [id, b] : bias) {
    if (id < 0 || id >= n_vocab) return Error::invalid_argument("{}: token id {} is not in [0, {})", what, id, n_vocab);
    if (!(b >= -100.0f && b <= 100.0f))
      return Error::invalid_argument("{}: bias {} of token {} is not in [-100, 100]", what, b, id);
  }
  return Status::ok();
}

uint64_t random_seed() {
  std::random_device rd;
  // 63 bits: the seed is shown to be passed back (`--seed N`, seed=N), and every parser of a signed 64-bit
  // integer (the CLI's, JSON readers) takes it
  return ((uint64_t(rd()) << 32) ^ uint64_t(rd())) & 0x7FFFFFFFFFFFFFFFull;
}

}  // namespace pipit
