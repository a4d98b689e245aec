// Copying a slot's recurrent state into a snapshot whose buffer is reused. Speculative decoding snapshots the state
// before every verification pass (Qwen3.5-0.8B: ~20 MB); a fresh vector each time costs page faults and frees that
// took several times the copy itself (measured: snapshot + truncate were a third of a speculative step).
#pragma once

#include <algorithm>

#include "models/model.h"

namespace pipit {

// The same layout as KvCache::save_state (layers in order, each layer's state tensors in order); `spec`: the cache's.
inline void save_state_into(const KvCache& kv, [[maybe_unused]] const KvCacheSpec& spec, int slot,
                            StateSnapshot& into) {
  into.pos = kv.state_pos(slot);
  into.data.resize(kv.state_bytes_per_slot() / 4);
  kv.read_state(slot, into.data.data());  // from the device when the cache lives there
}

}  // namespace pipit
