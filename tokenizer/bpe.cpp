// BPE model: parsing vocab/merges and the merge loop. The loop is HF's: symbols in a linked list, candidate merges
// in a heap ordered by (rank, position), stale heap entries skipped when popped; words already seen in this
// encode call come from a cache. Reference: tokenizers/src/models/bpe/{model,word,serialization}.rs (v0.22).
#include "tokenizer/bpe.h"

#include <array>
#include <cstdio>
#include <queue>

#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace pipit::tok {

// ---- cache ----

const int32_t* BpeCache::find(std::string_view word, size_t* n) const {
  auto it = map_.find(word);
  if (it == map_.end()) return nullptr;
  *n = it->second.second;
  return pool_.data() + it->second.first;
}

void BpeCache::put(std::string_view word, const int32_t* ids, size_t n) {
  constexpr size_t kMaxWord = 256, kMaxEntries = 1 << 18;  // HF caches words shorter than 256 bytes too
  if (word.size() >= kMaxWord || map_.size() >= kMaxEntries) return;
  uint32_t off = static_cast<uint32_t>(pool_.size());
  pool_.insert(pool_.end(), ids, ids + n);
  map_.emplace(std::string(word), std::make_pair(off, static_cast<uint32_t>(n)));
}

// ---- vocab index ----

void TokenIndex::reserve(size_t n) {
  tokens_.reserve(n);
  ids_.reserve(n);
  size_t want = 16;
  while (want < n * 2) want <<= 1;
  if (want > slots_.size()) rehash(want);
}

void TokenIndex::rehash(size_t n_slots) {
  std::vector<uint64_t> old(n_slots, 0);
  old.swap(slots_);
  mask_ = n_slots - 1;
  for (uint64_t s : old) {
    if (!s) continue;
    size_t p = (s >> 32) & mask_;
    while (slots_[p]) p = (p + 1) & mask_;
    slots_[p] = s;
  }
}

