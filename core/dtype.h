// Element types and the quantized block structs: the one place a format's bytes are defined.
// Quantized types store blocks of 32 weights along the input (K) dimension; the byte layout of q8_0 and q4_0
// equals GGUF's Q8_0 / Q4_0 so llama.cpp files import without requantizing.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace pipit {

enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I8 = 4, Q8_0 = 5, Q4_0 = 6, kCount };

// f16 / bf16 scalars are stored as their raw bits; arithmetic always goes through f32.
using f16_t = uint16_t;
using bf16_t = uint16_t;

constexpr int kQBlock = 32;  // weights per quantization block

// q8_0: int8 weights, w = d * qs[i].
struct BlockQ8_0 {
  f16_t d;
  int8_t qs[kQBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

// q4_0: 4-bit weights, w = d * (q - 8); byte j holds weight j in its low nibble and weight j + 16 in its high nibble.
struct BlockQ4_0 {
  f16_t d;
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

struct DTypeInfo {
  std::string_view name;
  int block_elems;   // elements per block (1 for plain types)
  int block_bytes;   // bytes per block
  bool quantized;
};

constexpr DTypeInfo kDTypeInfo[] = {
    {"f32", 1, 4, false}, {"f16", 1, 2, false}, {"bf16", 1, 2, false}, {"i32", 1, 4, false},
    {"i8", 1, 1, false},  {"q8_0", kQBlock, sizeof(BlockQ8_0), true}, {"q4_0", kQBlock, sizeof(BlockQ4_0), true},
};
static_assert(sizeof(kDTypeInfo) / sizeof(kDTypeInfo[0]) == size_t(DType::kCount));

constexpr const DTypeInfo& dtype_info(DType t) { return kDTypeInfo[int(t)]; }
constexpr std::string_view dtype_name(DType t) { return dtype_info(t).name; }
constexpr bool dtype_is_quantized(DType t) { return dtype_info(t).quantized; }
// Bytes of a row of n elements (n must be a multiple of the block size for quantized types).
constexpr int64_t dtype_row_bytes(DType t, int64_t n) {
  return n / dtype_info(t).block_elems * dtype_info(t).block_bytes;
}
bool dtype_from_name(std::string_view name, DType* out);

// ---- scalar conversions (round to nearest even, as PyTorch and numpy do) ----
inline float bf16_to_f32(bf16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline bf16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t((u >> 16) | 0x40);  // NaN stays NaN (quiet)
  u += 0x7fffu + ((u >> 16) & 1);
  return bf16_t(u >> 16);
}
float f16_to_f32(f16_t h);
f16_t f32_to_f16(float f);

}  // namespace pipit
