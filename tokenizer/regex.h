// Patterns for the tokenizer (private header): PCRE2 regexes compiled from the Oniguruma-syntax strings that
// tokenizer.json carries, literal string patterns, and the match lists HF `tokenizers` splits on.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/unicode.h"

namespace pipit::tok {

// One slice of a string; the slices of a match list cover the string in order.
struct Match {
  size_t start, end;
  bool is_match;
};

// A compiled PCRE2 regex (UTF + UCP, JIT when available). Thread-safe: each call uses its own match data.
class Regex {
 public:
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  enum class Engine {
    kAuto,   // the hand-written matcher when the pattern is GPT-2's, Llama-3's or Qwen2's, else PCRE2
    kPcre2,  // always PCRE2 (tests compare the two)
  };
  // `pattern` in Oniguruma (Ruby) syntax, as HF `tokenizers` compiles it; see onig_to_pcre2.
  static Result<std::unique_ptr<Regex>> compile(std::string_view pattern, Engine engine = Engine::kAuto);
  bool uses_fast_path() const { return fast_ != 0; }
  // Appends the [start, end) of every non-overlapping match, left to right (empty matches right after a
  // match are skipped, as Rust's find_iter does). `text` must be valid UTF-8.
  Status find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  int fast_ = 0;          // a FastPattern (regex_fast.h) other than kNone, or 0
};

// Translation of an Oniguruma pattern into PCRE2 syntax (exposed for tests): \p{X}, \w, \d and \s become
// PCRE2 classes completed with the code points HF's newer Unicode tables add (unicode_props.h); \s includes
// U+0085; \h is a hex digit.
std::string onig_to_pcre2(std::string_view pattern);

// HF SplitPattern / ReplacePattern: {"String": "..."} (a literal) or {"Regex": "..."}.
class Pattern {
 public:
  static Pattern literal(std::string s);
  static Result<Pattern> regex(std::string_view re);

  // HF Pattern::find_matches: slices covering `text`, flagged as match or not; [(0, 0, false)] for "".
  Status find_matches(std::string_view text, std::vector<Match>& out) const;

 private:
  std::string literal_;
  std::shared_ptr<Regex> regex_;
};

// HF SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Result<SplitBehavior> parse_split_behavior(std::string_view name);

// Turns a match list into the [start, end) ranges to keep, following `behavior` (HF NormalizedString::split).
// Empty ranges are kept; callers drop them.
std::vector<std::pair<size_t, size_t>> apply_split_behavior(const std::vector<Match>& matches,
                                                            SplitBehavior behavior);

// Match list for a per-character predicate (HF's `impl Pattern for Fn(char) -> bool`).
template <class Pred>
void find_char_matches(std::string_view text, Pred pred, std::vector<Match>& out);

// ---- implementation ----

template <class Pred>
void find_char_matches(std::string_view text, Pred pred, std::vector<Match>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0, i = 0;
  while (i < text.size()) {
    size_t b = i;
    uint32_t c = utf8_next(text, i);
    if (pred(c)) {
      if (last < b) out.push_back({last, b, false});
      out.push_back({b, i, true});
      last = i;
    }
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
}

}  // namespace pipit::tok