void TokenIndex::set(std::string token, int32_t id) {
  if ((tokens_.size() + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
  const uint32_t h = hash(token);
  size_t p = h & mask_;
  for (; slots_[p]; p = (p + 1) & mask_) {
    if (uint32_t(slots_[p] >> 32) != h) continue;
    const size_t i = uint32_t(slots_[p]) - 1;
    if (tokens_[i] == token) {
      ids_[i] = id;
      return;
    }
  }
  slots_[p] = slot(h, tokens_.size());
  tokens_.push_back(std::move(token));
  ids_.push_back(id);
}

bool TokenIndex::adopt(std::vector<std::string>& tokens) {
  if (!tokens_.empty() || tokens.size() > size_t(INT32_MAX)) return false;
  size_t n_slots = 16;
  while (n_slots < tokens.size() * 2) n_slots <<= 1;
  std::vector<uint64_t> slots(n_slots, 0);
  const size_t mask = n_slots - 1;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t h = hash(tokens[i]);
    size_t p = h & mask;
    for (; slots[p]; p = (p + 1) & mask)
      if (uint32_t(slots[p] >> 32) == h && tokens[uint32_t(slots[p]) - 1] == tokens[i]) return false;
    slots[p] = slot(h, i);
  }
  slots_ = std::move(slots);
  mask_ = mask;
  tokens_ = std::move(tokens);
  tokens = {};
  ids_.resize(tokens_.size());
  for (size_t i = 0; i < ids_.size(); ++i) ids_[i] = int32_t(i);
  return true;
}

std::optional<int32_t> TokenIndex::find(std::string_view token, uint32_t h) const {
  if (slots_.empty()) return std::nullopt;
  for (size_t p = h & mask_; slots_[p]; p = (p + 1) & mask_) {
    if (uint32_t(slots_[p] >> 32) != h) continue;
    const size_t i = uint32_t(slots_[p]) - 1;
    if (tokens_[i] == token) return ids_[i];
  }
  return std::nullopt;
}

// ---- merge table ----

// A merge's pair (left id, right id) as the table's key.
static inline uint64_t merge_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

static inline uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

const Bpe::MergeSlot* Bpe::find_merge(int32_t a, int32_t b) const {
  if (merges_.empty()) return nullptr;
  const uint64_t key = merge_key(a, b);
  for (size_t i = mix64(key) & merges_mask_;; i = (i + 1) & merges_mask_) {
    const MergeSlot& s = merges_[i];
    if (s.key == key) return &s;
    if (s.key == kEmpty) return nullptr;
  }
}

void Bpe::size_merges(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  merges_.assign(cap, MergeSlot{kEmpty, 0, 0});
  merges_mask_ = cap - 1;
}

void Bpe::fetch_merge(int32_t a, int32_t b) const {
  const uint64_t key = merge_key(a, b);
  __builtin_prefetch(&merges_[mix64(key) & merges_mask_], 1);
}

void Bpe::insert_merge(int32_t a, int32_t b, uint32_t rank, int32_t new_id) {
  const uint64_t key = merge_key(a, b);
  for (size_t i = mix64(key) & merges_mask_;; i = (i + 1) & merges_mask_) {
    MergeSlot& s = merges_[i];
    if (s.key == key || s.key == kEmpty) {  // a repeated pair keeps the later rank, as HF's map collect does
      s = {key, rank, new_id};
      return;
    }
  }
}

// ---- parsing ----

Result<std::unique_ptr<Bpe>> Bpe::parse(const json& j, const std::string& where, BpeTables* tables) {
  JsonFields f(j, where + " (BPE)");
  std::unique_ptr<Bpe> m(new Bpe());
  PIPIT_ASSIGN_OR_RETURN(const json* vocab, f.required("vocab"));
  if (!vocab->is_object()) return f.error("field 'vocab' must be an object {token: id}");
  int32_t max_id = -1;
  auto add_token = [&](std::string token, const json& v) -> Status {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      return f.error(fmt("vocab entry '{}' has id {}, expected a non-negative integer", token, v.dump()));
    int32_t id = static_cast<int32_t>(v.get<int64_t>());
    m->vocab_.set(std::move(token), id);
    max_id = std::max(max_id, id);
    return Status::ok();
  };
  if (tables && tables->resolved) {
    PIPIT_ASSIGN_OR_RETURN(max_id, m->read_resolved_vocab(*tables->resolved, f));
  } else if (tables && tables->vocab_by_id) {
    std::vector<std::string>& tokens = tables->tokens_by_id;
    if (tokens.size() > size_t(INT32_MAX)) return f.error(fmt("{} tokens are too many", tokens.size()));
    max_id = int32_t(tokens.size()) - 1;
    if (!m->vocab_.adopt(tokens)) {  // a token repeats: each keeps its first id, as tokenizer.json's object would
      m->vocab_.reserve(tokens.size());
      for (size_t id = tokens.size(); id-- > 0;) m->vocab_.set(std::move(tokens[id]), int32_t(id));
    }
    tables->tokens_by_id = {};
  } else if (tables && tables->has_vocab) {
    m->vocab_.reserve(tables->vocab.size());
    for (auto& [token, v] : tables->vocab) PIPIT_TRY(add_token(std::move(token), v));
    tables->vocab = {};
  } else {
    m->vocab_.reserve(vocab->size());
    for (auto it = vocab->begin(); it != vocab->end(); ++it) PIPIT_TRY(add_token(it.key(), *it));
  }
  m->vocab_r_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (size_t i = 0; i < m->vocab_.size(); ++i) m->vocab_r_[m->vocab_.id(i)] = &m->vocab_.token(i);

  PIPIT_ASSIGN_OR_RETURN(auto unk, f.opt_str("unk_token"));
  if (unk) {
    m->unk_token_ = *unk;
    m->unk_id_ = m->token_to_id(*unk);
  }
  PIPIT_ASSIGN_OR_RETURN(auto prefix, f.opt_str("continuing_subword_prefix"));
  PIPIT_ASSIGN_OR_RETURN(auto suffix, f.opt_str("end_of_word_suffix"));
  m->prefix_ = prefix.value_or("");
  m->suffix_ = suffix.value_or("");
  PIPIT_ASSIGN_OR_RETURN(m->fuse_unk_, f.boolean("fuse_unk", false));
  PIPIT_ASSIGN_OR_RETURN(m->byte_fallback_, f.boolean("byte_fallback", false));
  PIPIT_ASSIGN_OR_RETURN(m->ignore_merges_, f.boolean("ignore_merges", false));
  if (const json* d = f.find("dropout")) {
    // Dropout randomizes merges (training only); inference runs without it.
    if (!d->is_number()) return f.error("field 'dropout' must be a number or null");
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto id = m->token_to_id(name);
    m->byte_ids_[b] = id ? *id : -1;
  }

  PIPIT_ASSIGN_OR_RETURN(const json* merges_json, f.array("merges"));
  if (tables && tables->resolved) {
    PIPIT_TRY(m->read_resolved_merges(*tables->resolved, f));
    PIPIT_TRY(f.finish());
    return m;
  }
  // The merges in order, a group at a time: each merge's pair is split out first (`get`), then the slots of the three
  // lookups of every merge of the group (left, right, merged token) are fetched before any is probed, and the merge
  // table's slots before any is written, so that their cache misses overlap; one at a time, the lookups were a third
  // of loading a 150k-merge vocabulary. Ranks count the merges kept (a "#version" line is not one); the first bad
  // merge is the error, as in a plain loop.
  // get(i, &a, &b): false for a line to skip; an error for a merge that is not a pair.
  auto resolve = [&](size_t n, auto get) -> Status {
    constexpr size_t kGroup = 16;
    struct Lookup {
      std::string_view a, b;
      std::string merged;
      uint32_t ha, hb, hm;
      int32_t ia, ib, inew;  // the ids found
      bool skip;
    };
    std::array<Lookup, kGroup> g;
    uint32_t rank = 0;
    for (size_t i0 = 0; i0 < n; i0 += kGroup) {
      size_t k = std::min(kGroup, n - i0);
      Status bad = Status::ok();  // merge i0 + k's, reported after the merges before it
      for (size_t j = 0; j < k; ++j) {
        Lookup& l = g[j];
        Result<bool> keep = get(i0 + j, &l.a, &l.b);
        if (keep.is_ok() && *keep && l.b.size() < m->prefix_.size())
          keep = f.error(fmt("merges[{}]: token '{}' lacks the subword prefix", i0 + j, l.b));
        if (!keep.is_ok()) {
          bad = keep.status();
          k = j;
          break;
        }
        l.skip = !*keep;
        if (l.skip) continue;
        l.merged.assign(l.a);
        l.merged.append(l.b.substr(m->prefix_.size()));
        l.ha = TokenIndex::hash(l.a), l.hb = TokenIndex::hash(l.b), l.hm = TokenIndex::hash(l.merged);
        m->vocab_.fetch(l.ha), m->vocab_.fetch(l.hb), m->vocab_.fetch(l.hm);
      }
      for (size_t j = 0; j < k; ++j) {
        const Lookup& l = g[j];
        if (l.skip) continue;
        const size_t i = i0 + j;
        auto ia = m->vocab_.find(l.a, l.ha), ib = m->vocab_.find(l.b, l.hb);
        if (!ia) return f.error(fmt("merges[{}]: token '{}' is not in the vocab", i, l.a));
        if (!ib) return f.error(fmt("merges[{}]: token '{}' is not in the vocab", i, l.b));
        auto inew = m->vocab_.find(l.merged, l.hm);
        if (!inew) return f.error(fmt("merges[{}]: merged token '{}' is not in the vocab", i, l.merged));
        g[j].ia = *ia, g[j].ib = *ib, g[j].inew = *inew;
        m->fetch_merge(*ia, *ib);
      }
      for (size_t j = 0; j < k; ++j)  // in order: a pair that repeats keeps its later rank
        if (!g[j].skip) m->insert_merge(g[j].ia, g[j].ib, rank++, g[j].inew);
      PIPIT_TRY(bad);
    }
    return Status::ok();
  };
  // the legacy "a b"
  auto split_text = [&](size_t i, const std::string& s, std::string_view* a, std::string_view* b) -> Result<bool> {
    if (s.rfind("#version", 0) == 0) return false;
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
      return f.error(fmt("merges[{}] is '{}', expected two tokens separated by one space", i, s));
    *a = std::string_view(s).substr(0, sp);
    *b = std::string_view(s).substr(sp + 1);
    return true;
  };
  if (tables && tables->merges_as_text) {
    const std::vector<std::string>& texts = tables->merge_texts;
    m->size_merges(texts.size());
    PIPIT_TRY(resolve(texts.size(), [&](size_t i, std::string_view* a, std::string_view* b) {
      return split_text(i, texts[i], a, b);
    }));
    tables->merge_texts = {};
  } else {
    std::vector<BpeMerge> from_tree;  // the merges as the tree has them, when they were not lifted out while parsing
    if (!(tables && tables->has_merges)) {
      from_tree.reserve(merges_json->size());
      for (const json& e : *merges_json) {
        if (e.is_string())
          from_tree.push_back({e.get<std::string>(), {}, BpeMerge::kString});
        else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string())
          from_tree.push_back({e[0].get<std::string>(), e[1].get<std::string>(), BpeMerge::kPair});
        else
          from_tree.push_back({{}, {}, BpeMerge::kOther});
      }
    }
    std::vector<BpeMerge>& merges = tables && tables->has_merges ? tables->merges : from_tree;
    m->size_merges(merges.size());
    PIPIT_TRY(resolve(merges.size(), [&](size_t i, std::string_view* a, std::string_view* b) -> Result<bool> {
      const BpeMerge& e = merges[i];
      if (e.form == BpeMerge::kString) return split_text(i, e.a, a, b);
      if (e.form != BpeMerge::kPair) return f.error(fmt("merges[{}] must be \"a b\" or [\"a\", \"b\"]", i));
      *a = e.a;
      *b = e.b;
      return true;
    }));
    if (tables) tables->merges = {};
  }
  PIPIT_TRY(f.finish());
  return m;
}

