// What a front end samples with where its caller sets nothing: the model's recommended sampling from
// generation_config.json (as HF generate() and `pipit serve` use it), and a fresh seed unless one is given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"

namespace pipit {

// `base` with generation_config.json's temperature, top_p, top_k, min_p and repetition_penalty laid over it
// (do_sample = false: greedy). A value outside validate()'s ranges (temperature 5, top_k -3, a NaN) is dropped for
// base's, and its name appended to *ignored, so that the file never turns every request into an error.
SamplerParams model_sampling(const nlohmann::json& generation_config, const SamplerParams& base,
                             std::vector<std::string>* ignored = nullptr);

// OpenAI's logit_bias checked for a vocabulary of n_vocab: ids in [0, n_vocab), biases in [-100, 100] (-100 bans
// the token). `what` names the option in the error ("--logit-bias", "logit_bias").
Status check_logit_bias(const std::vector<std::pair<int32_t, float>>& bias, int64_t n_vocab, const char* what);

// A seed from the operating system's entropy (std::random_device), for a caller who gave none: 63 bits, so that
// it can be passed back wherever a seed is read as a signed 64-bit integer.
uint64_t random_seed();

}  // namespace pipit
