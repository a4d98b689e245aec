// Sampler implementation.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace pipit {

int32_t argmax(std::span<const float> x) {
  int32_t best = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[size_t(best)]) best = int32_t(i);
  return best;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const int32_t greedy = candidates(logits, history);
  if (greedy >= 0) return greedy;
  return draw(cand_);
}

const std::vector<std::pair<float, int32_t>>& Sampler::distribution(std::span<const float> logits,
                                                                    std::span<const int32_t> history) {
  const int32_t greedy = candidates(logits, history);
  if (greedy >= 0) {
    cand_.assign(1, {1.0f, greedy});
    return cand_;
  }
  double total = 0;
  for (auto& c : cand_) total += c.first;
  for (auto& c : cand_) c.first = float(c.first / total);
  return cand_;
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::draw(std::span<const std::pair<float, int32_t>> dist) {
  double total = 0;
  for (auto& c : dist) total += c.first;
  std::uniform_real_distribution<double> u(0.0, total);
  double r = u(rng_), acc = 0;
  for (auto& c : dist) {
    acc += c.first;
    if (r < acc) return c.second;
  }
  return dist.back().second;
}

int32_t Sampler::candidates(std::span<const float> logits, std::span<const int32_t> history) {
  const bool penalize = p_.repetition_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
  std::span<const float> l = logits;
  if (penalize && !history.empty()) {
    work_.assign(logits.begin(), logits.end());
    std::unordered_map<int32_t, int> counts;
    size_t start = p_.penalty_last_n > 0 && history.size() > size_t(p_.penalty_last_n)
                       ? history.size() - size_t(p_.penalty_last_n)
                       : 0;
    for (size_t i = start; i < history.size(); ++i) counts[history[i]]++;
    for (auto [t, c] : counts) {
      if (t < 0 || size_t(t) >= work_.size()) continue;
      float& v = work_[size_t(t)];
      if (p_.repetition_penalty != 1.0f) v = v > 0 ? v / p_.repetition_penalty : v * p_.repetition_penalty;
      v -= p_.presence_penalty + p_.frequency_penalty * float(c);
    }
    l = work_;
  }
  if (p_.temperature <= 0.0f) return argmax(l);

  // candidates sorted by logit, truncated by top-k
  cand_.clear();
  cand_.reserve(l.size());
  for (size_t i = 0; i < l.size(); ++i) cand_.push_back({l[i] / p_.temperature, int32_t(i)});
  size_t k = (p_.top_k > 0 && size_t(p_.top_k) < cand_.size()) ? size_t(p_.top_k) : cand_.size();
  std::partial_sort(cand_.begin(), cand_.begin() + long(k), cand_.end(),
                    [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  cand_.resize(k);
  // softmax over the candidates
  const float mx = cand_[0].first;
  double sum = 0;
  for (auto& c : cand_) {
    c.first = std::exp(c.first - mx);
    sum += c.first;
  }
  for (auto& c : cand_) c.first = float(c.first / sum);
  // top-p: smallest prefix with mass >= top_p
  if (p_.top_p < 1.0f) {
    double acc = 0;
    size_t n = 0;
    while (n < cand_.size()) {
      acc += cand_[n++].first;
      if (acc >= p_.top_p) break;
    }
    cand_.resize(std::max<size_t>(1, n));
  }
  // min-p: drop tokens below min_p * p(top)
  if (p_.min_p > 0.0f) {
    const float thr = p_.min_p * cand_[0].first;
    size_t n = 1;
    while (n < cand_.size() && cand_[n].first >= thr) ++n;
    cand_.resize(n);
  }
  return -1;
}

}  // namespace pipit
