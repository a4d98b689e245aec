// Grammars over tokens: structured output. A grammar in GBNF (llama.cpp's notation: `name ::= alternatives`,
// "literals", [character classes], [^negated], ., ( groups ), * + ? {m,n}, # comments) is compiled once; a
// GrammarMatcher follows one answer through it and says which tokens may come next.
//
// How it runs: the matcher holds the set of parser stacks (pushdown automaton configurations, one per way the
// text so far can be parsed); a character advances each stack whose top is a matching character class. Stacks are
// linked lists sharing their tails, so advancing copies nothing. Grammars work on Unicode code points; a token
// that ends inside a UTF-8 sequence leaves its bytes pending, and such a token is allowed when some stack could
// take a code point that starts with them.
//
// Masking all tokens walks a byte trie of the vocabulary (TokenTable), advancing the stacks one byte per trie edge
// and skipping every subtree whose prefix no stack takes; the engine only needs it when the token the sampler drew
// does not fit (see Engine), which for a model that follows its instructions is rare.
//
// Limits: left-recursive rules and rules that can never finish are refused when parsing; a grammar so ambiguous
// that more than kMaxStacks parses are alive at once fails the match rather than growing without bound.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace pipit {

class Tokenizer;

struct GrammarElem {
  enum Kind : uint8_t { kEnd, kChars, kRule } kind = kEnd;
  bool negate = false;
  uint32_t rule = 0;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive code point ranges (kChars)
  bool matches(uint32_t cp) const;
  // Whether some code point in [lo, hi] matches (a partial UTF-8 sequence).
  bool matches_any(uint32_t lo, uint32_t hi) const;
};

class Grammar {
 public:
  // Errors name the line: "[grammar] line 3: expected '::='". `root`: the start rule.
  static Result<std::shared_ptr<const Grammar>> parse(std::string_view gbnf, const std::string& root = "root");

  // rules[r]: alternatives, each a sequence ending with a kEnd element.
  std::vector<std::vector<std::vector<GrammarElem>>> rules;
  std::vector<std::string> names;
  uint32_t root = 0;

  // Masks already computed, by parser state (the stacks' elements, which is all a mask depends on): inside a
  // JSON string every token leaves the state as it was, so one walk of the vocabulary serves the whole string,
  // and every other answer under this grammar. Shared by the matchers of this grammar, at most kMaxCached.
  static constexpr size_t kMaxCached = 64;
  struct MaskCache;
  std::shared_ptr<MaskCache> cache;
};

// The vocabulary as bytes, in a trie. Special tokens (and ids without text) are left out: grammar text never
// contains them; end of sequence is decided separately. Built once per tokenizer and cached.
class TokenTable {
 public:
  static std::shared_ptr<const TokenTable> get(const Tokenizer& tok);
  explicit TokenTable(std::vector<std::string> bytes);  // index = token id; "" = never allowed

  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  size_t size() const { return bytes_.size(); }

  struct Node {
    uint32_t first_child = 0, n_children = 0;  // into nodes_, sorted by byte
    uint32_t first_token = 0, n_tokens = 0;    // into tokens_: tokens whose bytes end here
    uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // "Plain" tokens: UTF-8 characters (the last may be cut short), none a control character, '"' or '\\' (what
  // fills a JSON string);
  // plain_[id] = 1. The second trie holds every other token: inside a string only those need a walk.
  const std::vector<uint8_t>& plain() const { return plain_; }
  const std::vector<Node>& other_nodes() const { return other_nodes_; }
  const std::vector<int32_t>& other_tokens() const { return other_tokens_; }

 private:
  static void build(const std::vector<std::string>& bytes, std::vector<int32_t> ids, std::vector<Node>& nodes,
                    std::vector<int32_t>& tokens);
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;  // nodes_[0]: the root
  std::vector<int32_t> tokens_;
  std::vector<uint8_t> plain_;
  std::vector<Node> other_nodes_;
  std::vector<int32_t> other_tokens_;
};

class GrammarMatcher {
 public:
  static constexpr size_t kMaxStacks = 512;

  explicit GrammarMatcher(std::shared_ptr<const Grammar> g);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // Advances over the bytes; false (state unchanged) when the grammar does not allow them.
  bool accept(std::string_view bytes);
  // Whether accept(bytes) would succeed; the state is unchanged.
  bool allows(std::string_view bytes) const;
  // The text so far is a complete sentence of the grammar (end of sequence allowed).
  bool can_end() const;
  // No more text is possible: only end of sequence.
  bool finished() const;

  // allowed[id] = 1 for every token of the table that may come next (0 otherwise); end of sequence not included.
  void mask(const TokenTable& table, std::vector<uint8_t>& allowed) const;
  void mask_uncached(const TokenTable& table, std::vector<uint8_t>& allowed) const;  // the walk, always

 private:
  void walk(const std::vector<TokenTable::Node>& nodes, const std::vector<int32_t>& toks,
            std::vector<uint8_t>& allowed) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipit
