// GBNF parsing and validation (grammar.h Grammar). The token table is in grammar_tokens.cpp, the matcher and
// vocabulary masking in grammar_match.cpp.
#include "runtime/grammar.h"

#include <algorithm>
#include <limits>
#include <map>

#include "runtime/grammar_mask_cache.h"

namespace pipit {

bool GrammarElem::matches(uint32_t cp) const {
  bool in = false;
  for (auto& [lo, hi] : ranges)
    if (cp >= lo && cp <= hi) {
      in = true;
      break;
    }
  return in != negate;
}

bool GrammarElem::matches_any(uint32_t lo, uint32_t hi) const {
  if (!negate) {
    for (auto& [a, b] : ranges)
      if (a <= hi && b >= lo) return true;
    return false;
  }
  // negated: some code point of [lo, hi] lies outside every range
  std::vector<std::pair<uint32_t, uint32_t>> r = ranges;
  std::sort(r.begin(), r.end());
  uint32_t next = lo;  // the smallest code point not yet known to be covered
  for (auto& [a, b] : r) {
    if (b < next) continue;
    if (a > next) return true;
    if (b >= hi) return false;
    next = b + 1;
  }
  return next <= hi;
}

// ---------------------------------------------------------------- parsing

namespace {

struct Parser {
  std::string_view src;
  size_t pos = 0;
  Grammar g;
  std::map<std::string, uint32_t> ids;
  std::vector<bool> defined;
  std::vector<size_t> first_use_line;

  // The line of `pos`, counted on from the last call's position (the parser moves forward; a rule per JSON-schema
  // enum value asks once per rule, and counting from the start each time made a 10k-value enum quadratic).
  size_t line() const {
    if (pos < line_pos_) line_pos_ = 0, line_ = 1;
    line_ += size_t(std::count(src.begin() + long(line_pos_), src.begin() + long(pos), '\n'));
    line_pos_ = pos;
    return line_;
  }
  mutable size_t line_pos_ = 0, line_ = 1;
  Status err(const std::string& what) const { return Error::invalid_argument("[grammar] line {}: {}", line(), what); }

  // The grammar's size, counted as it is built: literal characters, class ranges and rule references (each ~80
  // bytes once compiled). A JSON schema whose enum holds a 30 MB string compiled for 28 s into 4 GB; real grammars
  // and schemas have thousands to a few hundred thousand.
  static constexpr size_t kMaxElements = size_t(1) << 20;
  size_t n_elements = 0;
  Status spend(size_t n) {
    n_elements += n;
    if (n_elements > kMaxElements)
      return err(fmt("the grammar has more than {} characters, classes and rule references, the most one may have",
                     kMaxElements));
    return Status::ok();
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  bool at_end() const { return pos >= src.size(); }
  char peek(size_t k = 0) const { return pos + k < src.size() ? src[pos + k] : '\0'; }

  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos;
      } else {
        break;
      }
    }
  }

  uint32_t rule_id(const std::string& name) {
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    const uint32_t id = uint32_t(g.rules.size());
    ids[name] = id;
    g.rules.emplace_back();
    g.names.push_back(name);
    defined.push_back(false);
    first_use_line.push_back(line());
    return id;
  }
  // A fresh rule named base, base-1, base-2, ...: the next suffix to try is kept per base (trying from 1 each time
  // was quadratic in the rules sharing a base, e.g. one literal rule per value of a large enum).
  std::map<std::string, int> next_suffix;
  uint32_t new_rule(const std::string& base) {
    std::string n = base;
    int& k = next_suffix[base];
    if (k > 0 || ids.count(n)) {
      if (k == 0) k = 1;
      do n = base + "-" + std::to_string(k++);
      while (ids.count(n));
    }
    const uint32_t id = rule_id(n);
    defined[id] = true;
    return id;
  }

  // A rule definition starts here: name ws ::=
  bool rule_ahead() const {
    size_t p = pos;
    if (p >= src.size() || !name_char(src[p])) return false;
    while (p < src.size() && name_char(src[p])) ++p;
    while (p < src.size() && (src[p] == ' ' || src[p] == '\t' || src[p] == '\r' || src[p] == '\n')) ++p;
    return src.substr(p, 3) == "::=";
  }

