// Sampler implementation. Nothing sorts the vocabulary: top-k keeps its k in one pass; without top-k (every OpenAI
// client) every token's probability is computed once (a vectorizable exp), top-p and min-p become cuts on those
// values (a radix select), and the draw walks the vocabulary in id order. The sampler before this sorted 151,936
// candidates per token when a request had no top_k (15-30x slower server throughput).
#include "runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <unordered_map>

namespace pipit {

int32_t argmax(std::span<const float> x) {
  int32_t best = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[size_t(best)]) best = int32_t(i);
  return best;
}

namespace {

// (probability or logit, id): larger values first, ties by the smaller id (the order draw() walks).
bool before(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// e^x for x <= 0 without a libm call, so that the loop over the vocabulary vectorizes: x = n ln2 + r with
// |r| <= ln2 / 2 (ln2 in two parts, Cody-Waite), e^r by its Taylor series to r^7 (truncation < 5e-9 relative),
// 2^n made in the exponent bits. Within 2 ulp of std::exp; e^0 is exactly 1. Below -87 (and -inf, NaN) it is 0:
// those tokens' probability is under 1e-38 of the top one's.
inline float exp_nonpositive(float x) {
  const float live = x > -87.0f ? 1.0f : 0.0f;  // 0 for NaN too
  x = x > -87.0f ? x : -87.0f;
  const float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + kShift) - kShift;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>((int32_t(n) + 127) << 23);  // n in [-126, 0]: a normal power of two
  return p * scale * live;
}

// The largest value, NaN never (eight independent chains of max: one is latency-bound).
float max_value(std::span<const float> l) {
  float m[8];
  std::fill(m, m + 8, -INFINITY);
  const size_t n8 = l.size() & ~size_t(7);
  for (size_t i = 0; i < n8; i += 8)
    for (size_t j = 0; j < 8; ++j) m[j] = l[i + j] > m[j] ? l[i + j] : m[j];
  for (size_t i = n8; i < l.size(); ++i) m[0] = l[i] > m[0] ? l[i] : m[0];
  float r = m[0];
  for (size_t j = 1; j < 8; ++j) r = m[j] > r ? m[j] : r;
  return r;
}

}  // namespace

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const int32_t greedy = candidates(logits, history);
  if (greedy >= 0) return greedy;
  return full_ ? draw_full() : draw(cand_);
}

