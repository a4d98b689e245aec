// Speculative decoding: cheap guesses of the next few tokens, checked by the target model in one forward pass.
//
// Drafts come from prompt lookup (the tokens that followed the latest earlier occurrence of the context's last
// n-gram: summaries, code edits and quoting chats repeat their input) or from a draft model that shares the target's
// vocabulary. The target evaluates [last token, d1 .. dk] at once; row i's logits give the token the target would
// pick after d1 .. di, so the drafts are accepted while they match and the first mismatch is replaced by the
// target's own token (all accepted: the last row gives one more). Greedy output is therefore the plain greedy
// output, token for token, as long as a row of a batched pass equals the one-token pass (the kernels are
// batch-invariant: tested). Sampling uses standard speculative rejection sampling (Leviathan et al. 2023, Chen et
// al. 2023): draft d with draft probability q(d) is accepted with probability min(1, p(d) / q(d)), else a token is
// drawn from max(0, p - q) renormalised, which leaves every emitted token distributed as the target's p (with p the
// distribution after penalties, temperature, top-k, top-p and min-p; prompt lookup's q is one-hot).
//
// Rejected drafts leave rows in the KV cache: the session is cut back to the accepted ones (Session::truncate;
// rings keep their window since a verification adds at most n_batch rows). A recurrent state (Qwen3.5) cannot be
// cut back: the session snapshots it before each verification and, after a rejection, goes back to the snapshot
// and evaluates the accepted tokens again (an extra pass of a + 1 tokens).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pipit {

class Session;

// A draft model's session and the tokens it holds (kept across generations, so that the next one reuses them).
struct Draft {
  Session* session;
  std::vector<int32_t> tokens;
};

struct SpecParams {
  int n_draft = 0;  // tokens guessed per verification (0: off)
  // Prompt lookup: the longest n-gram in [ngram_min, ngram_max] that ends the context and occurred before it
  int ngram_min = 1, ngram_max = 4;
  // A draft model (null: prompt lookup): its own session, used by one generation at a time. Its vocabulary must be
  // the target's (checked by the callers that load it: same size).
  struct Draft* draft = nullptr;
  // Tokens the target session holds before the prompt generate() is given (a C API conversation's earlier turns):
  // prompt lookup searches them too and a draft model is given them as context.
  std::span<const int32_t> context;
};

struct SpecStats {
  int64_t steps = 0;     // verification passes
  int64_t drafted = 0;   // tokens guessed
  int64_t accepted = 0;  // of those, accepted
  double acceptance() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
};

// At most k tokens that followed the latest earlier occurrence of the last n tokens of `history` (longest n first).
std::vector<int32_t> lookup_draft(std::span<const int32_t> history, int k, int ngram_min, int ngram_max);

}  // namespace pipit

#include <memory>

#include "core/status.h"
#include "runtime/sampler.h"

namespace pipit {

// The per-generation side of speculative decoding, used by generate(): what the draft session holds and the
// draft's distributions of the current guesses.
class Speculator {
 public:
  Speculator(const SpecParams& p, const SamplerParams& sampler);
  // history ends with the token just sampled, not yet evaluated by `target`. Evaluates it together with up to k
  // guesses and returns the tokens that follow it: the accepted guesses and the target's own next token. The
  // target then holds history and the accepted guesses (the last returned token is not evaluated).
  Result<std::vector<int32_t>> step(Session& target, Sampler& sampler, std::span<const int32_t> history, int k);
  const SpecStats& stats() const { return stats_; }

 private:
  Result<std::vector<int32_t>> propose(std::span<const int32_t> history, int k);

  SpecParams p_;
  std::unique_ptr<Sampler> draft_sampler_;             // a draft model's own draws (sampling)
  std::vector<std::vector<std::pair<float, int32_t>>> q_;  // draft model: each guess's distribution (sampling)
  std::vector<int32_t> full_;  // context + history
  SpecStats stats_;
};

}  // namespace pipit
