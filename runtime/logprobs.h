// Token log-probabilities for the OpenAI `logprobs` / `top_logprobs` fields: log-softmax of the model's raw logits
// (before penalties, temperature, top-k/p and any grammar mask), so a figure here equals what `pipit logits` gives
// for the same prefix, whatever the sampling settings.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace pipit {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // the n most likely tokens, most likely first (ties: lower id first)
};

// log p(token) and the n_top most likely tokens (n_top 0..20) under softmax(logits).
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int n_top);

}  // namespace pipit
