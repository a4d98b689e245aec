// Element types and the quantized block structs: the one place a format's bytes are defined.
// Quantized types store blocks of 32 weights along the input (K) dimension; the byte layout of q8_0 and q4_0
// equals GGUF's Q8_0 / Q4_0 so llama.cpp files import without requantizing.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace pipit {

enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I8 = 4, Q8_0 = 5, Q4_0 = 6, Q8_0X16 = 7, Q4_0X16 = 8, kCount };

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

// Row-interleaved panels of the same blocks, for the integer GEMV/GEMM kernels (backends/cpu/x86, arm/dotprod):
// 16 consecutive weight rows form a panel, stored block column by block column. Each panel block holds the 16 rows'
// scales, then their quants interleaved 4 bytes at a time, so one 64-byte load holds 4 consecutive quant bytes of
// each of 16 rows: the layout of a 16-lane int32 dot product (vpdpbusd, sdot) whose lane r accumulates row r.
// The bytes are a permutation of the plain blocks' bytes (values unchanged); a tensor [N, K] needs N % 16 == 0.
// q4_0x16: qs[64 c + 4 r + i] = row r's q4_0 qs[4 c + i] (c < 4): low nibbles weights 4c..4c+3, high 16+4c..
struct BlockQ4_0x16 {
  f16_t d[16];
  uint8_t qs[16 * kQBlock / 2];
};
static_assert(sizeof(BlockQ4_0x16) == 16 * sizeof(BlockQ4_0));
// q8_0x16: qs[64 g + 4 r + i] = row r's q8_0 qs[4 g + i] (g < 8).
struct BlockQ8_0x16 {
  f16_t d[16];
  int8_t qs[16 * kQBlock];
};
static_assert(sizeof(BlockQ8_0x16) == 16 * sizeof(BlockQ8_0));
constexpr int kPanelRows = 16;

struct DTypeInfo {
  std::string_view name;
  int block_elems;   // elements per block (1 for plain types)
  int block_bytes;   // bytes per block
  bool quantized;
};

constexpr DTypeInfo kDTypeInfo[] = {
    {"f32", 1, 4, false}, {"f16", 1, 2, false}, {"bf16", 1, 2, false}, {"i32", 1, 4, false},
    {"i8", 1, 1, false},  {"q8_0", kQBlock, sizeof(BlockQ8_0), true}, {"q4_0", kQBlock, sizeof(BlockQ4_0), true},
    // per row on average: a panel of 16 rows is 16 rows of plain blocks
    {"q8_0x16", kQBlock, sizeof(BlockQ8_0), true}, {"q4_0x16", kQBlock, sizeof(BlockQ4_0), true},
};
static_assert(sizeof(kDTypeInfo) / sizeof(kDTypeInfo[0]) == size_t(DType::kCount));

constexpr const DTypeInfo& dtype_info(DType t) { return kDTypeInfo[int(t)]; }
constexpr std::string_view dtype_name(DType t) { return dtype_info(t).name; }
constexpr bool dtype_is_quantized(DType t) { return dtype_info(t).quantized; }
// Panel dtypes: rows are interleaved in groups of kPanelRows, so a row has no address of its own.
constexpr bool dtype_is_panel(DType t) { return t == DType::Q8_0X16 || t == DType::Q4_0X16; }
constexpr DType dtype_panel_of(DType t) { return t == DType::Q8_0 ? DType::Q8_0X16 : t == DType::Q4_0 ? DType::Q4_0X16 : t; }
constexpr DType dtype_unpanel(DType t) { return t == DType::Q8_0X16 ? DType::Q8_0 : t == DType::Q4_0X16 ? DType::Q4_0 : t; }
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
