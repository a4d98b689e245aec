// Added-token registration and matching (see added_tokens.h).
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace pipit::tok {

// ---- trie ----

void TokenTrie::build(const std::vector<std::string>& patterns, const std::vector<int32_t>& ids) {
  // Insert in sorted order: a node's children are then created in increasing byte order, and an existing child
  // for the next byte can only be the node's last one.
  std::vector<size_t> order;
  for (size_t p = 0; p < patterns.size(); ++p)
    if (!patterns[p].empty()) order.push_back(p);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return patterns[x] < patterns[y]; });
  std::vector<std::vector<Edge>> children(1);
  std::vector<int32_t> term(1, -1);
  for (size_t p : order) {
    int32_t n = 0;
    for (unsigned char b : patterns[p]) {
      std::vector<Edge>& kids = children[n];
      if (!kids.empty() && kids.back().byte == b) {
        n = kids.back().child;
        continue;
      }
      int32_t child = static_cast<int32_t>(children.size());
      kids.push_back({b, child});
      children.emplace_back();
      term.push_back(-1);
      n = child;
    }
    if (term[n] < 0) term[n] = ids[p];  // the first pattern with this content wins, as in the Aho-Corasick build
    ++n_patterns_;
  }
  nodes_.assign(children.size(), Node{});
  edges_.clear();
  for (size_t n = 0; n < children.size(); ++n) {
    nodes_[n].edge_begin = static_cast<uint32_t>(edges_.size());
    edges_.insert(edges_.end(), children[n].begin(), children[n].end());
    nodes_[n].edge_end = static_cast<uint32_t>(edges_.size());
    nodes_[n].id = term[n];
  }
  for (int b = 0; b < 256; ++b) root_child_[b] = -1;
  for (const Edge& e : children[0]) root_child_[e.byte] = e.child;
  for (int b = 0; b < 256; ++b) first_byte_[b] = root_child_[b] >= 0;
}

void TokenTrie::find_all(std::string_view text, std::vector<Segment>& out) const {
  if (n_patterns_ == 0) return;
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char b0 = static_cast<unsigned char>(text[i]);
    if (!first_byte_[b0]) { ++i; continue; }
    int32_t node = root_child_[b0];
    size_t best_end = 0;
    int32_t best_id = -1;
    size_t j = i + 1;
    while (true) {
      if (nodes_[node].id >= 0) { best_end = j; best_id = nodes_[node].id; }
      if (j >= n) break;
      unsigned char b = static_cast<unsigned char>(text[j]);
      const Node& nd = nodes_[node];
      int32_t next = -1;
      for (uint32_t e = nd.edge_begin; e < nd.edge_end; ++e) {
        if (edges_[e].byte == b) { next = edges_[e].child; break; }
        if (edges_[e].byte > b) break;
      }
      if (next < 0) break;
      node = next;
      ++j;
    }
    if (best_id >= 0) {
      out.push_back({i, best_end, best_id});
      i = best_end;
    } else {
      ++i;
    }
  }
}

// ---- vocabulary ----

