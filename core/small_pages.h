// Small pages at the start of a large heap buffer. HeapStorage::make backs buffers from 2 MiB up with huge pages,
// which the kernel faults in (and zeroes) 2 MiB at a time. For a buffer filled from its start a little at a time -
// the KV cache, one row per token - that made the first token fault in 2 MiB of every layer's K and V (112 MB for
// Qwen3-0.6B at 4096 positions) to write one row each. On 4 KiB pages, KV no token has reached costs nothing.
#pragma once

#include <cstddef>

#include "core/storage.h"

namespace pipit {

// Keeps the first `bytes` of s (rounded up to 2 MiB) on 4 KiB pages; the rest stays on huge pages. Call it before
// anything is written to s (the pages already there keep their size). No-op for buffers under HeapStorage's 1 MiB.
void small_pages_head(const HeapStorage& s, size_t bytes);

}  // namespace pipit
