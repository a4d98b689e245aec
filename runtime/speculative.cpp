// Speculative decoding (see speculative.h).
#include "runtime/speculative.h"

#include <algorithm>

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

Speculator::Speculator(const SpecParams& p, const SamplerParams& sampler) : p_(p) {
  if (p_.draft && sampler.temperature > 0) {
    SamplerParams d = sampler;
    d.seed = sampler.seed ^ 0x5bd1e995u;  // the draft's own stream
    draft_sampler_ = std::make_unique<Sampler>(d);
  }
}

Result<std::vector<int32_t>> Speculator::propose(std::span<const int32_t> tail, int k) {
  q_.clear();
  if (k <= 0) return std::vector<int32_t>{};
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
  std::vector<int32_t> guess;
  std::vector<int32_t> hist(history.begin(), history.end());
  const size_t V = size_t(r->dim(-1));
  for (int i = 0; i < k; ++i) {
    std::span<const float> l(r->ptr<float>(), V);
    int32_t t;
    if (draft_sampler_) {
      q_.push_back(draft_sampler_->distribution(l, hist));
      t = draft_sampler_->draw(q_.back());
    } else {
      t = argmax(l);
    }
    guess.push_back(t);
    hist.push_back(t);
    if (i + 1 == k) break;
    r = d.eval(std::span<const int32_t>(&guess.back(), 1));
    if (!r) return r.status();
    draft_ctx_.push_back(t);
  }
  return guess;
}

Result<std::vector<int32_t>> Speculator::step(Session& target, Sampler& sampler, std::span<const int32_t> history,
                                              int k) {
  PIPIT_ASSIGN_OR_RETURN(std::vector<int32_t> guess, propose(history, k));
  std::vector<int32_t> batch = {history.back()};
  batch.insert(batch.end(), guess.begin(), guess.end());
  const int n0 = target.n_past();
  if (!guess.empty()) target.checkpoint();  // a recurrent state comes back here after a rejection
  auto r = target.eval(batch, /*all_logits=*/!guess.empty());
  if (!r) return r.status();
  const size_t V = size_t(r->dim(-1));
  std::vector<int32_t> hist(history.begin(), history.end()), out;
  size_t a = 0;
  for (; a <= guess.size(); ++a) {
    std::span<const float> l(r->ptr<float>() + a * V, V);
    if (a == guess.size()) {  // every guess accepted: the last row gives one more token
      out.push_back(sampler.sample(l, hist));
      break;
    }
    const int32_t g = guess[a];
    if (sampler.params().temperature <= 0) {
      const int32_t t = sampler.sample(l, hist);  // greedy: deterministic, the token plain decoding would pick
      if (t != g) {
        out.push_back(t);
        break;
      }
    } else {
      const auto& p = sampler.distribution(l, hist);
      float pg = 0, qg = 1;  // prompt lookup: q is one-hot at the guess
      for (auto& [pr, id] : p)
        if (id == g) pg = pr;
      const std::vector<std::pair<float, int32_t>>* q = q_.empty() ? nullptr : &q_[a];
      if (q) {
        qg = 0;
        for (auto& [pr, id] : *q)
          if (id == g) qg = pr;
      }
      if (!(qg > 0 && sampler.uniform() < double(pg) / double(qg))) {
        // rejected: draw from max(0, p - q), renormalised by draw()
        std::vector<std::pair<float, int32_t>> res(p.begin(), p.end());
        for (auto& [pr, id] : res) {
          float qi = 0;
          if (!q) qi = id == g ? 1.0f : 0.0f;
          else
            for (auto& [qp, qid] : *q)
              if (qid == id) qi = qp;
          pr = std::max(0.0f, pr - qi);
        }
        std::erase_if(res, [](const auto& c) { return !(c.first > 0); });
        out.push_back(res.empty() ? sampler.draw(p) : sampler.draw(res));
        break;
      }
    }
    out.push_back(g);
    hist.push_back(g);
  }
  if (!guess.empty()) {
    stats_.steps++;
    stats_.drafted += int64_t(guess.size());
    stats_.accepted += int64_t(a);
  }
  // keep history's last token and the accepted guesses; a recurrent state goes back to the checkpoint and
  // evaluates them again
  const int keep = n0 + 1 + int(a);
  if (target.n_past() > keep) {
    target.truncate(keep);
    if (target.n_past() < keep) {
      if (size_t(keep - target.n_past()) > hist.size())
        return Error::internal("[speculative] the context went back further than this generation");
      std::vector<int32_t> redo(hist.end() - (keep - target.n_past()), hist.end());
      auto rr = target.eval(redo);
      if (!rr) return rr.status();
    }
  }
  return out;
}

}  // namespace pipit
