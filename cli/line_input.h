// Lines typed at `pipit chat`: with libedit's line editing and history (arrows, Ctrl-A/E, Ctrl-R, ~/.editrc) when
// stdin and stdout are a terminal and pipit was built with libedit, else plain lines from stdin (pipes, scripts,
// tests). Both notice a Ctrl-C while waiting for input (the SIGINT handler sets `*interrupted`) and join a line
// ending in '\' with the next one.
#pragma once

#include <signal.h>

#include <memory>
#include <string>

namespace pipit::cli {

class LineInput {
 public:
  enum Got { kLine, kInterrupted, kEof };
  virtual ~LineInput() = default;
  // Shows `prompt` and reads one (possibly continued) line into `out`.
  virtual Got next(const char* prompt, std::string& out) = 0;
  // libedit on a terminal, else plain lines.
  static std::unique_ptr<LineInput> open(volatile sig_atomic_t* interrupted);
};

}  // namespace pipit::cli
