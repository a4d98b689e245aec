// GBNF parsing, the stack-set matcher and vocabulary masking (see grammar.h).
#include "runtime/grammar.h"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <unordered_map>

#ifdef PIPIT_WITH_TOKENIZER
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#endif

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

struct Grammar::MaskCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const std::vector<uint8_t>>> masks;
};

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

// ---------------------------------------------------------------- token table

namespace {

// Whole UTF-8 characters (shortest form, no surrogates), none below 0x20, no '"' or '\\'; the last may be cut
// short (the start of a valid character), which a string also allows.
bool is_plain(const std::string& t) {
  if (t.empty()) return false;
  for (size_t i = 0; i < t.size();) {
    const unsigned char c = uint8_t(t[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == '"' || c == '\\') return false;
      ++i;
      continue;
    }
    const int n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0) return false;
    if (i + size_t(n) > t.size()) {  // a token ending inside a character: the start of some valid one
      if (c < 0xC2 || c > 0xF4) return false;
      for (size_t k = 1; i + k < t.size(); ++k) {
        const unsigned char cc = uint8_t(t[i + k]);
        if ((cc & 0xC0) != 0x80) return false;
        if (k == 1 && ((c == 0xE0 && cc < 0xA0) || (c == 0xED && cc > 0x9F) || (c == 0xF0 && cc < 0x90) ||
                       (c == 0xF4 && cc > 0x8F)))
          return false;
      }
      return true;
    }
    uint32_t cp = n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) {
      const unsigned char cc = uint8_t(t[i + size_t(k)]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3F);
    }
    const uint32_t min_cp = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += size_t(n);
  }
  return true;
}

}  // namespace

TokenTable::TokenTable(std::vector<std::string> bytes) : bytes_(std::move(bytes)) {
  std::vector<int32_t> all, other;
  plain_.assign(bytes_.size(), 0);
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (bytes_[i].empty()) continue;
    all.push_back(int32_t(i));
    plain_[i] = is_plain(bytes_[i]);
    if (!plain_[i]) other.push_back(int32_t(i));
  }
  build(bytes_, std::move(all), nodes_, tokens_);
  build(bytes_, std::move(other), other_nodes_, other_tokens_);
}

void TokenTable::build(const std::vector<std::string>& bytes_, std::vector<int32_t> order, std::vector<Node>& nodes_,
                       std::vector<int32_t>& tokens_) {
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  tokens_.reserve(order.size());
  nodes_.push_back(Node{});
  // Node k covers order[lo, hi), all sharing `depth` leading bytes; its children are allocated together.
  struct Work {
    uint32_t node;
    size_t lo, hi, depth;
  };
  std::vector<Work> stack = {{0, 0, order.size(), 0}};
  while (!stack.empty()) {
    Work w = stack.back();
    stack.pop_back();
    size_t i = w.lo;
    nodes_[w.node].first_token = uint32_t(tokens_.size());
    while (i < w.hi && bytes_[size_t(order[i])].size() == w.depth) tokens_.push_back(order[i++]);
    nodes_[w.node].n_tokens = uint32_t(tokens_.size()) - nodes_[w.node].first_token;
    const uint32_t first = uint32_t(nodes_.size());
    std::vector<Work> kids;
    while (i < w.hi) {
      const uint8_t b = uint8_t(bytes_[size_t(order[i])][w.depth]);
      size_t j = i;
      while (j < w.hi && uint8_t(bytes_[size_t(order[j])][w.depth]) == b) ++j;
      Node c;
      c.byte = b;
      kids.push_back({uint32_t(nodes_.size()), i, j, w.depth + 1});
      nodes_.push_back(c);
      i = j;
    }
    nodes_[w.node].first_child = first;
    nodes_[w.node].n_children = uint32_t(kids.size());
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(*it);
  }
}

