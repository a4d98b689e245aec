// Argument parsing for the CLI.
#include "cli/args.h"

#include <cmath>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace pipit::cli {

void Args::option(std::initializer_list<const char*> names, const char* help, const char* def) {
  Opt o{{names.begin(), names.end()}, help, def ? std::optional<std::string>(def) : std::nullopt, Opt::kValue};
  opts_.push_back(o);
}
void Args::flag(std::initializer_list<const char*> names, const char* help) {
  opts_.push_back({{names.begin(), names.end()}, help, std::nullopt, Opt::kFlag});
}
void Args::multi(std::initializer_list<const char*> names, const char* help) {
  opts_.push_back({{names.begin(), names.end()}, help, std::nullopt, Opt::kMulti});
}

const Args::Opt* Args::find(const std::string& name) const {
  for (auto& o : opts_)
    for (auto& n : o.names)
      if (n == name) return &o;
  return nullptr;
}

Status Args::parse() {
  for (size_t i = 0; i < argv_.size(); ++i) {
    std::string a = argv_[i];
    if (a == "-h" || a == "--help") {
      help_ = true;
      continue;
    }
    if (a.size() > 1 && a[0] == '-' && !(a.size() > 1 && (std::isdigit((unsigned char)a[1]) || a[1] == '.'))) {
      std::string name = a, inline_val;
      bool has_inline = false;
      if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
        name = a.substr(0, eq);
        inline_val = a.substr(eq + 1);
        has_inline = true;
      }
      const Opt* o = find(name);
      if (!o) return Error::invalid_argument("unknown option '{}' (see pipit {} --help)", name, command_);
      if (o->kind == Opt::kFlag) {
        values_[key(*o)].push_back("1");
        continue;
      }
      if (!has_inline) {
        if (i + 1 >= argv_.size()) return Error::invalid_argument("option '{}' needs a value", name);
        inline_val = argv_[++i];
      }
      auto& v = values_[key(*o)];
      if (o->kind == Opt::kValue) v.clear();
      v.push_back(inline_val);
    } else {
      positionals_.push_back(a);
    }
  }
  return Status::ok();
}

std::string Args::usage() const {
  std::ostringstream os;
  for (auto& o : opts_) {
    std::string n;
    for (auto& x : o.names) n += (n.empty() ? "" : ", ") + x;
    if (o.kind != Opt::kFlag) n += " V";
    os << "  " << n;
    if (n.size() < 26) os << std::string(26 - n.size(), ' ');
    else os << "\n" << std::string(28, ' ');
    os << o.help;
    if (o.def) os << " (default: " << *o.def << ")";
    os << "\n";
  }
  return os.str();
}

bool Args::has(const std::string& name) const {
  const Opt* o = find(name);
  return o && values_.count(key(*o));
}

std::string Args::get(const std::string& name) const {
  const Opt* o = find(name);
  PIPIT_ASSERT(o, "option {} not declared", name);
  auto it = values_.find(key(*o));
  if (it != values_.end() && !it->second.empty()) return it->second.back();
  return o->def ? *o->def : std::string();
}

Result<int64_t> Args::get_int(const std::string& name) const {
  std::string v = get(name);
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno) return Error::invalid_argument("option {}: '{}' is not an integer", name, v);
  return int64_t(x);
}

Result<double> Args::get_float(const std::string& name) const {
  std::string v = get(name);
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || errno) return Error::invalid_argument("option {}: '{}' is not a number", name, v);
  if (!std::isfinite(x)) return Error::invalid_argument("option {}: '{}' is not a finite number", name, v);
  return x;
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  const Opt* o = find(name);
  PIPIT_ASSERT(o, "option {} not declared", name);
  auto it = values_.find(key(*o));
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

}  // namespace pipit::cli
