// PromptCache (see prompt_cache.h).
#include "runtime/prompt_cache.h"

#include <algorithm>
#include <cstring>

#include "backends/device.h"
#include "runtime/multimodal.h"

namespace pipit {

namespace {

constexpr uint64_t kImageBit = uint64_t(1) << 63;

// The first `nb` bytes of a slot's K or V rows, on the host or through the device that holds them (on a device the
// rows' host address is a reserved range with nothing behind it).
void copy_out(Device* dev, const Tensor& rows, void* dst, size_t nb) {
  if (dev) dev->read(rows, dst, nb);
  else std::memcpy(dst, rows.data(), nb);
}
void copy_in(Device* dev, const Tensor& rows, const void* src, size_t nb) {
  if (dev) dev->write(rows, src, nb);
  else std::memcpy(rows.data(), src, nb);
}

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

bool full_layer(const KvCache& kv, int l) { return kv.n_rows(l) > 0 && !kv.is_ring(l); }

size_t row_bytes(const KvCache& kv, int l) {
  const Tensor t = kv.k(l, 0);
  return t.nbytes() / size_t(t.dim(0));
}

}  // namespace

std::vector<uint64_t> PromptCache::make_key(std::span<const int32_t> tokens, const MultimodalPrompt* mm) {
  std::vector<uint64_t> key(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) key[i] = uint64_t(uint32_t(tokens[i]));
  if (!mm || mm->embd_row.empty()) return key;
  const int64_t width = mm->embd.defined() ? mm->embd.dim(1) : 0;
  const size_t n = tokens.size();
  for (size_t i = 0; i < n && i < mm->embd_row.size(); ++i) {
    const int32_t r = mm->embd_row[i];
    if (r < 0) continue;
    // the row's features, its DeepStack rows (the same bytes, in the same order, as when they were one wide row),
    // and its positions
    uint64_t h = fnv1a(mm->embd.ptr<float>() + int64_t(r) * width, size_t(width) * 4, 0xcbf29ce484222325ull);
    for (const Tensor& d : mm->deepstack) h = fnv1a(d.ptr<float>() + int64_t(r) * width, size_t(width) * 4, h);
    if (mm->mrope_pos.size() == PosStreams::kStreams * n)
      for (size_t s = 0; s < PosStreams::kStreams; ++s) h = fnv1a(&mm->mrope_pos[s * n + i], 4, h);
    key[i] = h | kImageBit;
  }
  return key;
}

std::vector<int> PromptCache::layout_of(const KvCache& kv) {
  std::vector<int> v = {int(kv.dtype())};
  for (int l = 0; l < kv.n_layer(); ++l) v.push_back(kv.n_rows(l) == 0 ? 0 : full_layer(kv, l) ? -1 : kv.n_rows(l));
  return v;
}

int PromptCache::usable(const KvCache& kv, const Entry& e, std::span<const uint64_t> key, int max_n,
                        const StateSnapshot** snap) const {
  *snap = nullptr;
  if (e.layout != layout_of(kv)) return 0;
  const size_t lim = std::min({e.key.size(), key.size(), size_t(std::max(0, max_n))});
  size_t m = 0;
  while (m < lim && e.key[m] == key[m]) ++m;
  if (kv.has_state()) {  // back to the latest snapshot at or before m
    for (const auto& s : e.states)
      if (size_t(s.pos) <= m && (!*snap || s.pos > (*snap)->pos)) *snap = &s;
    m = *snap ? size_t((*snap)->pos) : 0;
  }
  if (m == 0 || int(m) < kv.min_rewind(int(e.key.size()))) return 0;  // a ring no longer holds m's window
  return int(m);
}

void PromptCache::save(const KvCache& kv, int slot, std::span<const uint64_t> key, std::vector<StateSnapshot> states,
                       Device* dev) {
  if (key.empty() || budget_ == 0) return;
  const int n = int(key.size());
  if (n > kv.n_ctx()) return;
  Entry e;
  e.key.assign(key.begin(), key.end());
  e.layout = layout_of(kv);
  std::erase_if(states, [&](const StateSnapshot& s) { return s.pos <= 0 || s.pos > n; });
  if (kv.has_state()) {
    if (states.empty()) return;  // nothing to continue from
    e.states = std::move(states);
  }
  // size first: an entry over the budget is not copied at all
  size_t bytes = e.key.size() * 8;
  for (const auto& s : e.states) bytes += s.data.size() * 4;
  const int L = kv.n_layer();
  for (int l = 0; l < L; ++l)
    if (kv.n_rows(l) > 0) bytes += 2 * row_bytes(kv, l) * size_t(full_layer(kv, l) ? n : kv.n_rows(l));
  if (bytes > budget_) return;
  e.bytes = bytes;
  e.k.resize(size_t(L));
  e.v.resize(size_t(L));
  for (int l = 0; l < L; ++l) {
    if (kv.n_rows(l) == 0) continue;
    const size_t nb = row_bytes(kv, l) * size_t(full_layer(kv, l) ? n : kv.n_rows(l));
    e.k[size_t(l)].resize(nb);
    e.v[size_t(l)].resize(nb);
    copy_out(dev, kv.k(l, slot), e.k[size_t(l)].data(), nb);
    copy_out(dev, kv.v(l, slot), e.v[size_t(l)].data(), nb);
  }
  std::lock_guard<std::mutex> lk(mu_);
  // an entry whose key is a prefix of this one (the same conversation's earlier turn) has nothing more to offer,
  // except for a recurrent model, whose earlier snapshots this entry may not have
  lru_.remove_if([&](const Entry& old) {
    return !kv.has_state() && old.layout == e.layout && old.key.size() <= e.key.size() &&
           std::equal(old.key.begin(), old.key.end(), e.key.begin()) && (stats_.bytes -= old.bytes, true);
  });
  stats_.bytes += e.bytes;
  lru_.push_front(std::move(e));
  evict_to(budget_);
}

int PromptCache::restore(KvCache& kv, int slot, std::span<const uint64_t> key, int max_n, int min_n, Device* dev) {
  std::lock_guard<std::mutex> lk(mu_);
  stats_.lookups++;
  auto best = lru_.end();
  int best_m = 0;
  const StateSnapshot* best_snap = nullptr;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const StateSnapshot* snap = nullptr;
    const int m = usable(kv, *it, key, max_n, &snap);
    if (m > best_m) {  // ties: the most recently used (earlier in the list)
      best = it;
      best_m = m;
      best_snap = snap;
    }
  }
  if (best == lru_.end() || best_m <= min_n) return 0;
  const Entry& e = *best;
  for (int l = 0; l < kv.n_layer(); ++l) {
    if (kv.n_rows(l) == 0) continue;
    // full layers: the m rows wanted; rings: the whole ring (position p at row p % rows, as when it was saved)
    const size_t nb = full_layer(kv, l) ? row_bytes(kv, l) * size_t(best_m) : e.k[size_t(l)].size();
    copy_in(dev, kv.k(l, slot), e.k[size_t(l)].data(), nb);
    copy_in(dev, kv.v(l, slot), e.v[size_t(l)].data(), nb);
  }
  if (kv.has_state()) kv.restore_state(slot, *best_snap);
  lru_.splice(lru_.begin(), lru_, best);
  stats_.hits++;
  stats_.tokens_reused += uint64_t(best_m);
  return best_m;
}

void PromptCache::evict_to(size_t budget) {
  while (stats_.bytes > budget && !lru_.empty()) {
    stats_.bytes -= lru_.back().bytes;
    lru_.pop_back();
    stats_.evictions++;
  }
}

PromptCache::Stats PromptCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s = stats_;
  s.entries = lru_.size();
  s.budget = budget_;
  return s;
}

}  // namespace pipit
