// Running the real `pipit` binary from the e2e tests: the command line through sh (so a test may redirect stdin),
// stdout and stderr together, and the exit code (128 + the signal for a crash).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace pipit::test {

struct RunResult {
  int code;
  std::string out;  // stdout + stderr, or stdout alone
};

// `sh -c "<command> 2>&1"` (`with_stderr`), or `sh -c "<command> 2>/dev/null"`
inline RunResult run_sh(const std::string& command, bool with_stderr = true) {
  FILE* p = popen((command + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out};
}

inline std::string pipit_binary() { return std::string(PIPIT_BINARY_DIR) + "/pipit"; }

// `pipit <args>`
inline RunResult run_cli(const std::string& args, bool with_stderr = true) {
  return run_sh(pipit_binary() + " " + args, with_stderr);
}

}  // namespace pipit::test
