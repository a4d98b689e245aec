// The hand-over between the engine thread and one HTTP handler thread, for the n choices of one request (each its
// own engine request). The engine's callbacks only append to a buffer under a mutex and wake the handler (they must
// be quick: they run between forward passes); the handler waits with a timeout, so it can also notice a closed
// connection or a server shutdown while nothing arrives.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/generator.h"

namespace pipit::server {

class TokenChannel {
 public:
  explicit TokenChannel(int n_choices = 1) : choices_(size_t(n_choices < 1 ? 1 : n_choices)) {}

  // Engine side. push() returns false once the handler has left, which cancels the request in the engine.
  bool push(const std::string& piece) { return push(0, piece); }
  bool push(int choice, const std::string& piece);
  void push_logprob(int choice, const TokenLogprob& lp);
  void finish(const Result<GenerateResult>& r) { finish(0, r); }
  void finish(int choice, const Result<GenerateResult>& r);

  // Handler side: waits up to `timeout` for news on any choice; returns what arrived since the last call.
  struct ChoiceNews {
    std::string text;
    std::vector<TokenLogprob> logprobs;
    bool finished = false;  // this choice ended with this news (reported once)
  };
  struct News {
    std::string text;  // choice 0's text (the single-choice view)
    bool done = false; // every choice has finished
    std::vector<ChoiceNews> choices;
  };
  News wait(std::chrono::milliseconds timeout);
  // After wait() reported the choice finished.
  const Result<GenerateResult>& result(int choice = 0) const { return *choices_[size_t(choice)].result; }
  int n_choices() const { return int(choices_.size()); }
  void abandon();  // the client has gone: later pushes return false

 private:
  struct Choice {
    std::string pending;
    std::vector<TokenLogprob> logprobs;
    std::optional<Result<GenerateResult>> result;
    bool reported = false;
  };
  bool has_news() const;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Choice> choices_;
  bool abandoned_ = false;
};

}  // namespace pipit::server
