// PCRE2-backed regexes and HF-style match lists. tokenizer.json regexes are written for Oniguruma (what HF
// `tokenizers` compiles them with); PCRE2 in UTF + UCP mode reads the same syntax, but its Unicode tables may be
// older than Oniguruma's (PCRE2 10.42: Unicode 14; HF: 16), and \s (Oniguruma adds U+0085), \w, \d, \h
// differ. onig_to_pcre2 rewrites those into classes completed with HF's measured property sets.
#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "tokenizer/regex_fast.h"
#include "tokenizer/unicode_props.h"

namespace pipit::tok {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<char*>(buf);
}

void append_cp(std::string& out, uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\x{%X}", cp);
  out += buf;
}

// The code points of HF's property `p` that PCRE2's `base_class` (a class body such as "\p{L}") misses, as class
// items "\x{A}-\x{B}...". Computed once per property by asking PCRE2 about each code point of the property.
const std::string& class_additions(const generated::HfProperty& p, const std::string& base_class) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(base_class);
  if (it != cache.end()) return it->second;
  std::string out;
  std::string pat = "[" + base_class + "]";
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &off, nullptr);
  pcre2_match_data* md = code ? pcre2_match_data_create(1, nullptr) : nullptr;
  if (code && md) {
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    int64_t run_start = -1, run_end = -1;
    auto flush = [&] {
      if (run_start < 0) return;
      append_cp(out, static_cast<uint32_t>(run_start));
      if (run_end > run_start) {
        out += "-";
        append_cp(out, static_cast<uint32_t>(run_end));
      }
      run_start = -1;
    };
    std::string buf;
    for (size_t r = 0; r < p.n_ranges; ++r) {
      for (uint32_t cp = p.ranges[r].first; cp <= p.ranges[r].last; ++cp) {
        buf.clear();
        utf8_append(buf, cp);
        bool has = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(buf.data()), buf.size(), 0, 0, md, nullptr) >= 0;
        if (has) continue;
        if (run_start >= 0 && run_end + 1 == cp) {
          run_end = cp;
        } else {
          flush();
          run_start = run_end = cp;
        }
      }
    }
    flush();
  }
  if (md) pcre2_match_data_free(md);
  if (code) pcre2_code_free(code);
  return cache.emplace(base_class, std::move(out)).first->second;
}

// PCRE2 class body for an Oniguruma class escape or property, completed to HF's Unicode version.
struct ClassText {
  std::string body;  // e.g. "\p{L}\x{...}" (without brackets)
  bool negated;
};

std::optional<ClassText> translate_class(const generated::HfProperty* prop, const std::string& base, bool negated) {
  if (!prop) return std::nullopt;
  return ClassText{base + class_additions(*prop, base), negated};
}

}  // namespace

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  auto emit = [&](const ClassText& c, std::string_view original) {
    if (!in_class) {
      out += c.negated ? "[^" : "[";
      out += c.body;
      out += "]";
    } else if (!c.negated) {
      out += c.body;
    } else {
      out.append(original);  // a negated class inside a class: PCRE2's own table (rare in tokenizer regexes)
    }
  };
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char d = p[i + 1];
      size_t esc_end = i + 2;
      std::optional<ClassText> cls;
      if (d == 'p' || d == 'P') {
        if (esc_end < p.size() && p[esc_end] == '{') {
          size_t close = p.find('}', esc_end);
          if (close != std::string_view::npos) {
            std::string_view name = p.substr(esc_end + 1, close - esc_end - 1);
            bool neg = d == 'P';
            if (!name.empty() && name[0] == '^') {
              neg = !neg;
              name.remove_prefix(1);
            }
            if (const generated::HfProperty* prop = hf_property(name)) {
              cls = translate_class(prop, std::string("\\p{") + prop->name + "}", neg);
            }
            esc_end = close + 1;
          }
        }
      } else if (d == 'w' || d == 'W') {
        cls = translate_class(hf_escape_class('w'), "\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}", d == 'W');
      } else if (d == 'd' || d == 'D') {
        cls = translate_class(hf_escape_class('d'), "\\p{Nd}", d == 'D');
      } else if (d == 's' || d == 'S') {  // PCRE2's \s differs (U+0085, U+180E): spell HF's set out
        const generated::HfProperty* sp = hf_escape_class('s');
        std::string body;
        for (size_t r = 0; r < sp->n_ranges; ++r) {
          append_cp(body, sp->ranges[r].first);
          if (sp->ranges[r].last > sp->ranges[r].first) {
            body += "-";
            append_cp(body, sp->ranges[r].last);
          }
        }
        cls = ClassText{body, d == 'S'};
      } else if (d == 'h' || d == 'H') {  // Oniguruma: hexadecimal digit
        cls = ClassText{"0-9a-fA-F", d == 'H'};
      }
      if (cls) emit(*cls, p.substr(i, esc_end - i));
      else out.append(p.substr(i, esc_end - i));
      i = esc_end - 1;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ']' is literal
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:alpha:]
      size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