const std::vector<std::pair<float, int32_t>>& Sampler::distribution(std::span<const float> logits,
                                                                    std::span<const int32_t> history) {
  const int32_t greedy = candidates(logits, history);
  if (greedy >= 0) {
    cand_.assign(1, {1.0f, greedy});
    return cand_;
  }
  if (full_) {  // the members of the full-vocabulary set, in id order
    cand_.clear();
    for (size_t i = 0; i < probs_.size(); ++i)
      if (member(i)) cand_.push_back({probs_[i], int32_t(i)});
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

std::span<const float> Sampler::penalized(std::span<const float> logits, std::span<const int32_t> history) {
  const bool penalize = p_.repetition_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
  if (!penalize || history.empty()) return logits;
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
  return work_;
}

// The k largest logits / temperature, sorted, then their softmax. k <= 256: one pass that keeps the best k in a
// sorted list (most tokens fail the first comparison); larger k: nth_element over every candidate.
void Sampler::top_k_candidates(std::span<const float> l, size_t k) {
  cand_.clear();
  if (k <= 256) {
    cand_.reserve(k + 1);
    for (size_t i = 0; i < l.size(); ++i) {
      const std::pair<float, int32_t> c{l[i] / p_.temperature, int32_t(i)};
      if (cand_.size() == k && !before(c, cand_.back())) continue;
      cand_.insert(std::upper_bound(cand_.begin(), cand_.end(), c, before), c);
      if (cand_.size() > k) cand_.pop_back();
    }
  } else {
    cand_.reserve(l.size());
    for (size_t i = 0; i < l.size(); ++i) cand_.push_back({l[i] / p_.temperature, int32_t(i)});
    std::nth_element(cand_.begin(), cand_.begin() + long(k) - 1, cand_.end(), before);
    cand_.resize(k);
    std::sort(cand_.begin(), cand_.end(), before);
  }
  const float mx = cand_[0].first;
  double sum = 0;
  for (auto& c : cand_) {
    c.first = std::exp(c.first - mx);
    sum += c.first;
  }
  for (auto& c : cand_) c.first = float(c.first / sum);
}

// Without top-k, the candidates stay where they are: probs_[i] = e^(l_i / T - max), and the set is the tokens whose
// value (its float bits, an order-preserving key for positive floats) is above cut_, plus those equal to it up to
// id tie_last_ (top-p's tie rule: the smaller id first). Top-p finds its cut by a radix select on the keys
// (histograms of the mass over 8 + 12 + 11 bits): the smallest set of the largest values with the top-p mass, in
// O(vocabulary) whatever the distribution (a random model's flat logits put most of the vocabulary in it).
// Min-p is a cut of its own (e >= min_p: p(x) >= min_p p(top), the top's e being 1); the stricter one wins.
void Sampler::full_vocab_candidates(std::span<const float> l) {
  const size_t V = l.size();
  const float inv_t = 1.0f / p_.temperature;
  const float mx = max_value(l);
  full_ = false;
  cand_.clear();
  if (!std::isfinite(mx)) {  // every logit -inf / NaN, or one +inf: the (first) best token alone
    cand_.push_back({1.0f, argmax(l)});
    return;
  }
  // e per token and the block sums of all of them (the members until a cut is made), in one pass
  const float shift = mx * inv_t;
  probs_.resize(V);
  block_.resize((V + kBlock - 1) / kBlock);
  double all = 0;
  for (size_t b = 0; b < block_.size(); ++b) {
    const size_t i0 = b * kBlock, i1 = std::min(V, i0 + kBlock);
    float* e = probs_.data();
    for (size_t i = i0; i < i1; ++i) e[i] = exp_nonpositive(l[i] * inv_t - shift);
    float part[8] = {};  // the block's sum while it is in L1, eight lanes
    size_t i = i0;
    for (; i + 8 <= i1; i += 8)
      for (size_t j = 0; j < 8; ++j) part[j] += e[i + j];
    for (; i < i1; ++i) part[0] += e[i];
    double sum = 0;
    for (float x : part) sum += x;
    block_[b] = sum;
    all += sum;
  }
  full_ = true;
  cut_ = 0;  // every token with e > 0
  tie_last_ = -1;
  ties_.clear();
  total_ = all;
  if (p_.top_p >= 1.0f && p_.min_p <= 0.0f) return;  // no cut: the sums stand
  if (p_.top_p < 1.0f) top_p_cut(double(p_.top_p) * all);
  if (p_.min_p > 0.0f) {
    // a hair below min_p, so that ties stay in; never above the top token's 1
    const uint32_t m = std::min(std::bit_cast<uint32_t>(p_.min_p * (1.0f - 1e-6f)), std::bit_cast<uint32_t>(1.0f));
    if (m > cut_) cut_ = m - 1, tie_last_ = -1, ties_.clear();
  }
  total_ = sum_members();
  if (!(total_ > 0)) {  // cannot happen with e(top) = 1, but a draw must never come back empty
    full_ = false;
    cand_.push_back({1.0f, argmax(l)});
  }
}

double Sampler::sum_members() {
  // Per block of kBlock tokens (draw_full() walks the block sums first), eight float lanes inside a block: the
  // values above cut_ without a branch (positive floats' bits compare as signed 32-bit integers, which SSE2 has),
  // then the few tokens equal to cut_ that top-p keeps (ties_) added to their blocks.
  const size_t V = probs_.size();
  const int32_t cut = int32_t(cut_);
  const float* e = probs_.data();
  block_.resize((V + kBlock - 1) / kBlock);
  double total = 0;
  for (size_t b = 0; b < block_.size(); ++b) {
    const size_t i0 = b * kBlock, i1 = std::min(V, i0 + kBlock);
    float part[8] = {};
    size_t i = i0;
    for (; i + 8 <= i1; i += 8)
      for (size_t j = 0; j < 8; ++j) part[j] += std::bit_cast<int32_t>(e[i + j]) > cut ? e[i + j] : 0.0f;
    for (; i < i1; ++i) part[0] += std::bit_cast<int32_t>(e[i]) > cut ? e[i] : 0.0f;
    double sum = 0;
    for (float x : part) sum += x;
    block_[b] = sum;
    total += sum;
  }
  for (int32_t t : ties_) {
    block_[size_t(t) / kBlock] += e[t];
    total += e[t];
  }
  return total;
}

void Sampler::top_p_cut(double target) {
  const size_t V = probs_.size();
  auto key = [&](size_t i) { return std::bit_cast<uint32_t>(probs_[i]); };
  // Three levels of a histogram of the mass by key bits: the exponent (8 bits, over every token), then 12 and 11
  // mantissa bits over the tokens of the boundary bucket. Four interleaved histograms at the first level, so that
  // neighbouring tokens of one bucket (a flat distribution) are not one chain of dependent additions.
  double above = 0;  // mass of the keys above the current bucket
  auto boundary = [&](const double* hist, size_t n) {
    for (size_t b = n; b-- > 0;) {
      if (hist[b] > 0 && above + hist[b] >= target) return int64_t(b);
      above += hist[b];
    }
    return int64_t(-1);  // rounding: the whole mass is short of the target by a hair
  };
  hist_.assign(4 * 256, 0.0);
  for (size_t i = 0; i < V; ++i) hist_[(i & 3) * 256 + (key(i) >> 23)] += probs_[i];
  for (size_t b = 0; b < 256; ++b) hist_[b] += hist_[256 + b] + hist_[512 + b] + hist_[768 + b];
  hist_[0] = 0;  // zeros (and subnormals) are never members
  const int64_t b1 = boundary(hist_.data(), 256);
  if (b1 < 0) return;  // everything
  // the bucket's tokens, gathered without a branch (a flat distribution puts half of them in it, at random)
  bucket_.resize(V);
  size_t n = 0;
  for (size_t i = 0; i < V; ++i) {
    bucket_[n] = int32_t(i);
    n += (key(i) >> 23) == uint32_t(b1);
  }
  bucket_.resize(n);
  hist_.assign(size_t(1) << 12, 0.0);
  for (int32_t i : bucket_) hist_[(key(size_t(i)) >> 11) & 0xFFF] += probs_[size_t(i)];
  const int64_t b2 = boundary(hist_.data(), hist_.size());
  if (b2 < 0) return;
  const uint32_t high = uint32_t(b1) << 12 | uint32_t(b2);
  n = 0;
  for (int32_t i : bucket_) {
    bucket_[n] = i;
    n += (key(size_t(i)) >> 11) == high;
  }
  bucket_.resize(n);
  hist_.assign(size_t(1) << 11, 0.0);
  for (int32_t i : bucket_) hist_[key(size_t(i)) & 0x7FF] += probs_[size_t(i)];
  const int64_t b3 = boundary(hist_.data(), hist_.size());
  if (b3 < 0) return;
  cut_ = high << 11 | uint32_t(b3);
  // the tokens of value cut_, smaller ids first, until the mass is reached
  tie_last_ = int64_t(V);
  for (int32_t i : bucket_)
    if (key(size_t(i)) == cut_) {
      ties_.push_back(i);
      above += probs_[size_t(i)];
      if (above >= target) {
        tie_last_ = i;
        break;
      }
    }
}

int32_t Sampler::draw_full() {
  const double r = std::uniform_real_distribution<double>(0.0, total_)(rng_);
  // the block holding r, then token by token from there (on past its end should rounding leave r unreached)
  double acc = 0;
  size_t b = 0;
  for (; b + 1 < block_.size() && acc + block_[b] <= r; ++b) acc += block_[b];
  int32_t last = -1;
  for (size_t i = b * kBlock; i < probs_.size(); ++i) {
    if (!member(i)) continue;
    acc += probs_[i];
    last = int32_t(i);
    if (r < acc) return last;
  }
  if (last < 0)  // r fell past every member of the later blocks: the last member of all
    for (size_t i = probs_.size(); i-- > 0;)
      if (member(i)) return int32_t(i);
  return last;
}

int32_t Sampler::candidates(std::span<const float> logits, std::span<const int32_t> history) {
  const std::span<const float> l = penalized(logits, history);
  if (p_.temperature <= 0.0f) return argmax(l);
  full_ = false;
  if (p_.top_k <= 0 || size_t(p_.top_k) >= l.size()) {
    full_vocab_candidates(l);
    return -1;
  }
  top_k_candidates(l, size_t(p_.top_k));
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
