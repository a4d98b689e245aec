// Integer / number ranges, string formats and regex patterns as GBNF (see json_schema_values.h).
#include "runtime/json_schema_values.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <vector>

#include "runtime/json_schema.h"

namespace pipit::json_schema {

namespace {

std::string lit(std::string_view s) { return JsonGrammarBuilder::literal(s); }

// "\\u00e9"-style hex: `prefix` then `digits` upper-case hex digits of v.
std::string hex_digits(const char* prefix, uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%s%0*X", prefix, digits, v);
  return buf;
}

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

// Equal-length digit strings lo <= hi: the strings of that length between them. The classic range-to-regex split:
// a common prefix, then the first differing digit's low edge (lo's tail up to 9...9), the digits strictly between
// (any tail), and the high edge (0...0 up to hi's tail).
std::string digits_between(const std::string& lo, const std::string& hi) {
  if (lo == hi) return lit(lo);
  size_t p = 0;
  while (lo[p] == hi[p]) ++p;
  const std::string prefix = p ? lit(lo.substr(0, p)) + " " : "";
  const std::string lt = lo.substr(p + 1), ht = hi.substr(p + 1);
  const char l0 = lo[p], h0 = hi[p];
  const bool lo_zeros = lt.find_first_not_of('0') == std::string::npos;
  const bool hi_nines = ht.find_first_not_of('9') == std::string::npos;
  const std::string any_tail = lt.empty() ? "" : " [0-9]{" + std::to_string(lt.size()) + "}";
  std::vector<std::string> alts;
  if (!lo_zeros) alts.push_back(lit(std::string(1, l0)) + " " + digits_between(lt, std::string(lt.size(), '9')));
  const char a = lo_zeros ? l0 : char(l0 + 1), b = hi_nines ? h0 : char(h0 - 1);
  if (a <= b) alts.push_back(std::string("[") + a + "-" + b + "]" + any_tail);
  if (!hi_nines) alts.push_back(lit(std::string(1, h0)) + " " + digits_between(std::string(ht.size(), '0'), ht));
  return prefix + join_alts(alts);
}

// 0 <= lo <= hi: split by number of digits, each length by digits_between.
std::string nonnegative_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  const std::string ls = std::to_string(lo), hs = std::to_string(hi);
  int64_t first = 1;  // 10^(d - 1): the first number with d digits
  for (size_t d = 1; d < ls.size(); ++d) first *= 10;
  for (size_t d = ls.size(); d <= hs.size(); ++d, first *= 10) {
    const std::string a = d == ls.size() ? ls : std::to_string(first);
    const std::string b = d == hs.size() ? hs : std::string(d, '9');
    alts.push_back(digits_between(a, b));
  }
  return join_alts(alts);
}

constexpr const char* kFraction = "\".\" [0-9]{1,16}";

}  // namespace

std::string integer_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (hi >= 0) alts.push_back(nonnegative_range(std::max<int64_t>(lo, 0), hi));
  if (lo < 0) alts.push_back("\"-\" " + nonnegative_range(std::max<int64_t>(-hi, 1), -lo));
  return join_alts(alts);
}

std::string number_range(int64_t lo, int64_t hi) {
  if (lo > hi) return "";
  std::vector<std::string> alts = {integer_range(lo, hi)};
  // I.ddd lies in [I, I + 1): I >= 0 and I + 1 <= hi
  if (std::max<int64_t>(lo, 0) <= hi - 1)
    alts.push_back(nonnegative_range(std::max<int64_t>(lo, 0), hi - 1) + " " + kFraction);
  // -K.ddd lies in (-K - 1, -K]: K >= 0, -K <= hi and -K - 1 >= lo
  if (std::max<int64_t>(-hi, 0) <= -lo - 1)
    alts.push_back("\"-\" " + nonnegative_range(std::max<int64_t>(-hi, 0), -lo - 1) + " " + kFraction);
  return join_alts(alts);
}

