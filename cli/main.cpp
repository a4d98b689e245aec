// pipit: the command-line entry point. Dispatches `pipit <command> ...` to the registered subcommands.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "cli/command.h"
#include "core/limits.h"

namespace pipit::cli {

std::vector<Command>& commands() {
  static std::vector<Command> c;
  return c;
}

extern const char kGitCommit[];  // generated/git_commit.cpp (cmake/git_commit.cmake)

int fail(const Args& args, const std::string& msg) {
  std::fprintf(stderr, "pipit%s%s: error: %s\n", args.command().empty() ? "" : " ", args.command().c_str(),
               msg.c_str());
  return 1;
}

std::string stdout_error() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return "";
  return std::string("cannot write the output to stdout: ") +
         (errno ? std::strerror(errno) : "a write failed (a full disk or device, or a closed reader)");
}

// A command that succeeded but whose output did not reach stdout failed: exit 1 with one line, not a silent 0.
int finish_stdout(const Args& args, int rc) {
  const std::string err = stdout_error();
  return err.empty() || rc != 0 ? rc : fail(args, err);
}

}  // namespace pipit::cli

static void print_help() {
  std::printf("pipit %s: LLM and VLM inference on CPUs, from one file.\n\nusage: pipit <command> [options]\n\n",
              PIPIT_VERSION);
  auto cmds = pipit::cli::commands();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return std::strcmp(a.name, b.name) < 0; });
  for (auto& c : cmds) std::printf("  %-10s %s\n", c.name, c.summary);
  std::printf("\nRun `pipit <command> --help` for its options.\n");
}

// The version, the commit it was built from, the compiler and the CPU kernels this machine runs (the ISA level
// chosen at start-up from CPUID, lowered by PIPIT_CPU_MAX_ISA): what a bug report needs.
static void print_version() {
#if defined(__clang__)
  const char* compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  const char* compiler = "gcc " __VERSION__;
#else
  const char* compiler = "unknown compiler";
#endif
  std::printf("pipit %s\ncommit: %s\ncompiler: %s\nkernels: %s\n", PIPIT_VERSION, pipit::cli::kGitCommit, compiler,
              pipit::kernels().name.c_str());
}

int main(int argc, char** argv) {
  const pipit::cli::Args top("", {});
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    print_help();
    return pipit::cli::finish_stdout(top, argc < 2 ? 1 : 0);
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V")) {
    print_version();
    return pipit::cli::finish_stdout(top, 0);
  }
  for (auto& c : pipit::cli::commands()) {
    if (std::strcmp(c.name, argv[1]) == 0) {
      pipit::cli::Args args(c.name, std::vector<std::string>(argv + 2, argv + argc));
      // The library returns errors as Status; an exception reaching here is an allocation that failed on a full
      // machine (or a bug): one line and exit 1, never std::terminate's abort.
      try {
        return pipit::cli::finish_stdout(args, c.fn(args));
      } catch (const std::bad_alloc&) {
        return pipit::cli::fail(args, "out of memory (" + pipit::format_bytes(pipit::available_memory()) +
                                          " available now); a smaller -c, -b or model needs less");
      } catch (const std::exception& e) {
        return pipit::cli::fail(args, std::string("internal error (a bug in pipit): ") + e.what());
      }
    }
  }
  std::vector<std::string> names;
  for (auto& c : pipit::cli::commands()) names.push_back(c.name);
  const std::string near = pipit::cli::closest_match(argv[1], names);
  if (!near.empty())
    std::fprintf(stderr, "pipit: error: unknown command '%s'; did you mean '%s'? (see pipit --help)\n", argv[1],
                 near.c_str());
  else
    std::fprintf(stderr, "pipit: error: unknown command '%s' (see pipit --help)\n", argv[1]);
  return 1;
}