std::shared_ptr<const TokenTable> TokenTable::get(const Tokenizer& tok) {
  static std::mutex mu;
  static std::unordered_map<const Tokenizer*, std::weak_ptr<const TokenTable>> cache;
  std::lock_guard<std::mutex> lk(mu);
  if (auto t = cache[&tok].lock()) return t;
  std::vector<std::string> bytes;
#ifdef PIPIT_WITH_TOKENIZER
  const int32_t n = tok.vocab_size();
  bytes.resize(size_t(n));
  const auto& bl = tok::byte_level_alphabet();
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_special(id)) continue;
    std::string text = tok.decode(std::span<const int32_t>(&id, 1), false);
    if (text.find("\xEF\xBF\xBD") == std::string::npos) {
      // A generated token is never the first of its sequence (the text stream is primed with the prompt), and a
      // decoder may treat the first one apart: SentencePiece's strips the leading space of "\u2581word". The text a
      // token adds after one of its own is what it adds in the middle of a sequence.
      const int32_t twice[2] = {id, id};
      const std::string two = tok.decode(std::span<const int32_t>(twice, 2), false);
      if (two.size() > text.size() && two.compare(0, text.size(), text) == 0) text = two.substr(text.size());
      bytes[size_t(id)] = std::move(text);
      continue;
    }
    // a piece of a UTF-8 sequence: its raw bytes from the vocabulary string (byte-level alphabet or <0xNN>)
    const std::string piece = tok.id_to_token(id);
    if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
      bytes[size_t(id)] = std::string(1, char(std::stoi(piece.substr(3, 2), nullptr, 16)));
      continue;
    }
    std::string raw;
    bool ok = true;
    for (size_t i = 0; i < piece.size() && ok;) {
      const unsigned char c = uint8_t(piece[i]);
      uint32_t cp;
      if (c < 0x80) cp = c, i += 1;
      else if ((c >> 5) == 6 && i + 1 < piece.size()) cp = uint32_t(c & 0x1F) << 6 | (uint8_t(piece[i + 1]) & 0x3F), i += 2;
      else ok = false, cp = 0;
      if (ok && (cp >= 512 || bl.byte_of[cp] < 0)) ok = false;
      if (ok) raw += char(bl.byte_of[cp]);
    }
    if (ok) bytes[size_t(id)] = std::move(raw);
  }
#endif
  auto t = std::make_shared<const TokenTable>(std::move(bytes));
  cache[&tok] = t;
  return t;
}

// ---------------------------------------------------------------- matching

namespace {

struct Node {
  const GrammarElem* pos;
  const Node* next;
};

// Nodes in blocks that never move; rewind() drops everything after a mark (the mask walk is depth-first).
class NodePool {
 public:
  const Node* make(const GrammarElem* pos, const Node* next) {
    if (used_ == blocks_.size() * kBlock) blocks_.push_back(std::make_unique<Node[]>(kBlock));
    Node* n = &blocks_[used_ / kBlock][used_ % kBlock];
    ++used_;
    n->pos = pos;
    n->next = next;
    return n;
  }
  size_t mark() const { return used_; }
  void rewind(size_t m) { used_ = m; }
  size_t size() const { return used_; }

 private:
  static constexpr size_t kBlock = 4096;
  std::vector<std::unique_ptr<Node[]>> blocks_;
  size_t used_ = 0;
};

// The smallest code point of a UTF-8 sequence of each length (shorter forms are invalid).
constexpr uint32_t kMinCp[5] = {0, 0, 0x80, 0x800, 0x10000};

struct State {
  std::vector<const Node*> stacks;  // each top is a kChars element
  bool can_end = false;             // some parse is complete
  uint8_t pending[4] = {0, 0, 0, 0};
  uint8_t n_pending = 0, need = 0;  // bytes of an unfinished UTF-8 sequence, and its full length
};

}  // namespace

struct GrammarMatcher::Impl {
  std::shared_ptr<const Grammar> g;
  NodePool pool;     // the live state's nodes
  State st;
  mutable NodePool scratch;  // mask() and allows()
  mutable std::vector<State> levels;
  bool overflow = false;

  void expand(NodePool& p, const Node* n, State& out, int depth, bool& ovf) const {
    if (depth > 2000) {  // grammars are checked for left recursion; this is nesting past any sane depth
      ovf = true;
      return;
    }
    if (!n) {
      out.can_end = true;
      return;
    }
    const GrammarElem* e = n->pos;
    if (e->kind == GrammarElem::kEnd) return expand(p, n->next, out, depth + 1, ovf);
    if (e->kind == GrammarElem::kChars) {
      // the same element with the same tail is the same parse
      for (const Node* s : out.stacks)
        if (s->pos == n->pos && s->next == n->next) return;
      if (out.stacks.size() >= kMaxStacks) {
        ovf = true;
        return;
      }
      out.stacks.push_back(n);
      return;
    }
    const Node* cont = (e + 1)->kind == GrammarElem::kEnd ? n->next : p.make(e + 1, n->next);
    for (const auto& alt : g->rules[e->rule]) {
      if (alt[0].kind == GrammarElem::kEnd) expand(p, cont, out, depth + 1, ovf);
      else expand(p, p.make(&alt[0], cont), out, depth + 1, ovf);
    }
  }

  // One code point: every stack whose top takes it moves on.
  bool advance_cp(NodePool& p, const State& in, uint32_t cp, State& out) const {
    out.stacks.clear();
    out.can_end = false;
    bool ovf = false;
    for (const Node* s : in.stacks) {
      if (!s->pos->matches(cp)) continue;
      const GrammarElem* nx = s->pos + 1;
      expand(p, nx->kind == GrammarElem::kEnd ? s->next : p.make(nx, s->next), out, 0, ovf);
    }
    return !ovf && (!out.stacks.empty() || out.can_end);
  }

