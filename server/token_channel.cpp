// TokenChannel: see token_channel.h.
#include "server/token_channel.h"

namespace pipit::server {

bool TokenChannel::push(int choice, const std::string& piece) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (abandoned_) return false;
    choices_[size_t(choice)].pending += piece;
  }
  cv_.notify_one();
  return true;
}

void TokenChannel::push_logprob(int choice, const TokenLogprob& lp) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!abandoned_) choices_[size_t(choice)].logprobs.push_back(lp);
}

void TokenChannel::finish(int choice, const Result<GenerateResult>& r) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    choices_[size_t(choice)].result = r;
  }
  cv_.notify_one();
}

bool TokenChannel::has_news() const {
  for (const Choice& c : choices_)
    if (!c.pending.empty() || !c.logprobs.empty() || (c.result && !c.reported)) return true;
  return false;
}

TokenChannel::News TokenChannel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return has_news(); });
  News n;
  n.done = true;
  n.choices.resize(choices_.size());
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    n.choices[i].text.swap(c.pending);
    n.choices[i].logprobs.swap(c.logprobs);
    if (c.result && !c.reported) {
      c.reported = true;
      n.choices[i].finished = true;
    }
    n.done = n.done && c.result.has_value();
  }
  n.text = n.choices[0].text;
  return n;
}

void TokenChannel::abandon() {
  std::lock_guard<std::mutex> lk(mu_);
  abandoned_ = true;
}

}  // namespace pipit::server
