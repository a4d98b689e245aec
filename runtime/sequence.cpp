// Sequence: sampling, streaming and stopping for one request (see sequence.h).
#include "runtime/sequence.h"

#include <algorithm>
#include <limits>

#include "runtime/grammar.h"

namespace pipit {

Sequence::Sequence(const Model& model, const Tokenizer* tok, std::span<const int32_t> prompt,
                   const GenerateParams& p, int n_ctx, int n_base, OnToken on_token, OnLogprob on_logprob)
    : model_(model),
      p_(p),
      n_ctx_(n_ctx),
      n_base_(n_base),
      ngram_(p.no_repeat_ngram_size < 0 ? model.info().no_repeat_ngram_size : p.no_repeat_ngram_size),
      on_token_(std::move(on_token)),
      on_logprob_(std::move(on_logprob)),
      history_(prompt.begin(), prompt.end()),
      sampler_(p.sampler),
      text_(tok, prompt, p.stop) {
  res_.n_prompt = int(prompt.size());
  if (p_.grammar && tok) {
    grammar_ = std::make_unique<GrammarMatcher>(p_.grammar);
    table_ = TokenTable::get(*tok);
  }
}

Sequence::~Sequence() = default;

void repeated_ngram_ends(std::span<const int32_t> h, int n, std::vector<int32_t>& out) {
  out.clear();
  const int64_t len = int64_t(h.size());
  if (n <= 0 || len + 1 < n) return;
  const auto tail = h.subspan(size_t(len - (n - 1)));  // empty for n = 1: every token seen is banned
  for (int64_t i = 0; i + n <= len; ++i)
    if (std::equal(tail.begin(), tail.end(), h.begin() + i)) out.push_back(h[size_t(i + n - 1)]);
}

bool Sequence::is_eos(int32_t token) const { return pipit::is_eos(p_, model_, token); }

// The row the sampler sees: the model's row itself, or a copy with the request's logit_bias and the
// no_repeat_ngram_size bans (the model's row is left as it is: log-probabilities are reported from it). A bias of -100
// is a ban (-inf), not merely a low logit: OpenAI documents -100 as "should result in a ban", and an app that bans a
// token must never see it; +100 is added as it is, which outweighs any logit a model gives.
std::span<const float> Sequence::adjusted(std::span<const float> logits) {
  banned_.clear();
  if (ngram_ > 0) repeated_ngram_ends(history_, ngram_, banned_);
  if (p_.logit_bias.empty() && banned_.empty()) return logits;
  adjusted_.assign(logits.begin(), logits.end());
  const float ninf = -std::numeric_limits<float>::infinity();
  for (const auto& [id, bias] : p_.logit_bias) {
    if (id < 0 || size_t(id) >= adjusted_.size()) continue;
    float& l = adjusted_[size_t(id)];
    l = bias <= -100.0f ? ninf : l + bias;
  }
  for (int32_t t : banned_)
    if (t >= 0 && size_t(t) < adjusted_.size()) adjusted_[size_t(t)] = ninf;
  return adjusted_;
}

// With a grammar, the token the sampler draws from the full distribution is kept when the grammar allows it (the
// common case, costing one walk over the token's bytes); otherwise the whole vocabulary is masked and the sampler
// draws again from the allowed tokens. Drawing from p, then from p restricted to the allowed set when the first
// draw is not allowed, gives each allowed token p(x) + P(not allowed) p(x) / P(allowed) = p(x) / P(allowed):
// exactly the masked distribution (greedy: the allowed argmax). -1: nothing is allowed.
int32_t Sequence::sample(std::span<const float> raw) {
  const std::span<const float> logits = adjusted(raw);
  const int32_t t = sampler_.sample(logits, history_);
  // every token banned: the sampler's fallback (the first of equal -inf logits) must not emit a banned one
  const float ninf = -std::numeric_limits<float>::infinity();
  if (!grammar_) return logits[size_t(t)] == ninf ? -1 : t;
  auto fits = [&](int32_t id) {
    if (is_eos(id)) return grammar_->can_end();
    if (size_t(id) >= table_->size() || table_->bytes(id).empty()) return false;
    return grammar_->allows(table_->bytes(id));
  };
  int32_t pick = t;
  if (!fits(t)) {
    grammar_->mask(*table_, allowed_);
    masked_.assign(logits.begin(), logits.end());
    bool any = false;
    for (size_t i = 0; i < masked_.size(); ++i) {
      const bool ok = i < allowed_.size() && allowed_[i];
      if (!ok) masked_[i] = ninf;
      any |= ok;
    }
    if (grammar_->can_end() && !p_.ignore_eos) {
      const auto& eos = p_.eos_ids.empty() ? model_.info().eos_ids : p_.eos_ids;
      for (int32_t e : eos)
        if (e >= 0 && size_t(e) < masked_.size()) {
          masked_[size_t(e)] = logits[size_t(e)];
          any = true;
        }
    }
    if (!any) return -1;
    pick = sampler_.sample(masked_, history_);
    if (masked_[size_t(pick)] == ninf) return -1;  // every allowed token was cut by top-k / top-p
  }
  if (!is_eos(pick)) grammar_->accept(table_->bytes(pick));
  res_.grammar_masks += pick != t;
  return pick;
}

void Sequence::finish_text() {
  std::string tail = text_.finish();
  res_.text += tail;
  if (!tail.empty() && on_token_) on_token_(tail, -1);
}

bool Sequence::emit(std::span<const float> logits) {
  const int32_t next = sample(logits);
  // next < 0: the grammar allows no token and cannot end here: stop as at an EOS rather than break it
  if (next < 0 || is_eos(next)) {
    res_.reason = StopReason::kEos;
    finish_text();
    return true;
  }
  if (p_.logprobs >= 0) {
    res_.logprobs.push_back(token_logprob(logits, next, p_.logprobs));
    if (on_logprob_) on_logprob_(res_.logprobs.back());
  }
  res_.tokens.push_back(next);
  history_.push_back(next);
  const TextStream::Step step = text_.push(next);
  res_.text += step.text;
  bool end = true;
  if (on_token_ && !on_token_(step.text, next)) res_.reason = StopReason::kCallback;
  else if (step.stopped) res_.reason = StopReason::kStopString;
  else if (grammar_ && grammar_->finished()) res_.reason = StopReason::kEos;  // nothing may follow
  else if (int(res_.tokens.size()) >= p_.max_tokens) res_.reason = StopReason::kLength;
  // the context is full: `next` was sampled from the last position's logits and has no row to go into
  else if (int64_t(n_base_) + int64_t(history_.size()) > n_ctx_) res_.reason = StopReason::kContext;
  else end = false;
  if (end && res_.reason != StopReason::kStopString && res_.reason != StopReason::kCallback) finish_text();
  return end;
}

Sequence::Verified Sequence::verify(const float* rows, int64_t n_vocab, std::span<const int32_t> guesses) {
  const int k = int(guesses.size());
  int j = 0;
  bool end = false;
  for (;;) {
    end = emit(std::span<const float>(rows + j * n_vocab, size_t(n_vocab)));
    if (end || j == k || history_.back() != guesses[size_t(j)]) break;
    ++j;
  }
  if (k > 0) {
    res_.spec.steps++;
    res_.spec.drafted += k;
    res_.spec.accepted += j;
  }
  return {j, end};
}

}  // namespace pipit
