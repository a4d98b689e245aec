// Sampling: greedy, temperature, top-k, top-p, min-p, repetition / presence / frequency penalties, seeded RNG.
// Order as in llama.cpp and HF: penalties -> temperature -> top-k -> top-p -> min-p -> draw.
#pragma once

#include <bit>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/status.h"

namespace pipit {

struct SamplerParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax)
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repetition_penalty = 1.0f;  // HF style: logit / p if > 0 else logit * p, for tokens seen
  float presence_penalty = 0.0f;    // OpenAI style: minus once per seen token
  float frequency_penalty = 0.0f;   // OpenAI style: minus per occurrence
  int penalty_last_n = 256;         // how much history the penalties look at
  uint64_t seed = 0xC0FFEE;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}
  // Picks a token from logits (n_vocab floats); `history` is every token so far (prompt + generated).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  const SamplerParams& params() const { return p_; }
  // Speculative decoding (runtime/speculative.h): the distribution sample() draws from, as (probability, token)
  // pairs summing to 1 (greedy: the argmax with probability 1); valid until the next call. uniform() is a draw in
  // [0, 1) and draw() a token from a (not necessarily normalized) distribution, both from this sampler's RNG.
  const std::vector<std::pair<float, int32_t>>& distribution(std::span<const float> logits,
                                                             std::span<const int32_t> history);
  double uniform();
  int32_t draw(std::span<const std::pair<float, int32_t>> dist);

 private:
  // The candidates after penalties, temperature, top-k, top-p and min-p: returns the token when greedy, else -1
  // with either cand_ (top-k: unnormalized, sorted) or, without top-k (full_), the members of probs_ (member()).
  int32_t candidates(std::span<const float> logits, std::span<const int32_t> history);
  std::span<const float> penalized(std::span<const float> logits, std::span<const int32_t> history);
  void top_k_candidates(std::span<const float> l, size_t k);
  void full_vocab_candidates(std::span<const float> l);
  void top_p_cut(double target);  // sets cut_ / tie_last_: the largest values holding `target` of the mass
  double sum_members();  // also fills block_
  static constexpr size_t kBlock = 64;
  int32_t draw_full();
  bool member(size_t i) const {
    const uint32_t k = std::bit_cast<uint32_t>(probs_[i]);
    return k > cut_ || (k == cut_ && int64_t(i) <= tie_last_);
  }
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<float> work_;
  std::vector<std::pair<float, int32_t>> cand_;
  // without top-k: e^(l / T - max) per token, and which of them are in: float bits above cut_, or equal to it
  // with id <= tie_last_
  bool full_ = false;
  std::vector<float> probs_;
  uint32_t cut_ = 0;
  int64_t tie_last_ = -1;
  double total_ = 0;  // the members' mass
  std::vector<double> hist_, block_;  // block_: the members' mass per kBlock tokens
  std::vector<int32_t> bucket_;
  std::vector<int32_t> ties_;  // the members whose value is cut_ (id <= tie_last_), in id order
};

int32_t argmax(std::span<const float> x);

// The names validate() gives each setting in its message: the server's JSON fields by default; the CLI passes its
// option names ("--temp").
struct SamplerNames {
  const char* temperature = "temperature";
  const char* top_k = "top_k";
  const char* top_p = "top_p";
  const char* min_p = "min_p";
  const char* repetition_penalty = "repetition_penalty";
  const char* presence_penalty = "presence_penalty";
  const char* frequency_penalty = "frequency_penalty";
};
// One rule for every front end (CLI options, server requests): each setting finite and in its range (OpenAI's where
// it has one). An invalid_argument naming the first setting out of range; `bad` (when given) gets its name.
// runtime/sampler_params.cpp.
Status validate(const SamplerParams& p, const SamplerNames& names = {}, const char** bad = nullptr);

}  // namespace pipit
