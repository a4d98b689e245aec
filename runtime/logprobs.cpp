// log-softmax in double (a 151k-entry sum in float loses ~3 digits) and a bounded top-n selection.
#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>

namespace pipit {

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int n_top) {
  TokenLogprob out;
  out.token = token;
  if (logits.empty()) return out;
  float mx = logits[0];
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - double(mx));
  const double lse = double(mx) + std::log(sum);
  if (token >= 0 && size_t(token) < logits.size()) out.logprob = float(double(logits[size_t(token)]) - lse);
  n_top = std::clamp(n_top, 0, int(logits.size()));
  if (n_top == 0) return out;
  // One pass keeping the best n in a small sorted list: n <= 20, so this beats sorting the vocabulary.
  auto better = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  };
  std::vector<std::pair<int32_t, float>>& top = out.top;
  top.reserve(size_t(n_top) + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (int(top.size()) == n_top && !(logits[i] > top.back().second)) continue;
    std::pair<int32_t, float> c{int32_t(i), logits[i]};
    top.insert(std::upper_bound(top.begin(), top.end(), c, better), c);
    if (int(top.size()) > n_top) top.pop_back();
  }
  for (auto& t : top) t.second = float(double(t.second) - lse);
  return out;
}

}  // namespace pipit
