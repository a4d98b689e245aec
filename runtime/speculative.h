// Speculative decoding: cheap guesses of the next few tokens, checked by the target model in one forward pass.
//
// Guesses come from prompt lookup (the tokens that followed the latest earlier occurrence of the context's last
// n-gram: summaries, code edits and quoting chats repeat their input), from a draft model that shares the target's
// vocabulary (its greedy tokens), or from the model's own multi-token-prediction head (runtime/mtp_draft.h: Qwen3.5's
// mtp.* layer, fed with the target's hidden states; no second model). The target evaluates [last token, g1 .. gk] at once; row i's logits give the
// token the target picks after g1 .. gi. Every front end checks them by one rule, Sequence::verify: a token is
// sampled from each row exactly as plain decoding would sample it (same sampler state, same history) and the next
// row is used while that token equals the row's guess. The output is therefore the plain output token for token,
// greedy or seeded, as long as a row of a batched pass equals the one-token pass (the kernels are batch-invariant:
// tested). With one-hot guesses this is the speculative rejection rule (Leviathan et al. 2023: accept d with
// probability p(d) / q(d) = p(d), else draw from p without d) in the form that keeps the random stream as it is.
// (A sampled draft with the general min(1, p/q) rule accepts more often at high temperature but gives other text
// than plain decoding for the same seed: every front end chose the identical-output form.)
//
// Rejected guesses leave rows in the KV cache: the session is cut back to the accepted ones (Session::truncate;
// rings keep their window since a verification adds at most n_batch rows). A recurrent state (Qwen3.5) cannot be
// cut back: the session snapshots it before each verification and, after a rejection, goes back to the snapshot;
// generate() and the Engine feed the a + 1 accepted tokens again with the next sampled token, in a pass without
// guesses that emits that token (a pass of their own would emit none; decode passes cost about the same for a few
// more rows).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace pipit {

class Session;
class MtpDraft;

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
  // The model's MTP head following the target session (runtime/mtp_draft.h; null: none). Takes precedence over the
  // two above. generate() only: the Engine has its own head per slot (EngineOptions::mtp).
  MtpDraft* mtp = nullptr;
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

// The Session-side source of guesses, used by generate(): prompt lookup, a draft model's greedy tokens (its own
// session follows the history, reusing what it already holds), or the MTP head's. `n_base`: the target's context
// position of the generation's first token (tokens the session held before the prompt).
class Speculator {
 public:
  explicit Speculator(const SpecParams& p, int n_base = 0) : p_(p), n_base_(n_base) {}
  // Up to k guesses of what follows `history` (the target's tokens of this generation; SpecParams::context is put
  // before them).
  Result<std::vector<int32_t>> propose(std::span<const int32_t> history, int k);

 private:
  SpecParams p_;
  int n_base_;
  std::vector<int32_t> full_;  // context + history
};

}  // namespace pipit