  Result<uint32_t> parse_hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const char c = peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return err("expected a hex digit in an escape");
      v = v * 16 + uint32_t(d);
      ++pos;
    }
    return v;
  }

  // One code point of a literal or class (after any backslash escape).
  Result<uint32_t> parse_char() {
    if (at_end()) return err("unexpected end of grammar");
    const unsigned char c = uint8_t(peek());
    if (c == '\\') {
      ++pos;
      const char e = peek();
      ++pos;
      switch (e) {
        case 'n': return uint32_t('\n');
        case 't': return uint32_t('\t');
        case 'r': return uint32_t('\r');
        case '0': return uint32_t(0);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return uint32_t(uint8_t(e));
        default: return err(fmt("unknown escape '\\{}'", e));
      }
    }
    // UTF-8 decode
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos + size_t(n) > src.size()) return err("invalid UTF-8 in the grammar");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) {
      const unsigned char cc = uint8_t(src[pos + size_t(i)]);
      if ((cc & 0xC0) != 0x80) return err("invalid UTF-8 in the grammar");
      cp = cp << 6 | (cc & 0x3F);
    }
    pos += size_t(n);
    return cp;
  }

  // Appends to `seq` the elements of one item (with any repetition).
  Status parse_item(const std::string& rule_name, std::vector<GrammarElem>& seq) {
    std::vector<GrammarElem> item;  // what a repetition applies to: one element (or one rule ref)
    const char c = peek();
    if (c == '"') {
      ++pos;
      std::vector<GrammarElem> lit;
      while (peek() != '"') {
        if (at_end() || peek() == '\n') return err("unterminated string literal");
        PIPIT_ASSIGN_OR_RETURN(uint32_t cp, parse_char());
        PIPIT_TRY(spend(1));
        GrammarElem e;
        e.kind = GrammarElem::kChars;
        e.ranges = {{cp, cp}};
        lit.push_back(std::move(e));
      }
      ++pos;
      if (lit.size() == 1) {
        item = std::move(lit);
      } else {  // a multi-character literal repeats as a whole: give it a rule
        const uint32_t r = new_rule(rule_name + "-lit");
        lit.push_back(GrammarElem{});
        g.rules[r].push_back(std::move(lit));
        GrammarElem ref;
        ref.kind = GrammarElem::kRule;
        ref.rule = r;
        item.push_back(std::move(ref));
      }
    } else if (c == '[') {
      ++pos;
      GrammarElem e;
      e.kind = GrammarElem::kChars;
      if (peek() == '^') {
        e.negate = true;
        ++pos;
      }
      while (peek() != ']') {
        if (at_end()) return err("unterminated character class");
        PIPIT_ASSIGN_OR_RETURN(uint32_t lo, parse_char());
        uint32_t hi = lo;
        if (peek() == '-' && peek(1) != ']') {
          ++pos;
          PIPIT_ASSIGN_OR_RETURN(hi, parse_char());
          if (hi < lo) return err("character range out of order");
        }
        PIPIT_TRY(spend(1));
        e.ranges.push_back({lo, hi});
      }
      ++pos;
      item.push_back(std::move(e));
    } else if (c == '.') {
      ++pos;
      GrammarElem e;
      e.kind = GrammarElem::kChars;
      e.negate = true;  // nothing excluded: any code point
      item.push_back(std::move(e));
    } else if (c == '(') {
      ++pos;
      const uint32_t r = new_rule(rule_name + "-group");
      PIPIT_TRY(parse_alternatives(rule_name, r));
      skip_space(true);
      if (peek() != ')') return err("expected ')'");
      ++pos;
      GrammarElem ref;
      ref.kind = GrammarElem::kRule;
      ref.rule = r;
      item.push_back(std::move(ref));
    } else if (name_char(c)) {
      std::string name;
      while (name_char(peek())) name += src[pos++];
      PIPIT_TRY(spend(1));
      GrammarElem ref;
      ref.kind = GrammarElem::kRule;
      ref.rule = rule_id(name);
      item.push_back(std::move(ref));
    } else {
      return err(fmt("unexpected character '{}'", c));
    }

    // repetition
    int64_t lo = 1, hi = 1;
    const char r = peek();
    if (r == '*') lo = 0, hi = -1, ++pos;
    else if (r == '+') lo = 1, hi = -1, ++pos;
    else if (r == '?') lo = 0, hi = 1, ++pos;
    else if (r == '{') {
      ++pos;
      auto num = [&](int64_t& out) -> bool {
        if (!(peek() >= '0' && peek() <= '9')) return false;
        out = 0;
        while (peek() >= '0' && peek() <= '9') {
          out = out * 10 + (peek() - '0');
          if (out > 10000) return false;
          ++pos;
        }
        return true;
      };
      skip_space(false);
      if (!num(lo)) return err("expected a number in {m,n} (at most 10000)");
      skip_space(false);
      hi = lo;
      if (peek() == ',') {
        ++pos;
        skip_space(false);
        hi = -1;
        if (peek() != '}' && !num(hi)) return err("expected a number in {m,n} (at most 10000)");
        skip_space(false);
      }
      if (peek() != '}') return err("expected '}'");
      ++pos;
      if (hi >= 0 && hi < lo) return err("{m,n} with n < m");
    }
    // the copies a repetition makes count too: lo of the item, and a rule of item + reference per optional one
    PIPIT_TRY(spend(item.size() * size_t(lo) + (hi > lo ? size_t(hi - lo) * (item.size() + 2) : 0)));
    if (lo == 1 && hi == 1) {
      for (auto& e : item) seq.push_back(std::move(e));
      return Status::ok();
    }
    for (int64_t i = 0; i < lo; ++i)
      for (auto& e : item) seq.push_back(e);
    auto ref_to = [](uint32_t rr) {
      GrammarElem ref;
      ref.kind = GrammarElem::kRule;
      ref.rule = rr;
      return ref;
    };
    if (hi < 0) {  // R ::= item R | (empty)
      const uint32_t rr = new_rule(rule_name + "-star");
      std::vector<GrammarElem> alt = item;
      alt.push_back(ref_to(rr));
      alt.push_back(GrammarElem{});
      g.rules[rr].push_back(std::move(alt));
      g.rules[rr].push_back({GrammarElem{}});
      seq.push_back(ref_to(rr));
    } else if (hi > lo) {  // nested optionals: R_k ::= item R_{k-1} | (empty)
      uint32_t inner = 0;
      bool have_inner = false;
      for (int64_t k = 0; k < hi - lo; ++k) {
        const uint32_t rr = new_rule(rule_name + "-opt");
        std::vector<GrammarElem> alt = item;
        if (have_inner) alt.push_back(ref_to(inner));
        alt.push_back(GrammarElem{});
        g.rules[rr].push_back(std::move(alt));
        g.rules[rr].push_back({GrammarElem{}});
        inner = rr;
        have_inner = true;
      }
      seq.push_back(ref_to(inner));
    }
    return Status::ok();
  }

  Status parse_sequence(const std::string& rule_name, std::vector<GrammarElem>& seq) {
    for (;;) {
      skip_space(true);
      if (at_end() || peek() == '|' || peek() == ')' || rule_ahead()) break;
      PIPIT_TRY(parse_item(rule_name, seq));
      if (seq.size() > 100000) return err("rule too long");
    }
    seq.push_back(GrammarElem{});
    return Status::ok();
  }

  Status parse_alternatives(const std::string& rule_name, uint32_t r) {
    for (;;) {
      std::vector<GrammarElem> seq;
      PIPIT_TRY(parse_sequence(rule_name, seq));
      g.rules[r].push_back(std::move(seq));
      skip_space(true);
      if (peek() != '|') break;
      ++pos;
    }
    return Status::ok();
  }

  Status parse_all() {
    for (;;) {
      skip_space(true);
      if (at_end()) break;
      if (!name_char(peek())) return err(fmt("expected a rule name, got '{}'", peek()));
      std::string name;
      while (name_char(peek())) name += src[pos++];
      skip_space(true);
      if (src.substr(pos, 3) != "::=") return err(fmt("expected '::=' after '{}'", name));
      pos += 3;
      const uint32_t r = rule_id(name);
      if (defined[r]) return err(fmt("rule '{}' is defined twice", name));
      defined[r] = true;
      PIPIT_TRY(parse_alternatives(name, r));
      skip_space(true);
      if (!at_end() && !rule_ahead()) return err(fmt("unexpected '{}'", peek()));
    }
    return Status::ok();
  }
};