// ---- resolved tables (BpeResolved) ----

void Bpe::export_resolved(std::string& vocab, std::string& merges, std::string& strings) const {
  for (size_t i = 0; i < vocab_.size(); ++i) {
    append_le32(vocab, uint32_t(strings.size()));
    append_le32(vocab, uint32_t(vocab_.token(i).size()));
    append_le32(vocab, uint32_t(vocab_.id(i)));
    strings += vocab_.token(i);
  }
  for (const MergeSlot& s : merges_) {
    if (s.key == kEmpty) continue;
    append_le32(merges, uint32_t(s.key >> 32));
    append_le32(merges, uint32_t(s.key));
    append_le32(merges, s.rank);
    append_le32(merges, uint32_t(s.new_id));
  }
}

// Every record is checked as it is read (the bytes come from a file): a string inside `strings`, ids in range, each
// merge's three ids in the vocabulary, no pair twice.
Result<int32_t> Bpe::read_resolved_vocab(const BpeResolved& r, JsonFields& f) {
  vocab_.reserve(r.n_vocab);
  int32_t max_id = -1;
  // Ids are dense in every real vocabulary (up to Gemma's 262144); a damaged one far past the count would size the
  // id -> token table by it (2^31 ids: 16 GB).
  const uint32_t id_limit = std::max<uint32_t>(2 * r.n_vocab, 1u << 20);
  for (uint32_t i = 0; i < r.n_vocab; ++i) {
    const uint8_t* e = r.vocab + size_t(i) * BpeResolved::kVocabRecord;
    const uint32_t off = load_le32(e), len = load_le32(e + 4), id = load_le32(e + 8);
    if (off > r.strings.size() || len > r.strings.size() - off || id >= id_limit)
      return f.error(fmt("compiled vocab entry {} is out of range", i));
    vocab_.set(std::string(r.strings.substr(off, len)), int32_t(id));
    max_id = std::max(max_id, int32_t(id));
  }
  return max_id;
}

