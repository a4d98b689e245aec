// Argument parsing for the CLI.
#include "cli/args.h"

#include <algorithm>
#include <cmath>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdint>
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
      if (!o && (name == "-ngl" || name == "--n-gpu-layers" || name == "--gpu-layers"))  // llama.cpp's GPU offload
        return Error::invalid_argument("unknown option '{}': pipit runs the whole decoder on the CPU or on one device "
                                       "(--device opencl[:N]; pipit inspect --devices lists them)", name);
      if (!o) {
        std::vector<std::string> names;
        for (const Opt& x : opts_) names.insert(names.end(), x.names.begin(), x.names.end());
        const std::string near = closest_match(name, names);
        if (!near.empty())
          return Error::invalid_argument("unknown option '{}'; did you mean '{}'? (see pipit {} --help)", name, near,
                                         command_);
        return Error::invalid_argument("unknown option '{}' (see pipit {} --help)", name, command_);
      }
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

bool Args::typed(const std::string& spelling) const {
  for (const std::string& a : argv_)
    if (a == spelling || a.rfind(spelling + "=", 0) == 0) return true;
  return false;
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  const Opt* o = find(name);
  PIPIT_ASSERT(o, "option {} not declared", name);
  auto it = values_.find(key(*o));
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two neighbours, one each.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.size() > 64) return "";  // a pasted paragraph is no typo (and the table is quadratic)
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(word, c);
    // a longer spelling of a short name (--temperature, --threads-batch): as close as one edit
    const size_t dashes = c.find_first_not_of('-');
    if (c.size() - dashes >= 3 && word.size() > c.size() && word.compare(0, c.size(), c) == 0)
      d = std::min<size_t>(d, 1);
    if (d < best_d) best_d = d, best = c;
  }
  // about one typo per three letters of the name, at least one; and some letter kept ('-x' is not a typo of '-m')
  const size_t letters = word.size() - std::min(word.size(), word.find_first_not_of('-'));
  return best_d <= std::max<size_t>(1, letters / 3) && best_d < letters ? best : "";
}

}  // namespace pipit::cli