// Checks: every rule defined, no left recursion, the root can match some text.
Status validate(const Grammar& g) {
  const size_t n = g.rules.size();
  // nullable and productive, by a worklist: each alternative counts the elements still in the way (for nullable:
  // its rule references not yet nullable, never satisfied with a terminal; for productive: its references not yet
  // productive), and a rule that becomes nullable / productive lowers the counts of the alternatives that use it.
  // Linear in the grammar's size; a fixed point over all rules took a pass per link of a chain (a JSON schema with
  // 10k optional properties is a 10k-rule chain: 114 s).
  std::vector<bool> nullable(n, false), productive(n, false);
  struct AltRef {
    uint32_t rule, alt;
  };
  std::vector<std::vector<AltRef>> users(n);  // per rule: the alternatives referencing it (once per reference)
  std::vector<std::vector<int64_t>> null_need(n), prod_need(n);
  std::vector<uint32_t> null_work, prod_work;
  auto mark_null = [&](uint32_t r) {
    if (!nullable[r]) nullable[r] = true, null_work.push_back(r);
  };
  auto mark_prod = [&](uint32_t r) {
    if (!productive[r]) productive[r] = true, prod_work.push_back(r);
  };
  for (uint32_t r = 0; r < n; ++r) {
    null_need[r].resize(g.rules[r].size());
    prod_need[r].resize(g.rules[r].size());
    for (uint32_t a = 0; a < g.rules[r].size(); ++a) {
      int64_t nn = 0, pn = 0;
      for (const auto& e : g.rules[r][a]) {
        if (e.kind == GrammarElem::kEnd) break;
        if (e.kind == GrammarElem::kChars) {
          nn = std::numeric_limits<int64_t>::max() / 2;  // a terminal: never nullable
          if (!e.negate && e.ranges.empty()) pn = std::numeric_limits<int64_t>::max() / 2;  // matches nothing
        } else {
          ++nn, ++pn;
          users[e.rule].push_back({r, a});
        }
      }
      null_need[r][a] = nn;
      prod_need[r][a] = pn;
      if (nn == 0) mark_null(r);
      if (pn == 0) mark_prod(r);
    }
  }
  while (!null_work.empty()) {
    const uint32_t s = null_work.back();
    null_work.pop_back();
    for (const AltRef& u : users[s])
      if (--null_need[u.rule][u.alt] == 0) mark_null(u.rule);
  }
  while (!prod_work.empty()) {
    const uint32_t s = prod_work.back();
    prod_work.pop_back();
    for (const AltRef& u : users[s])
      if (--prod_need[u.rule][u.alt] == 0) mark_prod(u.rule);
  }
  if (!productive[g.root])
    return Error::invalid_argument("[grammar] the grammar cannot match any text (rule '{}' never completes)",
                                   g.names[g.root]);
  // left recursion: a cycle through leftmost (after nullable prefixes) rule references, found by a depth-first
  // search with its own stack (a chain of 100k rules must not overflow the thread's)
  std::vector<int> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::vector<uint32_t>> left(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : g.rules[r])
      for (const auto& e : alt) {
        if (e.kind != GrammarElem::kRule) break;
        left[r].push_back(e.rule);
        if (!nullable[e.rule]) break;
      }
  std::vector<std::pair<uint32_t, size_t>> stack;  // (rule, next edge)
  for (uint32_t root = 0; root < n; ++root) {
    if (color[root] != 0) continue;
    stack.push_back({root, 0});
    color[root] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == left[r].size()) {
        color[r] = 2;
        stack.pop_back();
        continue;
      }
      const uint32_t s = left[r][i++];
      if (color[s] == 1)
        return Error::invalid_argument("[grammar] rule '{}' is left-recursive (it can start with itself)", g.names[s]);
      if (color[s] == 0) {
        color[s] = 1;
        stack.push_back({s, 0});
      }
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<const Grammar>> Grammar::parse(std::string_view gbnf, const std::string& root) {
  Parser p;
  p.src = gbnf;
  PIPIT_TRY(p.parse_all());
  for (size_t r = 0; r < p.g.rules.size(); ++r)
    if (!p.defined[r])
      return Error::invalid_argument("[grammar] rule '{}' is used but never defined", p.g.names[r]);
  auto it = p.ids.find(root);
  if (it == p.ids.end()) return Error::invalid_argument("[grammar] the grammar has no '{}' rule", root);
  p.g.root = it->second;
  PIPIT_TRY(validate(p.g));
  p.g.cache = std::make_shared<Grammar::MaskCache>();
  return std::make_shared<const Grammar>(std::move(p.g));
}

}  // namespace pipit
