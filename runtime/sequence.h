// Sequence: one generation request's token side, the same for every front end. It samples the next token from a
// row of logits (under the request's grammar, if any), records its log-probabilities, streams its text (stop
// strings held back), decides when the request ends, and checks speculative guesses by the one rule that keeps the
// output the plain one. The Engine (the server) and generate() (pipit run / chat / bench, the C API, Python) step
// their requests through it; they differ only in how they run forward passes (many KV slots at once, or one
// Session).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/generator.h"

namespace pipit {

class GrammarMatcher;
class TokenTable;

// HF's NoRepeatNGramLogitsProcessor: the tokens that would complete an n-gram already in `h` (prompt + answer so
// far), i.e. those that followed each earlier occurrence of h's last n - 1 tokens (none while h is shorter than
// n - 1). Possibly repeated.
void repeated_ngram_ends(std::span<const int32_t> h, int n, std::vector<int32_t>& out);

class Sequence {
 public:
  // Called with each piece of text (may be empty) and its token (-1: the held-back tail at the end); false stops.
  using OnToken = std::function<bool(const std::string& piece, int32_t token)>;
  using OnLogprob = std::function<void(const TokenLogprob& lp)>;

  // `n_base`: tokens the context holds before `prompt` (a conversation's earlier turns); `n_ctx`: what it holds
  // in all. A grammar needs `tok` (checked by the callers: Engine::submit, generate()).
  Sequence(const Model& model, const Tokenizer* tok, std::span<const int32_t> prompt, const GenerateParams& p,
           int n_ctx, int n_base = 0, OnToken on_token = {}, OnLogprob on_logprob = {});
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  // Samples the next token from one row of logits and hands it on (text, callbacks, stop conditions). True when the
  // request has ended: result().reason says why.
  bool emit(std::span<const float> logits);

  // Speculative decoding's check. rows[i] (n_vocab floats each) are the logits after guess i (rows[0]: after the
  // last emitted token). One token is sampled per row, exactly as without guesses (same sampler state, same
  // history), and the next row is used while the sampled token is that row's guess. So the output is the plain one
  // token for token, greedy or seeded: for one-hot guesses (prompt lookup's, a draft model's greedy ones) "draw
  // x ~ p, accept the guess iff x == guess" is the speculative rejection rule (accept with p(d) / q(d) = p(d), else
  // draw from p without d) in the form that keeps the sampler's random stream as it is.
  struct Verified {
    int accepted;  // guesses accepted (their rows' KV stays; the rest is to be dropped)
    bool ended;
  };
  Verified verify(const float* rows, int64_t n_vocab, std::span<const int32_t> guesses);

  const std::vector<int32_t>& history() const { return history_; }  // prompt + generated (EOS excluded)
  GenerateResult& result() { return res_; }
  const GenerateParams& params() const { return p_; }
  bool is_eos(int32_t token) const;

 private:
  int32_t sample(std::span<const float> logits);  // under the grammar if any; -1: the grammar allows nothing
  std::span<const float> adjusted(std::span<const float> logits);  // with logit_bias and n-gram bans, if any
  void finish_text();                             // the held-back tail, at an end that is not a stop / cancel

  const Model& model_;
  GenerateParams p_;
  int n_ctx_, n_base_;
  int ngram_;  // no_repeat_ngram_size in force (0: off)
  std::vector<int32_t> banned_;  // this step's no_repeat_ngram_size bans
  OnToken on_token_;
  OnLogprob on_logprob_;
  std::vector<int32_t> history_;
  Sampler sampler_;
  TextStream text_;
  std::unique_ptr<GrammarMatcher> grammar_;
  std::shared_ptr<const TokenTable> table_;  // the vocabulary's bytes, for the grammar
  std::vector<float> adjusted_;              // logits + logit_bias, n-gram bans at -inf
  std::vector<float> masked_;                // logits with the tokens the grammar forbids at -inf
  std::vector<uint8_t> allowed_;
  GenerateResult res_;
};

}  // namespace pipit
