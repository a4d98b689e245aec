// Packing q4_0 / q8_0 rows into 16-row panels and back: a byte permutation, so both directions are exact.
#include "core/panels.h"

#include <cstring>

namespace pipit {

namespace {

// Bytes of one row's quants in a block, and the interleave unit (4 bytes: one int32 lane of the dot product).
constexpr int64_t kLane = 4;
int64_t quant_bytes(DType plain) { return plain == DType::Q4_0 ? kQBlock / 2 : kQBlock; }
int64_t block_bytes(DType plain) { return plain == DType::Q4_0 ? int64_t(sizeof(BlockQ4_0)) : int64_t(sizeof(BlockQ8_0)); }

}  // namespace

void pack_panels(DType plain, const uint8_t* src, int64_t src_stride, int64_t N, int64_t K, uint8_t* dst) {
  const int64_t nb = K / kQBlock, qb = quant_bytes(plain), bb = block_bytes(plain);
  const int64_t pb = kPanelRows * bb;  // bytes of a panel block: 16 scales, then 16 rows of quants
  for (int64_t p = 0; p < N / kPanelRows; ++p) {
    uint8_t* panel = dst + p * nb * pb;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = panel + b * pb;
      for (int64_t r = 0; r < kPanelRows; ++r) {
        const uint8_t* blk = src + (p * kPanelRows + r) * src_stride + b * bb;  // f16 scale, then quants
        std::memcpy(out + 2 * r, blk, 2);
        for (int64_t c = 0; c < qb / kLane; ++c)  // group c of 4 quant bytes -> lane r of 64-byte chunk c
          std::memcpy(out + 2 * kPanelRows + c * kLane * kPanelRows + r * kLane, blk + 2 + c * kLane, kLane);
      }
    }
  }
}

void unpack_panel_rows(DType panel, const uint8_t* src, int64_t K, int64_t r0, int64_t r1, uint8_t* dst) {
  const DType plain = dtype_unpanel(panel);
  const int64_t nb = K / kQBlock, qb = quant_bytes(plain), bb = block_bytes(plain), pb = kPanelRows * bb;
  for (int64_t row = r0; row < r1; ++row) {
    const uint8_t* pan = src + (row / kPanelRows) * nb * pb;
    const int64_t r = row % kPanelRows;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = dst + (row - r0) * nb * bb + b * bb;
      std::memcpy(blk, pan + b * pb + 2 * r, 2);
      for (int64_t c = 0; c < qb / kLane; ++c)
        std::memcpy(blk + 2 + c * kLane, pan + b * pb + 2 * kPanelRows + c * kLane * kPanelRows + r * kLane, kLane);
    }
  }
}

}  // namespace pipit
