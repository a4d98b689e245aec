// The activation arena: 64-byte alignment, growth when a pass overflows, per-layer rewind, and the reuse that keeps
// the decode and prefill loops free of allocations after the first pass (an overflow chunk given back by rewind is
// the spare of the next overflow; reset() turns a pass that overflowed into one chunk of its high water).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "core/storage.h"

namespace pipit {
namespace {

constexpr size_t kChunk = 1 << 16;

// One "pass" as a model makes it: a small persistent allocation, then `layers` layers that each need `layer_bytes`
// and rewind at their end. Returns the address of each layer's activation buffer.
std::vector<uint8_t*> pass(Arena& a, int layers, size_t layer_bytes) {
  std::vector<uint8_t*> out;
  a.alloc(1024, nullptr);
  for (int l = 0; l < layers; ++l) {
    ArenaScope scope(a);
    uint8_t* p = a.alloc(layer_bytes, nullptr);
    std::memset(p, l, layer_bytes);  // the pages are used, as activations would be
    out.push_back(p);
  }
  return out;
}

TEST(Arena, AlignsEveryAllocation) {
  Arena a(kChunk);
  for (size_t n : {size_t(1), size_t(3), size_t(64), size_t(65), size_t(1000), 3 * kChunk})
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.alloc(n, nullptr)) % kAlign, 0u) << n;
}

TEST(Arena, OverflowIsReusedLayerAfterLayer) {
  Arena a(kChunk);
  const auto layers = pass(a, 6, 4 * kChunk);  // every layer overflows the first chunk
  for (size_t l = 1; l < layers.size(); ++l) EXPECT_EQ(layers[l], layers[0]) << "layer " << l << " allocated again";
}

TEST(Arena, ResetKeepsOneChunkOfTheHighWater) {
  Arena a(kChunk);
  pass(a, 4, 4 * kChunk);
  a.reset();
  const size_t cap = a.capacity();
  EXPECT_GE(cap, a.high_water());
  for (int i = 0; i < 3; ++i) {
    const auto layers = pass(a, 4, 4 * kChunk);
    EXPECT_EQ(a.capacity(), cap) << "pass " << i << " grew the arena";
    for (auto* p : layers) EXPECT_EQ(p, layers[0]);
    a.reset();
    EXPECT_EQ(a.capacity(), cap);
  }
}

TEST(Arena, ChunkHeldByATensorIsNotReused) {
  Arena a(kChunk);
  std::shared_ptr<Storage> held;
  uint8_t* first = nullptr;
  {
    ArenaScope scope(a);
    first = a.alloc(4 * kChunk, &held);  // overflow chunk, still owned by `held` after the rewind
    std::memset(first, 0x5a, 4 * kChunk);
  }
  {
    ArenaScope scope(a);
    uint8_t* second = a.alloc(4 * kChunk, nullptr);
    EXPECT_NE(second, first);
    std::memset(second, 0x11, 4 * kChunk);
  }
  for (size_t i = 0; i < 4 * kChunk; i += 4096) ASSERT_EQ(first[i], 0x5a) << i;
}

}  // namespace
}  // namespace pipit