  // One byte, with UTF-8 assembly.
  bool advance_byte(NodePool& p, const State& in, uint8_t b, State& out) const {
    if (in.n_pending == 0) {
      if (b < 0x80) {
        out.n_pending = out.need = 0;
        return advance_cp(p, in, b, out);
      }
      const int need = (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
      if (need == 0) return false;
      out.stacks = in.stacks;
      out.can_end = false;
      out.pending[0] = b;
      out.n_pending = 1;
      out.need = uint8_t(need);
      return partial_ok(out);
    }
    if ((b & 0xC0) != 0x80) return false;
    if (in.n_pending + 1 == in.need) {
      uint32_t cp = in.need == 2 ? (in.pending[0] & 0x1F) : in.need == 3 ? (in.pending[0] & 0x0F) : (in.pending[0] & 0x07);
      for (int i = 1; i < in.n_pending; ++i) cp = cp << 6 | (in.pending[i] & 0x3F);
      cp = cp << 6 | (b & 0x3F);
      if (cp < kMinCp[in.need] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
      out.n_pending = out.need = 0;
      return advance_cp(p, in, cp, out);
    }
    out.stacks = in.stacks;
    out.can_end = false;
    std::copy(in.pending, in.pending + 4, out.pending);
    out.pending[in.n_pending] = b;
    out.n_pending = uint8_t(in.n_pending + 1);
    out.need = in.need;
    return partial_ok(out);
  }

  // Some stack takes a code point that starts with the pending bytes.
  static bool partial_ok(const State& s) {
    uint32_t lo = s.need == 2 ? (s.pending[0] & 0x1F) : s.need == 3 ? (s.pending[0] & 0x0F) : (s.pending[0] & 0x07);
    for (int i = 1; i < s.n_pending; ++i) lo = lo << 6 | (s.pending[i] & 0x3F);
    const int rest = s.need - s.n_pending;
    lo <<= 6 * rest;
    uint32_t hi = lo | ((1u << (6 * rest)) - 1);
    // the shortest form only: E0 80.. (an overlong encoding) is no code point at all
    lo = std::max(lo, kMinCp[s.need]);
    hi = std::min(hi, uint32_t(0x10FFFF));
    if (lo > hi) return false;
    // surrogates (D800..DFFF) are no code points either: look at the range around them
    for (const Node* n : s.stacks) {
      if (lo < 0xD800 && n->pos->matches_any(lo, std::min(hi, uint32_t(0xD7FF)))) return true;
      if (hi > 0xDFFF && n->pos->matches_any(std::max(lo, uint32_t(0xE000)), hi)) return true;
    }
    return false;
  }

  bool run(NodePool& p, const State& start, std::string_view bytes, State& out) const {
    if (bytes.empty()) {
      out = start;
      return true;
    }
    State a = start, b;
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (!advance_byte(p, a, uint8_t(bytes[i]), b)) return false;
      std::swap(a, b);
    }
    out = std::move(a);
    return true;
  }

  // Keeps the pool from growing over a long answer: copy the live stacks into a fresh pool (shared tails stay
  // shared) once the pool is large.
  void compact() {
    if (pool.size() < (size_t(1) << 20)) return;
    NodePool fresh;
    std::unordered_map<const Node*, const Node*> map;
    auto copy = [&](auto&& self, const Node* n) -> const Node* {
      if (!n) return nullptr;
      auto it = map.find(n);
      if (it != map.end()) return it->second;
      const Node* c = fresh.make(n->pos, self(self, n->next));
      map[n] = c;
      return c;
    };
    for (auto& s : st.stacks) s = copy(copy, s);
    pool = std::move(fresh);
  }
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g) : impl_(std::make_unique<Impl>()) {
  impl_->g = std::move(g);
  bool ovf = false;
  const Grammar& gr = *impl_->g;
  for (const auto& alt : gr.rules[gr.root]) {
    if (alt[0].kind == GrammarElem::kEnd) impl_->st.can_end = true;
    else impl_->expand(impl_->pool, impl_->pool.make(&alt[0], nullptr), impl_->st, 0, ovf);
  }
  impl_->overflow = ovf;
}

GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

bool GrammarMatcher::accept(std::string_view bytes) {
  State out;
  if (!impl_->run(impl_->pool, impl_->st, bytes, out)) return false;
  impl_->st = std::move(out);
  impl_->compact();
  return true;
}

bool GrammarMatcher::allows(std::string_view bytes) const {
  const size_t m = impl_->scratch.mark();
  State out;
  const bool ok = impl_->run(impl_->scratch, impl_->st, bytes, out);
  impl_->scratch.rewind(m);
  return ok;
}

bool GrammarMatcher::can_end() const { return impl_->st.can_end && impl_->st.n_pending == 0; }
bool GrammarMatcher::finished() const { return impl_->st.stacks.empty() && impl_->st.n_pending == 0; }

namespace {

// A parser state's structure: the pending UTF-8 bytes and each stack's elements top to bottom, stacks sorted. Two
// states with the same key allow the same tokens.
std::string state_key(const State& st) {
  std::vector<std::string> parts;
  for (const Node* s : st.stacks) {
    std::string one;
    for (const Node* n = s; n; n = n->next) one.append(reinterpret_cast<const char*>(&n->pos), sizeof(n->pos));
    parts.push_back(std::move(one));
  }
  std::sort(parts.begin(), parts.end());
  std::string key(reinterpret_cast<const char*>(st.pending), st.n_pending);
  key += char(st.need);
  for (auto& p : parts) key += std::to_string(p.size()) + ":" + p;
  return key;
}

}  // namespace

void GrammarMatcher::mask(const TokenTable& table, std::vector<uint8_t>& allowed) const {
  const TokenTable* tp = &table;  // the cache key: the table and the state
  std::string key(reinterpret_cast<const char*>(&tp), sizeof(tp));
  key += state_key(impl_->st);
  Grammar::MaskCache* cache = impl_->g->cache.get();
  if (cache) {
    std::lock_guard<std::mutex> lk(cache->mu);
    auto it = cache->masks.find(key);
    if (it != cache->masks.end()) {
      allowed = *it->second;
      return;
    }
  }
  mask_uncached(table, allowed);
  if (cache) {
    std::lock_guard<std::mutex> lk(cache->mu);
    if (cache->masks.size() < Grammar::kMaxCached)
      cache->masks.emplace(std::move(key), std::make_shared<const std::vector<uint8_t>>(allowed));
  }
}

void GrammarMatcher::mask_uncached(const TokenTable& table, std::vector<uint8_t>& allowed) const {
  allowed.assign(table.size(), 0);
  // Inside a string: every stack's top takes every plain character or none (its class names only control
  // characters, '"' and '\\') and one such character brings the parse back to the same state. Then every plain
  // token is allowed without a walk, and only the other tokens are walked.
  const State& st = impl_->st;
  bool loop = st.n_pending == 0 && !st.stacks.empty();
  // (a stack whose top takes no plain character at all, such as the closing '"' or an escape's '\\', just ends
  // on one, the same for every plain character)
  for (const Node* n : st.stacks) {
    const GrammarElem* e = n->pos;
    if (!loop) break;
    for (auto& [lo, hi] : e->ranges)
      loop = loop && (hi <= 0x1F || (lo == hi && (lo == '"' || lo == '\\')));
  }
  if (loop) {
    const size_t m = impl_->scratch.mark();
    State after;
    loop = impl_->advance_cp(impl_->scratch, st, 'a', after) && state_key(after) == state_key(st);
    impl_->scratch.rewind(m);
  }
  if (loop) {
    const auto& plain = table.plain();
    for (size_t i = 0; i < plain.size(); ++i) allowed[i] = plain[i];
    walk(table.other_nodes(), table.other_tokens(), allowed);
  } else {
    walk(table.nodes(), table.tokens(), allowed);
  }
}

void GrammarMatcher::walk(const std::vector<TokenTable::Node>& nodes, const std::vector<int32_t>& toks,
                          std::vector<uint8_t>& allowed) const {
  auto& levels = impl_->levels;
  NodePool& p = impl_->scratch;
  p.rewind(0);
  if (levels.empty()) levels.resize(1);
  levels[0] = impl_->st;
  // depth-first over the trie; levels[d] is the state after the first d bytes of the current path
  struct Frame {
    uint32_t node;
    uint32_t next_child;
    size_t mark;
  };
  std::vector<Frame> stack = {{0, 0, p.mark()}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    const TokenTable::Node& n = nodes[f.node];
    if (f.next_child == n.n_children) {
      p.rewind(f.mark);
      stack.pop_back();
      continue;
    }
    const uint32_t ci = n.first_child + f.next_child++;
    const size_t d = stack.size();
    if (levels.size() <= d) levels.resize(d + 1);
    const size_t m = p.mark();
    if (!impl_->advance_byte(p, levels[d - 1], nodes[ci].byte, levels[d])) {
      p.rewind(m);
      continue;
    }
    const TokenTable::Node& c = nodes[ci];
    for (uint32_t k = 0; k < c.n_tokens; ++k) allowed[size_t(toks[c.first_token + k])] = 1;
    if (c.n_children) stack.push_back({ci, 0, m});
    else p.rewind(m);
  }
}

}  // namespace pipit
