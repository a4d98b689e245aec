// validate(SamplerParams): the ranges of the sampling settings, in one place for the CLI and the server, so that a
// value one front end refuses is not silently taken by the other (issue 35: `--temp -1` ran while the server said 400).
#include <cmath>

#include "runtime/sampler.h"

namespace pipit {

namespace {

struct Range {
  const char* name;
  double value, lo, hi;
};

}  // namespace

Status validate(const SamplerParams& p, const SamplerNames& names, const char** bad) {
  // OpenAI's ranges for temperature, top_p and the two penalties; min_p is a fraction like top_p; the repetition
  // penalty divides logits (0 would divide by zero; HF takes any positive value, 10 is already absurd).
  const Range ranges[] = {
      {names.temperature, p.temperature, 0, 2},
      {names.top_p, p.top_p, 0, 1},
      {names.min_p, p.min_p, 0, 1},
      {names.presence_penalty, p.presence_penalty, -2, 2},
      {names.frequency_penalty, p.frequency_penalty, -2, 2},
      {names.repetition_penalty, p.repetition_penalty, 0.01, 10},
  };
  for (const Range& r : ranges) {
    if (std::isfinite(r.value) && r.value >= r.lo && r.value <= r.hi) continue;
    if (bad) *bad = r.name;
    return Error::invalid_argument("'{}' is {}; expected a number in [{}, {}]", r.name, r.value, r.lo, r.hi);
  }
  // top_k: 0 and -1 both mean off (HF and vLLM spellings); the upper end is the vocabulary, which only the caller knows
  if (p.top_k < -1) {
    if (bad) *bad = names.top_k;
    return Error::invalid_argument("'{}' is {}; expected -1 or 0 (off) or a count of tokens", names.top_k, p.top_k);
  }
  return Status::ok();
}

}  // namespace pipit
