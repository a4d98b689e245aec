// The hand-over between the engine thread and one HTTP handler thread. The engine's callbacks only append to a
// buffer under a mutex and wake the handler (they must be quick: they run between forward passes); the handler
// waits with a timeout, so it can also notice a closed connection or a server shutdown while nothing arrives.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/generator.h"

namespace pipit::server {

class TokenChannel {
 public:
  // Engine side. push() returns false once the handler has left, which cancels the request in the engine.
  bool push(const std::string& piece);
  void finish(const Result<GenerateResult>& r);

  // Handler side: waits up to `timeout` for text or the end; returns the text that arrived since the last call.
  struct News {
    std::string text;
    bool done = false;
  };
  News wait(std::chrono::milliseconds timeout);
  // After wait() reported done.
  const Result<GenerateResult>& result() const { return *result_; }
  void abandon();  // the client has gone: later pushes return false

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  std::optional<Result<GenerateResult>> result_;
  bool abandoned_ = false;
};

}  // namespace pipit::server