Status Bpe::read_resolved_merges(const BpeResolved& r, JsonFields& f) {
  size_merges(r.n_merges);
  auto known = [&](uint32_t id) { return id < vocab_r_.size() && vocab_r_[id]; };
  for (uint32_t i = 0; i < r.n_merges; ++i) {
    const uint8_t* e = r.merges + size_t(i) * BpeResolved::kMergeRecord;
    const uint32_t a = load_le32(e), b = load_le32(e + 4), rank = load_le32(e + 8), merged = load_le32(e + 12);
    if (!known(a) || !known(b) || !known(merged) || find_merge(int32_t(a), int32_t(b)))
      return f.error(fmt("compiled merge {} is out of range or repeated", i));
    insert_merge(int32_t(a), int32_t(b), rank, int32_t(merged));
  }
  return Status::ok();
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  return vocab_.find(token);
}

const std::string* Bpe::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_r_.size()) return nullptr;
  return vocab_r_[id];
}

// ---- tokenization ----

namespace {

struct Symbol {
  int32_t id;
  int32_t prev, next;
  bool alive;
};

struct Candidate {
  uint32_t rank;
  uint32_t pos;
  int32_t new_id;
  // std::priority_queue pops the largest: make the lowest rank, then the leftmost position, the largest.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

Status Bpe::merge_word(std::string_view w, std::vector<int32_t>& ids) const {
  std::vector<Symbol> sym;
  sym.reserve(w.size());
  auto add = [&](int32_t id) {
    int32_t n = static_cast<int32_t>(sym.size());
    if (n > 0) sym.back().next = n;
    sym.push_back({id, n - 1, -1, true});
  };
  int32_t pending_unk = -1;  // an unk id not yet added (fused with the following unknown chars)
  std::string piece;
  size_t i = 0;
  while (i < w.size()) {
    size_t start = i;
    utf8_next(w, i);
    std::string_view ch = w.substr(start, i - start);
    std::string_view s = ch;
    if ((start > 0 && !prefix_.empty()) || (i == w.size() && !suffix_.empty())) {
      piece.assign(start > 0 ? prefix_ : std::string());
      piece += ch;
      if (i == w.size()) piece += suffix_;
      s = piece;
    }
    if (std::optional<int32_t> id = vocab_.find(s)) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : s) all = all && byte_ids_[b] >= 0;
      if (all) {  // HF adds the bytes without flushing a pending unk first
        for (unsigned char b : s) add(byte_ids_[b]);
        continue;
      }
    }
    if (unk_token_) {
      if (!unk_id_) return Error::invalid_argument("[tokenizer] unk token '{}' is not in the vocab", *unk_token_);
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
    // No unk token: the character is dropped, as HF does.
  }
  if (pending_unk >= 0) add(pending_unk);

