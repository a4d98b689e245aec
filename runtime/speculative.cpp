// Speculative decoding (see speculative.h).
#include "runtime/speculative.h"

#include <algorithm>

#include "runtime/mtp_draft.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace pipit {

std::vector<int32_t> lookup_draft(std::span<const int32_t> history, int k, int ngram_min, int ngram_max) {
  const int64_t n = int64_t(history.size());
  for (int g = std::min<int64_t>(ngram_max, n - 1); g >= std::max(1, ngram_min); --g) {
    const auto tail = history.subspan(size_t(n - g));
    // the latest earlier occurrence: its continuation is the likeliest to repeat now
    for (int64_t i = n - g - 1; i >= 0; --i) {
      if (!std::equal(tail.begin(), tail.end(), history.begin() + i)) continue;
      const int64_t from = i + g, to = std::min<int64_t>(from + k, n);
      return std::vector<int32_t>(history.begin() + from, history.begin() + to);
    }
  }
  return {};
}

Result<std::vector<int32_t>> Speculator::propose(std::span<const int32_t> tail, int k) {
  if (k <= 0) return std::vector<int32_t>{};
  if (p_.mtp) return p_.mtp->propose(tail, n_base_, k);
  full_.assign(p_.context.begin(), p_.context.end());
  full_.insert(full_.end(), tail.begin(), tail.end());
  std::span<const int32_t> history = full_;
  if (!p_.draft) return lookup_draft(history, k, p_.ngram_min, p_.ngram_max);
  Session& d = *p_.draft->session;
  std::vector<int32_t>& draft_ctx_ = p_.draft->tokens;
  // bring the draft's context to `history`, reusing what it shares (it may keep less: rings, states)
  size_t keep = 0;
  while (keep < draft_ctx_.size() && keep < history.size() && draft_ctx_[keep] == history[keep]) ++keep;
  keep = std::min(keep, history.size() - 1);  // the last token is evaluated again for its logits
  d.truncate(int(keep));
  keep = size_t(d.n_past());
  draft_ctx_.assign(history.begin(), history.begin() + long(keep));
  // room in the draft's context for the history and k - 1 fed guesses
  if (int64_t(history.size()) + k - 1 > d.n_ctx()) k = int(d.n_ctx() - int64_t(history.size()) + 1);
  if (k <= 0) return std::vector<int32_t>{};
  auto r = d.eval(history.subspan(keep));
  if (!r) return r.status();
  draft_ctx_.assign(history.begin(), history.end());
  // greedy guesses whatever the request samples with: Sequence::verify checks one-hot guesses
  std::vector<int32_t> guess;
  const size_t V = size_t(r->dim(-1));
  for (int i = 0; i < k; ++i) {
    const int32_t t = argmax(std::span<const float>(r->ptr<float>(), V));
    guess.push_back(t);
    if (i + 1 == k) break;
    r = d.eval(std::span<const int32_t>(&guess.back(), 1));
    if (!r) return r.status();
    draft_ctx_.push_back(t);
  }
  return guess;
}

}  // namespace pipit
