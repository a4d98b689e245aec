// PromptCache: the KV of finished requests kept in RAM, so that the next request sharing a prefix with one of them
// (a chat client re-sending the whole conversation each turn, a shared system prompt) prefills only its suffix.
//
// An entry is a copy of one KV slot after n positions, keyed by one 64-bit value per position: the token id, or for
// an image row a hash of its feature row and M-RoPE positions (two images with the same placeholder tokens must not
// share KV). Lookup is a linear longest-common-prefix scan over the entries (there are few: each holds a whole
// conversation's KV, megabytes, and the budget bounds them); entries whose key is a prefix of a new one are dropped
// when it is stored, so a conversation keeps one entry, its latest turn. Least recently used entries go first when
// the entries' bytes exceed the budget.
//
// What a restore may reuse of an entry of n positions, for a request whose key shares m of them:
//  - full-context attention layers: rows [0, m) (a causal model's row p depends only on positions <= p);
//  - sliding-window rings: the entry copies the whole ring, which holds [n - rows, n); a continuation at m needs
//    the window before m, so m must be >= KvCache::min_rewind(n), else nothing is reused;
//  - recurrent layers (Qwen3.5's linear attention): a state summarises all its tokens and cannot be cut back, so an
//    entry keeps snapshots of the state (the end of the prompt and the end of what was evaluated) and a restore
//    goes back to the latest snapshot at or before m; every layer's rows are reused up to that point only.
// Thread-safe (one mutex): an Engine uses it from its thread, C API sessions of one model share one.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <vector>

#include "models/model.h"

namespace pipit {

struct MultimodalPrompt;

class PromptCache {
 public:
  explicit PromptCache(size_t budget_bytes) : budget_(budget_bytes) {}
  PromptCache(const PromptCache&) = delete;
  PromptCache& operator=(const PromptCache&) = delete;

  // Keys: text tokens as themselves; an image row (embd_row >= 0) as a hash of its features and positions with the
  // top bit set. `mm` may be null (text).
  static std::vector<uint64_t> make_key(std::span<const int32_t> tokens, const MultimodalPrompt* mm);

  // Stores rows [0, n) of `slot` (n = key.size(), the positions the slot holds) with the given recurrent-state
  // snapshots (each pos <= n; ignored for models without a state; one at n is needed to continue at n). An entry
  // larger than the whole budget is not stored.
  // `dev`: the device the KV rows live on (ModelInfo::device; null: host memory), read and written through it.
  void save(const KvCache& kv, int slot, std::span<const uint64_t> key, std::vector<StateSnapshot> states,
            Device* dev);
  // Copies the longest usable prefix of `key`, at most max_n positions, into `slot` (its recurrent state set to the
  // matching snapshot) when it is longer than min_n (what the slot would keep anyway; the slot is untouched
  // otherwise). Returns the positions restored: the caller evaluates key[result..] (0: nothing restored).
  int restore(KvCache& kv, int slot, std::span<const uint64_t> key, int max_n, int min_n, Device* dev);

  struct Stats {
    uint64_t lookups = 0, hits = 0, tokens_reused = 0, evictions = 0;
    size_t entries = 0, bytes = 0, budget = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::vector<uint64_t> key;
    std::vector<std::vector<uint8_t>> k, v;  // per layer: full layers rows [0, n), rings every row, recurrent none
    std::vector<StateSnapshot> states;
    size_t bytes = 0;
    // the cache's layout: KV dtype and per layer ring rows (> 0), full context (-1) or none (0); entries from a
    // cache of another layout (another session's n_batch or KV type) are skipped
    std::vector<int> layout;
  };
  // Positions of `e` usable for `key` (see the file comment), at most max_n; and the snapshot to restore (or null).
  int usable(const KvCache& kv, const Entry& e, std::span<const uint64_t> key, int max_n,
             const StateSnapshot** snap) const;
  void evict_to(size_t budget);  // under mu_
  static std::vector<int> layout_of(const KvCache& kv);

  size_t budget_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  Stats stats_;
};

}  // namespace pipit