std::optional<std::string> format_body(std::string_view f) {
  static const std::string hex = "[0-9a-fA-F]";
  // Days per month, Feb to 28 (a 29th is valid only in leap years): every date written is a real one.
  static const std::string date =
      "[0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
      "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
      "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )";
  // Seconds 00-59 (no leap second), optional fraction; the zone is "Z" (zod's datetime() takes no offsets unless
  // told to, and RFC 3339 allows Z everywhere).
  static const std::string time = "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )?";
  if (f == "uuid")
    return hex + "{8} \"-\" " + hex + "{4} \"-\" " + hex + "{4} \"-\" " + hex + "{4} \"-\" " + hex + "{12}";
  if (f == "date") return date;
  if (f == "time") return time + " \"Z\"";
  if (f == "date-time") return date + " \"T\" " + time + " \"Z\"";
  if (f == "ipv4") {
    const std::string octet = "( \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9] )";
    return octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet;
  }
  if (f == "email")  // a plain subset every email validator accepts: word.word@label.label.tld
    return "[a-zA-Z0-9]{1,32} ( [._+-] [a-zA-Z0-9]{1,32} ){0,3} \"@\" [a-zA-Z0-9]{1,32} ( \"-\" [a-zA-Z0-9]{1,32} )? "
           "( \".\" [a-zA-Z0-9]{1,32} ){0,2} \".\" [a-zA-Z]{2,8}";
  return std::nullopt;
}

namespace {

// ECMAScript regex -> GBNF over the JSON-encoded string body. A small recursive-descent reader: alternation,
// sequences, groups ((...), (?:...), (?<name>...)), classes, escapes, . and quantifiers; anchors only at the ends
// of a top-level alternative.
class PatternReader {
 public:
  explicit PatternReader(std::string_view p) : p_(p) {}

  Result<std::string> top() {
    std::vector<std::string> alts;
    for (;;) {
      const bool anchored_start = eat('^');
      PIPIT_ASSIGN_OR_RETURN(std::string seq, sequence(/*top=*/true));
      const bool anchored_end = eat('$');
      // unanchored: anything before / after (JSON Schema patterns match anywhere in the string)
      std::string branch = (anchored_start ? "" : "json-char* ") + seq + (anchored_end ? "" : " json-char*");
      alts.push_back("( " + branch + " )");
      if (at_end()) break;
      if (!eat('|')) return error("an anchor ($) before the end of the pattern");
    }
    return join_alts(alts);
  }

 private:
  bool at_end() const { return i_ >= p_.size(); }
  char peek() const { return at_end() ? '\0' : p_[i_]; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  Status error(std::string_view what) const {
    return Error::invalid_argument("pattern: {} at offset {} is not supported (grammars cannot express it)", what, i_);
  }

  Result<std::string> alternation() {
    std::vector<std::string> alts;
    for (;;) {
      PIPIT_ASSIGN_OR_RETURN(std::string seq, sequence(false));
      alts.push_back(seq);
      if (!eat('|')) break;
    }
    return alts.size() == 1 ? "( " + alts[0] + " )" : join_alts(alts);
  }

  // Atoms with their quantifiers, up to '|', ')' or the end ('$' ends a top-level one).
  Result<std::string> sequence(bool top) {
    std::string out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        if (top && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) break;
        return error("an anchor ($) inside the pattern");
      }
      if (peek() == '^') return error("an anchor (^) inside the pattern");
      PIPIT_ASSIGN_OR_RETURN(std::string a, atom());
      PIPIT_ASSIGN_OR_RETURN(std::string q, quantifier());
      if (!out.empty()) out += ' ';
      if (q.empty()) {
        out += a;
      } else {
        out += "( ";
        out += a;
        out += " )";
        out += q;
      }
    }
    return out.empty() ? std::string("\"\"") : out;
  }

  Result<std::string> quantifier() {
    std::string q;
    if (eat('*')) q = "*";
    else if (eat('+')) q = "+";
    else if (eat('?')) q = "?";
    else if (peek() == '{' && i_ + 1 < p_.size() && std::isdigit(uint8_t(p_[i_ + 1]))) {
      ++i_;
      int64_t m = 0, n = -1;
      PIPIT_TRY(number(m));
      if (eat(',')) {
        if (peek() != '}') PIPIT_TRY(number(n));
      } else {
        n = m;
      }
      if (!eat('}') || (n >= 0 && n < m) || m > 1000 || n > 1000) return error("a repetition other than {m,n} <= 1000");
      q = "{" + std::to_string(m) + (n == m ? "" : "," + (n < 0 ? std::string() : std::to_string(n))) + "}";
    } else {
      return std::string();
    }
    eat('?');  // lazy: the same strings
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') return error("a repeated quantifier");
    return q;
  }

