// The `pipit` CLI is a set of subcommands; each lives in its own cli/cmd_<name>.cpp and registers itself here.
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"

namespace pipit::cli {

// Returns the process exit code. Errors are printed as one line "pipit <cmd>: error: ..." by the command.
using CommandFn = int (*)(Args& args);

struct Command {
  const char* name;
  const char* summary;
  CommandFn fn;
};

std::vector<Command>& commands();

struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* summary, CommandFn fn) { commands().push_back({name, summary, fn}); }
};

#define PIPIT_REGISTER_COMMAND(name, summary, fn) \
  static ::pipit::cli::CommandRegistrar PIPIT_CONCAT(_pipit_cmd_, __LINE__)(name, summary, fn)

// Prints "pipit <cmd>: error: <msg>" to stderr and returns 1.
int fail(const Args& args, const std::string& msg);
// What a command printed must reach stdout: when a write to it failed (a full disk, /dev/full, a closed reader), the
// error line to report (exit 1); "" when stdout is fine. main() checks it after every command.
std::string stdout_error();

}  // namespace pipit::cli
