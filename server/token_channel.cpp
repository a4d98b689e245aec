// TokenChannel: see token_channel.h.
#include "server/token_channel.h"

namespace pipit::server {

bool TokenChannel::push(const std::string& piece) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (abandoned_) return false;
    pending_ += piece;
  }
  cv_.notify_one();
  return true;
}

void TokenChannel::finish(const Result<GenerateResult>& r) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    result_ = r;
  }
  cv_.notify_one();
}

TokenChannel::News TokenChannel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !pending_.empty() || result_.has_value(); });
  News n;
  n.text.swap(pending_);
  n.done = result_.has_value();
  return n;
}

void TokenChannel::abandon() {
  std::lock_guard<std::mutex> lk(mu_);
  abandoned_ = true;
}

}  // namespace pipit::server
