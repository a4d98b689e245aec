// The vocabulary as grammar input (grammar.h TokenTable): a byte trie of the tokens (and a second one of the tokens
// that are not plain JSON-string text), built once per tokenizer and cached.
#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "runtime/grammar.h"

#ifdef PIPIT_WITH_TOKENIZER
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#endif

namespace pipit {

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

}  // namespace pipit