  Status number(int64_t& v) {
    if (!std::isdigit(uint8_t(peek()))) return error("a repetition count that is not a number");
    v = 0;
    while (std::isdigit(uint8_t(peek())) && v <= 100000) v = v * 10 + (p_[i_++] - '0');
    return Status::ok();
  }

  Result<std::string> atom() {
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (eat('?')) {
        if (eat(':')) {
        } else if (peek() == '<' && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          while (!at_end() && peek() != '>') ++i_;  // a named group is a plain group here
          if (!eat('>')) return error("an unterminated group name");
        } else {
          return error("lookaround ((?=, (?!, (?<=, (?<!)");
        }
      }
      PIPIT_ASSIGN_OR_RETURN(std::string inner, alternation());
      if (!eat(')')) return error("an unclosed group");
      return inner;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return std::string("[^\"\\\\\\x00-\\x1F]");
    }
    if (c == '*' || c == '+' || c == '?' || (c == '{' && i_ + 1 < p_.size() && std::isdigit(uint8_t(p_[i_ + 1]))))
      return error("a quantifier with nothing to repeat");
    if (c == '\\') {
      ++i_;
      const char e = peek();
      if (e == 'd') return ++i_, std::string("[0-9]");
      if (e == 'w') return ++i_, std::string("[a-zA-Z0-9_]");
      if (e == 's') return ++i_, std::string("( \" \" | \"\\\\t\" | \"\\\\n\" | \"\\\\r\" )");
      if (e == 'D') return ++i_, std::string("[^0-9\"\\\\\\x00-\\x1F]");
      if (e == 'W') return ++i_, std::string("[^a-zA-Z0-9_\"\\\\\\x00-\\x1F]");
      if (e == 'S') return ++i_, std::string("[^ \"\\\\\\x00-\\x1F]");
      PIPIT_ASSIGN_OR_RETURN(uint32_t cp, escaped());
      return char_literal(cp);
    }
    PIPIT_ASSIGN_OR_RETURN(uint32_t cp, code_point());
    return char_literal(cp);
  }

  // After a backslash: one code point that stands for itself.
  Result<uint32_t> escaped() {
    const char e = peek();
    if (at_end()) return error("a trailing backslash");
    ++i_;
    switch (e) {
      case 'n': return uint32_t('\n');
      case 't': return uint32_t('\t');
      case 'r': return uint32_t('\r');
      case 'f': return uint32_t('\f');
      case 'v': return uint32_t('\v');
      case '0': return uint32_t(0);
      case 'x': return hex(2);
      case 'u': return hex(4);
      default: break;
    }
    if (std::isalnum(uint8_t(e))) {  // \b \B \1 \k \p ...: assertions, backreferences, classes grammars lack
      --i_;
      return error(fmt("the escape \\{}", e));
    }
    return uint32_t(uint8_t(e));  // \. \- \/ \\ \( ...: the character itself
  }

  Result<uint32_t> hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char h = peek();
      if (!std::isxdigit(uint8_t(h))) return error("a malformed hex escape");
      v = v * 16 + uint32_t(std::isdigit(uint8_t(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      ++i_;
    }
    return v;
  }

  // One UTF-8 code point of the pattern.
  Result<uint32_t> code_point() {
    const uint8_t b = uint8_t(p_[i_]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + size_t(n) > p_.size()) return error("invalid UTF-8");
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(p_[i_ + size_t(k)]) & 0x3F);
    i_ += size_t(n);
    return cp;
  }

  // A code point as it is written inside a JSON string.
  static std::string json_text(uint32_t cp) {
    switch (cp) {
      case '"': return "\\\"";
      case '\\': return "\\\\";
      case '\n': return "\\n";
      case '\t': return "\\t";
      case '\r': return "\\r";
      default: break;
    }
    if (cp < 0x20) return hex_digits("\\u", cp, 4);
    std::string s;
    if (cp < 0x80) s += char(cp);
    else if (cp < 0x800) s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
    else if (cp < 0x10000) s += char(0xE0 | (cp >> 12)), s += char(0x80 | ((cp >> 6) & 0x3F)), s += char(0x80 | (cp & 0x3F));
    else s += char(0xF0 | (cp >> 18)), s += char(0x80 | ((cp >> 12) & 0x3F)), s += char(0x80 | ((cp >> 6) & 0x3F)),
        s += char(0x80 | (cp & 0x3F));
    return s;
  }
  static std::string char_literal(uint32_t cp) { return lit(json_text(cp)); }

  static std::string class_char(uint32_t cp) {
    if (std::isalnum(int(cp)) && cp < 0x80) return std::string(1, char(cp));
    return cp <= 0xFF ? hex_digits("\\x", cp, 2) : hex_digits("\\u", cp, 4);
  }

  // [...] / [^...]. Characters JSON must escape (", \, controls) cannot go in a GBNF class of the encoded text:
  // in a class they become alternatives with their escaped form (\t \n \r and " \ only); a negated class
  // excludes all of them (sound: the answer never holds a raw quote).
  Result<std::string> char_class() {
    ++i_;  // '['
    const bool negate = eat('^');
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (!at_end() && peek() != ']') {
      uint32_t lo;
      if (peek() == '\\') {
        ++i_;
        const char e = peek();
        if (e == 'd' || e == 'w' || e == 's') {
          ++i_;
          if (e == 'd') ranges.push_back({'0', '9'});
          if (e == 'w') ranges.insert(ranges.end(), {{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'_', '_'}});
          if (e == 's') ranges.insert(ranges.end(), {{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}});
          continue;
        }
        if (e == 'D' || e == 'W' || e == 'S') return error("a negated class escape inside [...]");
        if (e == 'b') {
          ++i_;
          lo = '\b';
        } else {
          PIPIT_ASSIGN_OR_RETURN(lo, escaped());
        }
      } else {
        PIPIT_ASSIGN_OR_RETURN(lo, code_point());
      }
      uint32_t hi = lo;
      if (peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (peek() == '\\') {
          ++i_;
          PIPIT_ASSIGN_OR_RETURN(hi, escaped());
        } else {
          PIPIT_ASSIGN_OR_RETURN(hi, code_point());
        }
        if (hi < lo) return error("a class range out of order");
      }
      ranges.push_back({lo, hi});
    }
    if (!eat(']')) return error("an unclosed character class");
    std::string cls;
    std::vector<std::string> escapes;
    for (auto [lo, hi] : ranges) {
      // cut out the characters a JSON string escapes
      for (uint32_t special : {uint32_t('\t'), uint32_t('\n'), uint32_t('\r'), uint32_t('"'), uint32_t('\\')})
        if (!negate && lo <= special && special <= hi) escapes.push_back(char_literal(special));
      std::vector<std::pair<uint32_t, uint32_t>> pieces = {{std::max<uint32_t>(lo, 0x20), hi}};
      for (uint32_t special : {uint32_t('"'), uint32_t('\\')}) {
        std::vector<std::pair<uint32_t, uint32_t>> next;
        for (auto [a, b] : pieces) {
          if (a > b) continue;
          if (special < a || special > b) next.push_back({a, b});
          else {
            if (a < special) next.push_back({a, special - 1});
            if (special < b) next.push_back({special + 1, b});
          }
        }
        pieces = std::move(next);
      }
      for (auto [a, b] : pieces) {
        if (a > b) continue;
        if (a > 0xFFFF || b > 0xFFFF) return error("a class beyond U+FFFF");
        cls += class_char(a) + (a == b ? "" : "-" + class_char(b));
      }
    }
    if (negate) return "[^" + cls + "\"\\\\\\x00-\\x1F]";
    std::sort(escapes.begin(), escapes.end());
    escapes.erase(std::unique(escapes.begin(), escapes.end()), escapes.end());
    if (!cls.empty()) escapes.insert(escapes.begin(), "[" + cls + "]");
    if (escapes.empty()) return error("an empty character class");
    return join_alts(escapes);
  }

  std::string_view p_;
  size_t i_ = 0;
};

}  // namespace

Result<std::string> pattern_body(std::string_view pattern) { return PatternReader(pattern).top(); }

}  // namespace pipit::json_schema