namespace {

// Per-thread PCRE2 state: match data for group 0, and a JIT stack large enough for long whitespace runs.
struct ThreadMatchState {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mc = nullptr;
  pcre2_jit_stack* js = nullptr;
  ThreadMatchState() {
    md = pcre2_match_data_create(1, nullptr);
    mc = pcre2_match_context_create(nullptr);
    js = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
    if (mc && js) pcre2_jit_stack_assign(mc, nullptr, js);
  }
  ~ThreadMatchState() {
    if (md) pcre2_match_data_free(md);
    if (mc) pcre2_match_context_free(mc);
    if (js) pcre2_jit_stack_free(js);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState s;
  return s;
}

}  // namespace

Regex::~Regex() {
  if (code_) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

Result<std::unique_ptr<Regex>> Regex::compile(std::string_view pattern, Engine engine) {
  if (engine == Engine::kAuto) {
    if (FastPattern f = fast_pattern_for(pattern); f != FastPattern::kNone) {
      std::unique_ptr<Regex> r(new Regex());
      r->fast_ = static_cast<int>(f);
      return r;
    }
  }
  std::string pat = onig_to_pcre2(pattern);
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(), PCRE2_UTF | PCRE2_UCP,
                                   &err, &off, nullptr);
  if (!code) {
    return Error::invalid_argument("[tokenizer] regex '{}': {} at offset {}", std::string(pattern),
                                   pcre2_message(err), off);
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // when JIT is unavailable the interpreter runs instead
  std::unique_ptr<Regex> r(new Regex());
  r->code_ = code;
  return r;
}

Status Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  if (fast_) {
    fast_find_all(static_cast<FastPattern>(fast_), text, out);
    return Status::ok();
  }
  auto* code = static_cast<pcre2_code*>(code_);
  ThreadMatchState& ts = thread_state();
  if (!ts.md || !ts.mc) return Error::internal("[tokenizer] out of memory for regex match data");
  size_t pos = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (pos <= text.size()) {
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos, PCRE2_NO_UTF_CHECK,
                         ts.md, ts.mc);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return Error::internal("[tokenizer] regex match failed: {}", pcre2_message(rc));
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.md);
    size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_end == e) {
      // An empty match right after the previous match: step over one character and search again.
      if (pos >= text.size()) break;
      pos += utf8_seq_len(static_cast<unsigned char>(text[pos]));
      continue;
    }
    out.emplace_back(s, e);
    have_last = true;
    last_end = e;
    pos = e;
  }
  return Status::ok();
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

Result<Pattern> Pattern::regex(std::string_view re) {
  Pattern p;
  PIPIT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> r, Regex::compile(re));
  p.regex_ = std::move(r);
  return p;
}

Status Pattern::find_matches(std::string_view text, std::vector<Match>& out) const {
  out.clear();
  if (!regex_ && literal_.empty()) {  // HF: an empty string pattern matches nothing
    out.push_back({0, text.size(), false});
    return Status::ok();
  }
  if (text.empty()) {
    out.push_back({0, 0, false});
    return Status::ok();
  }
  size_t prev = 0;
  auto add = [&](size_t s, size_t e) {
    if (prev != s) out.push_back({prev, s, false});
    out.push_back({s, e, true});
    prev = e;
  };
  if (regex_) {
    std::vector<std::pair<size_t, size_t>> ms;
    PIPIT_TRY(regex_->find_all(text, ms));
    for (auto& [s, e] : ms) add(s, e);
  } else {
    size_t pos = 0;
    while (true) {
      size_t f = text.find(literal_, pos);
      if (f == std::string_view::npos) break;
      add(f, f + literal_.size());
      pos = f + literal_.size();
    }
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
  return Status::ok();
}

Result<SplitBehavior> parse_split_behavior(std::string_view name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return Error::invalid_argument("unknown split behavior '{}' (expected Removed, Isolated, MergedWithPrevious, "
                                 "MergedWithNext or Contiguous)", std::string(name));
}

std::vector<std::pair<size_t, size_t>> apply_split_behavior(const std::vector<Match>& matches,
                                                            SplitBehavior behavior) {
  std::vector<std::pair<size_t, size_t>> r;
  r.reserve(matches.size());
  bool prev_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (auto& m : matches) r.emplace_back(m.start, m.end);
      break;
    case SplitBehavior::kRemoved:
      for (auto& m : matches)
        if (!m.is_match) r.emplace_back(m.start, m.end);
      break;
    case SplitBehavior::kContiguous:
      for (auto& m : matches) {
        if (m.is_match == prev_match && !r.empty()) r.back().second = m.end;
        else r.emplace_back(m.start, m.end);
        prev_match = m.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (auto& m : matches) {
        if (m.is_match && !prev_match && !r.empty()) r.back().second = m.end;
        else r.emplace_back(m.start, m.end);
        prev_match = m.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t k = matches.size(); k-- > 0;) {
        const Match& m = matches[k];
        if (m.is_match && !prev_match && !r.empty()) r.back().first = m.start;
        else r.emplace_back(m.start, m.end);
        prev_match = m.is_match;
      }
      std::reverse(r.begin(), r.end());
      break;
  }
  return r;
}

}  // namespace pipit::tok
