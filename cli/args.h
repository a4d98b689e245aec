// A small argument parser: flags with values (-m PATH, --temp 0.5), repeatable flags (--image A --image B),
// boolean switches (--json) and positionals. Unknown flags are errors, reported by name.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace pipit::cli {

class Args {
 public:
  Args(std::string command, std::vector<std::string> argv) : command_(std::move(command)), argv_(std::move(argv)) {}
  const std::string& command() const { return command_; }

  // Declare options before parse(). `names` are aliases ("-m", "--model").
  void option(std::initializer_list<const char*> names, const char* help, const char* def = nullptr);
  void flag(std::initializer_list<const char*> names, const char* help);
  void multi(std::initializer_list<const char*> names, const char* help);
  Status parse();  // fills values; "-h/--help" sets help()
  bool help() const { return help_; }
  std::string usage() const;

  bool has(const std::string& name) const;
  std::string get(const std::string& name) const;  // value or default ("" when neither)
  Result<int64_t> get_int(const std::string& name) const;
  Result<double> get_float(const std::string& name) const;
  bool get_flag(const std::string& name) const { return has(name); }
  std::vector<std::string> get_all(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  // Whether the command line spelled an option this way ("-s", not "--system"), with a value or as "--name=value".
  bool typed(const std::string& spelling) const;

 private:
  struct Opt {
    std::vector<std::string> names;
    std::string help;
    std::optional<std::string> def;
    enum Kind { kValue, kFlag, kMulti } kind;
  };
  const Opt* find(const std::string& name) const;
  std::string key(const Opt& o) const { return o.names.back(); }
  std::string command_;
  std::vector<std::string> argv_;
  std::vector<Opt> opts_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
  bool help_ = false;
};

// For "did you mean" hints on unknown options and commands: the candidate closest to `word` (edit distance, a swap
// of two neighbours counting as one edit, or a name that `word` begins with, as --temperature for --temp) when it is
// close enough to be a likely typo; "" otherwise.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace pipit::cli