Status AddedVocabulary::build(const std::vector<AddedToken>& tokens, const Bpe& model, const Normalizer* normalizer) {
  std::vector<const AddedToken*> specials, normals;
  for (const AddedToken& t : tokens) {
    if (t.special && !t.content.empty() && special_set_.insert(t.content).second) specials.push_back(&t);
  }
  std::unordered_map<std::string, std::vector<const AddedToken*>> existing;  // HF compares every field
  int32_t next_id = static_cast<int32_t>(model.vocab_len());
  for (const AddedToken& t : tokens) {
    if (t.content.empty()) continue;
    bool seen = false;
    auto& same_content = existing[t.content];
    for (const AddedToken* e : same_content) seen = seen || *e == t;
    if (seen) continue;
    int32_t id;
    if (auto known = token_to_id(t.content)) id = *known;
    else if (auto in_model = model.token_to_id(t.content)) id = *in_model;
    else id = next_id++;
    by_content_[t.content] = id;
    by_id_[id] = t;
    if (!special_set_.count(t.content)) normals.push_back(&t);
    same_content.push_back(&t);
  }

  std::vector<std::string> raw_pat, norm_pat;
  std::vector<int32_t> raw_ids, norm_ids;
  auto add_pattern = [&](const AddedToken* t) -> Status {
    int32_t id = by_content_.at(t->content);
    if (!t->normalized) {
      raw_pat.push_back(t->content);
      raw_ids.push_back(id);
      return Status::ok();
    }
    std::string p = t->content;
    if (normalizer) PIPIT_TRY(normalizer->normalize(p));
    norm_pat.push_back(std::move(p));
    norm_ids.push_back(id);
    return Status::ok();
  };
  for (const AddedToken* t : specials) PIPIT_TRY(add_pattern(t));
  for (const AddedToken* t : normals) PIPIT_TRY(add_pattern(t));
  raw_trie_.build(raw_pat, raw_ids);
  normalized_trie_.build(norm_pat, norm_ids);
  return Status::ok();
}

namespace {

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  return is_word_char(utf8_prev(s, s.size(), nullptr));
}
bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return is_word_char(utf8_next(s, i));
}
// Start of the whitespace run that ends `s`.
size_t trailing_space_start(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    size_t b;
    if (!is_whitespace(utf8_prev(s, e, &b))) break;
    e = b;
  }
  return e;
}
// Length of the whitespace run that starts `s`.
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_whitespace(utf8_next(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedVocabulary::split(std::string_view text, bool normalized_pass, std::vector<Segment>& out) const {
  out.clear();
  const TokenTrie& trie = normalized_pass ? normalized_trie_ : raw_trie_;
  std::vector<Segment> matches;
  trie.find_all(text, matches);
  size_t offset = 0;
  for (Segment m : matches) {
    const AddedToken& t = by_id_.at(m.id);
    if (t.single_word) {
      bool start_space = m.start == 0 || !ends_with_word(text.substr(0, m.start));
      bool stop_space = m.end == text.size() || !starts_with_word(text.substr(m.end));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) m.start = std::max(trailing_space_start(text.substr(0, m.start)), offset);
    if (t.rstrip) m.end += leading_space_len(text.substr(m.end));
    if (offset < m.start) out.push_back({offset, m.start, -1});
    out.push_back(m);
    offset = m.end;
  }
  if (offset < text.size()) out.push_back({offset, text.size(), -1});
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

const std::string* AddedVocabulary::id_to_token(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second.content;
}

int32_t AddedVocabulary::max_id() const {
  int32_t m = -1;
  for (auto& [id, t] : by_id_) m = std::max(m, id);
  return m;
}

Result<AddedToken> parse_added_token(const json& j, const std::string& where) {
  if (!j.is_object()) return Error::format("[tokenizer.json] {}: expected an object", where);
  JsonFields f(j, where);
  AddedToken t;
  PIPIT_ASSIGN_OR_RETURN(int64_t id, f.integer("id"));
  (void)id;  // HF re-derives ids (see AddedVocabulary::build)
  PIPIT_ASSIGN_OR_RETURN(t.content, f.str("content"));
  PIPIT_ASSIGN_OR_RETURN(t.special, f.boolean("special", false));
  PIPIT_ASSIGN_OR_RETURN(t.single_word, f.boolean("single_word", false));
  PIPIT_ASSIGN_OR_RETURN(t.lstrip, f.boolean("lstrip", false));
  PIPIT_ASSIGN_OR_RETURN(t.rstrip, f.boolean("rstrip", false));
  PIPIT_ASSIGN_OR_RETURN(t.normalized, f.boolean("normalized", !t.special));
  PIPIT_TRY(f.finish());
  return t;
}

}  // namespace pipit::tok

