// The stack-set matcher (grammar.h GrammarMatcher): which bytes a grammar accepts next, and the vocabulary mask.
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <unordered_map>

#include "runtime/grammar.h"
#include "runtime/grammar_mask_cache.h"

namespace pipit {

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