  std::priority_queue<Candidate> queue;
  for (size_t k = 0; k + 1 < sym.size(); ++k) {
    if (const MergeSlot* m = find_merge(sym[k].id, sym[k + 1].id))
      queue.push({m->rank, static_cast<uint32_t>(k), m->new_id});
  }
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& cur = sym[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = sym[cur.next];
    const MergeSlot* m = find_merge(cur.id, right.id);
    if (!m || m->new_id != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) sym[cur.next].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0) {
      if (const MergeSlot* pm = find_merge(sym[cur.prev].id, cur.id))
        queue.push({pm->rank, static_cast<uint32_t>(cur.prev), pm->new_id});
    }
    if (cur.next >= 0) {
      if (const MergeSlot* nm = find_merge(cur.id, sym[cur.next].id)) queue.push({nm->rank, top.pos, nm->new_id});
    }
  }
  for (const Symbol& s : sym)
    if (s.alive) ids.push_back(s.id);
  return Status::ok();
}

Status Bpe::tokenize(std::string_view word, std::vector<int32_t>& out, BpeCache* cache) const {
  if (word.empty()) return Status::ok();
  if (ignore_merges_) {
    if (std::optional<int32_t> id = vocab_.find(word)) {
      out.push_back(*id);
      return Status::ok();
    }
  }
  if (cache) {
    size_t n = 0;
    if (const int32_t* ids = cache->find(word, &n)) {
      out.insert(out.end(), ids, ids + n);
      return Status::ok();
    }
  }
  size_t before = out.size();
  PIPIT_TRY(merge_word(word, out));
  if (cache) cache->put(word, out.data() + before, out.size() - before);
  return Status::ok();
}

}  // namespace pipit::tok
