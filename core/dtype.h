// Element types and the quantized block structs: the one place a format's bytes are defined.
// Quantized types store blocks of 32 weights along the input (K) dimension; the byte layout of q8_0 and q4_0
// equals GGUF's Q8_0 / Q4_0 so llama.cpp files import without requantizing.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace pipit {

enum class DType : uint8_t {
  F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I8 = 4, Q8_0 = 5, Q4_0 = 6, Q8_0X16 = 7, Q4_0X16 = 8,
  // llama.cpp's other block formats, byte for byte as GGUF stores them (see the structs below)
  Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS,
  MXFP4,  // OCP microscaling FP4 (GPT-OSS experts), ggml's block_mxfp4
  Q4_KX16, Q5_KX16, Q6_KX16,  // K-quant panels (below), made by the loader
  // bf16 weights whose matmuls round x to bf16 too and take bf16 dot products (AVX512-BF16 vdpbf16ps): the bytes
  // of bf16, made by the loader from f16 / bf16 matrices under LoadOptions::precision fast, never stored in a file
  BF16DOT,
  MXFP4X16,  // mxfp4 panels (below), made by the loader where Kernels::pack_mxfp4
  Q2_KX16, Q3_KX16,  // q2_K / q3_K panels (below), made by the loader where Kernels::pack_kquant
  IQ4_XSX16,  // iq4_xs panels (below), likewise
  IQ4_NLX16,  // iq4_nl panels (below), likewise
  Q4_1X16, Q5_1X16,  // q4_1 / q5_1 panels (below), likewise
  Q5_0X16,  // q5_0 panels (below), likewise
  kCount
};

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

// ---- llama.cpp's other block formats (ggml-common.h), byte for byte, so GGUF tensors are used in place ----
// Values are listed as ggml's dequantization computes them, in f32, left to right.

// q4_1: w = d * q + m, q = nibble (low: weight j, high: weight j + 16).
struct BlockQ4_1 {
  f16_t d, m;
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);
// q5_0: w = d * (q - 16), q = nibble | bit j (weight j) or j + 16 (weight j + 16) of the little-endian u32 qh, as bit 4.
struct BlockQ5_0 {
  f16_t d;
  uint8_t qh[4];
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);
// q5_1: w = d * q + m with q as in q5_0.
struct BlockQ5_1 {
  f16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);
// iq4_nl: w = d * kIq4Values[nibble] (a fixed non-uniform 16-level grid), nibbles as in q4_0.
struct BlockIQ4_NL {
  f16_t d;
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// iq4_nlx16: 16 rows of iq4_nl in q4_0x16's layout (same byte sizes and permutation; only the nibble map differs:
// kIq4Values[q] instead of q - 8), so the q4_0x16 panel tiles run it with a nibble-map parameter.
struct BlockIQ4_NLx16 {
  f16_t d[16];
  uint8_t qs[16 * kQBlock / 2];
};
static_assert(sizeof(BlockIQ4_NLx16) == 16 * sizeof(BlockIQ4_NL));
// q4_1x16: 16 rows of q4_1 (w = d * q + m): the 16 rows' d, then their m, then the nibbles as q4_0x16's.
struct BlockQ4_1x16 {
  f16_t d[16], m[16];
  uint8_t qs[16 * kQBlock / 2];
};
static_assert(sizeof(BlockQ4_1x16) == 16 * sizeof(BlockQ4_1));
// q5_0x16 / q5_1x16: 16 rows of q5_0 / q5_1 with the low nibbles as q4_0x16's (qs, the same permutation) and the
// fifth bits beside them as one 64-bit mask per weight vector: bit j of qh[8 v .. 8 v + 7] (little-endian) is the
// fifth bit of byte j of vector v as the kernels unpack it (q4_vector_x_offset, backends/cpu/matmul_tiles.h: v = 2c
// the low nibbles of 64-byte chunk c, v = 2c + 1 its high nibbles; byte j belongs to row j / 4, weight
// q4_vector_x_offset(v) + j % 4). So q = nibble | bit << 4 (0..31) takes one masked byte add on AVX-512, and a row
// reads the file's 22 / 24 bytes per 32 weights, not the 34 / 36 of a byte per weight. d and m as q4_1x16.
struct BlockQ5_0x16 {
  f16_t d[16];
  uint8_t qh[8 * 8];
  uint8_t qs[16 * kQBlock / 2];
};
static_assert(sizeof(BlockQ5_0x16) == 16 * sizeof(BlockQ5_0));
struct BlockQ5_1x16 {
  f16_t d[16], m[16];
  uint8_t qh[8 * 8];
  uint8_t qs[16 * kQBlock / 2];
};
static_assert(sizeof(BlockQ5_1x16) == 16 * sizeof(BlockQ5_1));

// K-quants: super-blocks of 256 weights along K (a K-type row is a multiple of 256).
constexpr int kQK = 256;
// q2_K: 16 groups of 16; scales[g] = scale (low nibble) | min (high nibble); w = d*sc * q - dmin*m with q 2 bits:
// weight 128h + 32s + l (s < 4, l < 32) is bits 2s..2s+1 of qs[32h + l]; group g = weight / 16.
struct BlockQ2_K {
  uint8_t scales[kQK / 16];
  uint8_t qs[kQK / 4];
  f16_t d, dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);
// q3_K: 16 groups of 16 with 6-bit signed scales (sc - 32) packed in 12 bytes; w = d*(sc - 32) * (q - 4 * !hbit),
// q 2 bits placed as in q2_K, hbit = bit (weight / 32) of hmask[weight % 32].
struct BlockQ3_K {
  uint8_t hmask[kQK / 8];
  uint8_t qs[kQK / 4];
  uint8_t scales[12];
  f16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);
// The 2-bit quant of weight j (< 256) of a q2_K / q3_K block, and q3_K's signed value q - 4 * !hbit (-4..3).
inline int q2k_quant(const uint8_t* qs, int j) { return (qs[32 * (j / 128) + j % 32] >> (2 * ((j / 32) % 4))) & 3; }
// The 6-bit scale of 16-weight group i (< 16) of a q3_K block, 0..63 (the weight scale is d * (sc - 32)): low 4 bits
// from the nibbles of scales[0..8), high 2 bits from scales[8..12) (ggml unpacks the same through u32 words).
inline int q3k_scale(const BlockQ3_K& b, int i) {
  const int j = i % 4;
  const int lo = (b.scales[j + 4 * ((i / 4) % 2)] >> (4 * (i / 8))) & 0xF;
  return lo | (((b.scales[8 + j] >> (2 * (i / 4))) & 3) << 4);
}
inline int q3k_value(const BlockQ3_K& b, int j) {
  return q2k_quant(b.qs, j) - (((b.hmask[j % 32] >> (j / 32)) & 1) ? 0 : 4);
}
// q4_K: 8 groups of 32 with 6-bit scales and mins packed in 12 bytes (k4_scale_min); w = d*sc * q - dmin*m.
// Weights 64p + l (l < 32) are the low nibbles of qs[32p + l] (group 2p), weights 64p + 32 + l the high (2p + 1).
struct BlockQ4_K {
  f16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);
// q5_K: q4_K plus a fifth bit: bit 2p of qh[l] for weight 64p + l, bit 2p + 1 for 64p + 32 + l.
struct BlockQ5_K {
  f16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK / 8];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);
// q6_K: 16 groups of 16 with int8 scales; w = d*sc * (q - 32), q = 4 low bits from ql, 2 high bits from qh. Per half
// h (128 weights), l < 32: weight 128h + l: ql[64h + l] low, qh[32h + l] bits 0-1; + 32: ql[64h + 32 + l] low,
// bits 2-3; + 64: ql[64h + l] high, bits 4-5; + 96: ql[64h + 32 + l] high, bits 6-7.
struct BlockQ6_K {
  uint8_t ql[kQK / 2];
  uint8_t qh[kQK / 4];
  int8_t scales[kQK / 16];
  f16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);
// q8_K: llama.cpp's activation format for K-quant dot products (f32 scale, sums of each 16 quants); w = d * q.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK];
  int16_t bsums[kQK / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);
// iq4_xs: 8 groups of 32 with 6-bit scales (low 4 bits in scales_l nibbles, high 2 in scales_h);
// w = d*(ls - 32) * kIq4Values[nibble], nibbles of each group as in q4_0.
struct BlockIQ4_XS {
  f16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK / 64];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);
// 6-bit scale of group g (< 8) of an iq4_xs block, 0..63 (the weight scale is d * (ls - 32)).
inline int iq4_xs_scale(const BlockIQ4_XS& b, int g) {
  return ((b.scales_l[g / 2] >> (4 * (g % 2))) & 0xf) | (((b.scales_h >> (2 * g)) & 3) << 4);
}
// 6-bit scale and min of group j (< 8) of a q4_K / q5_K block (ggml's get_scale_min_k4).
inline void kquant_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// mxfp4 (OCP microscaling FP4, GPT-OSS experts): 32 E2M1 elements sharing one E8M0 exponent. The bytes are ggml's
// block_mxfp4 (GGUF type 39), so GGUF files import as they are: e is the E8M0 exponent, byte j holds element j in
// its low nibble and element j + 16 in its high nibble (q4_0's order; HF's *_blocks pack elements 2j / 2j + 1
// instead, and are reordered at import). A nibble is sign (bit 3) + E2M1 magnitude {0, .5, 1, 1.5, 2, 3, 4, 6}.
// Doubled, every E2M1 value is an integer in [-12, 12] (kMxfp4Int8), so w = kMxfp4Int8[nibble] * 2^(e - 128):
// integer kernels take the nibbles through a 16-entry int8 table and apply the exponent once per block.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQBlock / 2];
};
static_assert(sizeof(BlockMXFP4) == 17);
inline constexpr int8_t kMxfp4Int8[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// 2^(e - 128), exact for every e (e < 2 gives an f32 subnormal), as ggml's E8M0_TO_FP32_HALF.
inline float e8m0_half_to_f32(uint8_t e) {
  const uint32_t u = e < 2 ? (uint32_t(0x00200000) << e) : (uint32_t(e - 1) << 23);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// mxfp4x16: 16 rows of mxfp4 as q4_0x16 interleaves q4_0 (the loader makes them; never in a file): the 16 rows'
// exponents, then qs[64 c + 4 r + i] = row r's qs[4 c + i] (c < 4), low nibbles elements 4c..4c+3, high 16+4c...
// GPT-OSS's stacked experts [E, N, K] pack as E * N rows (N % 16 == 0, so no panel spans two experts).
struct BlockMXFP4x16 {
  uint8_t e[16];
  uint8_t qs[16 * kQBlock / 2];
};
static_assert(sizeof(BlockMXFP4x16) == 16 * sizeof(BlockMXFP4));

// K-quant panels (q4_kx16, q5_kx16, q6_kx16): 16 consecutive rows of q4_K / q5_K / q6_K, one super-block column at
// a time, laid out for the same integer kernels as q4_0x16 (the loader makes them; they are never in a file):
//  - the quants of each 32-weight group g are reordered so that a 64-byte chunk holds 4 bytes of each of the 16 rows
//    (4 r + i): chunk c (< 4) byte i of row r has weight 32g + 4c + i in its low nibble and 32g + 16 + 4c + i in its
//    high nibble (q4_0's split: the low nibbles of a chunk meet activations 4c.., the high ones 16 + 4c..);
//  - the extra bits follow the same positions: q5_kx16 qh[g][4r + i] bit c is the fifth bit of weight 32g + 4c + i,
//    bit 4 + c that of 32g + 16 + 4c + i; q6_kx16 qh[g][p][4r + i] for chunk c = 2p + j: bits 2j..2j+1 are the top two
//    bits of weight 32g + 4c + i, bits 4 + 2j..5 + 2j those of 32g + 16 + 4c + i;
//  - the 6-bit scales / mins of q4_K and q5_K are unpacked to one byte per (group, row) (4 bytes more per row and
//    super-block than the file's 12-byte packing, 2.8% of q4_K): a kernel widens 16 rows' scales with one load.
// Values are unchanged (a permutation plus the scale unpacking, which is bijective), so unpacking gives the file's
// blocks back byte for byte.
struct BlockQ4_Kx16 {
  f16_t d[16], dmin[16];
  uint8_t sc[8][16], m[8][16];  // [group][row]
  uint8_t qs[8][4][64];         // [group][chunk][4 row + byte]
};
static_assert(sizeof(BlockQ4_Kx16) == 16 * 148);
struct BlockQ5_Kx16 {
  f16_t d[16], dmin[16];
  uint8_t sc[8][16], m[8][16];
  uint8_t qh[8][64];            // [group][4 row + byte]
  uint8_t qs[8][4][64];
};
static_assert(sizeof(BlockQ5_Kx16) == 16 * 180);
struct BlockQ6_Kx16 {
  f16_t d[16];
  int8_t sc[16][16];            // [16-weight group][row]
  uint8_t qh[8][2][64];         // [group][chunk pair][4 row + byte]
  uint8_t ql[8][4][64];         // [group][chunk][4 row + byte]
};
static_assert(sizeof(BlockQ6_Kx16) == 16 * sizeof(BlockQ6_K));

// Low-bit K-quant panels (q2_kx16, q3_kx16): 16 rows of q2_K / q3_K, one super-block column at a time, for the same
// integer kernels. Per 32-weight group g the 2-bit quants of the 16 rows fill two 64-byte chunks (4 bytes per row):
// chunk c (< 2) byte 4r + i of row r holds in bits 2k..2k+1 (k < 4) the quant of weight 32g + 8k + 4c + i. So
// vector (c, k) (shift by 2k, mask 3) meets activations 8k + 4c .. 8k + 4c + 3, and the two 16-weight halves of the
// group (each with its own scale) are vectors k < 2 and k >= 2.
//  - q2_kx16: the file's scale bytes (scale | min << 4) as [16-weight group][row];
//  - q3_kx16: the 6-bit scales unpacked and made signed (sc - 32) as [16-weight group][row] (4 bytes more per row and
//    super-block than the file's 12, 3.6% of q3_K); hm[g][4r + i] bit 4c + k is the high bit of that same weight.
// Values are unchanged (a permutation plus the bijective scale unpacking): unpacking gives the file's blocks back.
struct BlockQ2_Kx16 {
  f16_t d[16], dmin[16];
  uint8_t sc[16][16];           // [16-weight group][row]: scale | min << 4
  uint8_t qs[8][2][64];         // [group][chunk][4 row + byte]
};
static_assert(sizeof(BlockQ2_Kx16) == 16 * sizeof(BlockQ2_K));
struct BlockQ3_Kx16 {
  f16_t d[16];
  int8_t sc[16][16];            // [16-weight group][row]: sc - 32
  uint8_t hm[8][64];            // [group][4 row + byte]
  uint8_t qs[8][2][64];         // [group][chunk][4 row + byte]
};
static_assert(sizeof(BlockQ3_Kx16) == 16 * 114);

// iq4_xsx16: 16 rows of iq4_xs, one super-block column at a time; the group scales unpacked and made signed
// (ls - 32) as [group][row], the nibbles as q4_kx16's (chunk c byte 4r + i of group g is the file's qs[16g + 4c + i]:
// low nibble weight 32g + 4c + i, high 32g + 16 + 4c + i).
struct BlockIQ4_XSx16 {
  f16_t d[16];
  int8_t sc[8][16];             // [group][row]: ls - 32
  uint8_t qs[8][4][64];         // [group][chunk][4 row + byte]
};
static_assert(sizeof(BlockIQ4_XSx16) == 16 * 138);

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
    {"q4_1", kQBlock, sizeof(BlockQ4_1), true}, {"q5_0", kQBlock, sizeof(BlockQ5_0), true},
    {"q5_1", kQBlock, sizeof(BlockQ5_1), true}, {"q2_k", kQK, sizeof(BlockQ2_K), true},
    {"q3_k", kQK, sizeof(BlockQ3_K), true}, {"q4_k", kQK, sizeof(BlockQ4_K), true},
    {"q5_k", kQK, sizeof(BlockQ5_K), true}, {"q6_k", kQK, sizeof(BlockQ6_K), true},
    {"q8_k", kQK, sizeof(BlockQ8_K), true}, {"iq4_nl", kQBlock, sizeof(BlockIQ4_NL), true},
    {"iq4_xs", kQK, sizeof(BlockIQ4_XS), true},
    {"mxfp4", kQBlock, sizeof(BlockMXFP4), true},
    // per row on average, as q4_0x16
    {"q4_kx16", kQK, sizeof(BlockQ4_Kx16) / 16, true}, {"q5_kx16", kQK, sizeof(BlockQ5_Kx16) / 16, true},
    {"q6_kx16", kQK, sizeof(BlockQ6_Kx16) / 16, true},
    {"bf16dot", 1, 2, false},
    {"mxfp4x16", kQBlock, sizeof(BlockMXFP4), true},  // per row on average, as q4_0x16
    {"q2_kx16", kQK, sizeof(BlockQ2_Kx16) / 16, true}, {"q3_kx16", kQK, sizeof(BlockQ3_Kx16) / 16, true},
    {"iq4_xsx16", kQK, sizeof(BlockIQ4_XSx16) / 16, true},
    {"iq4_nlx16", kQBlock, sizeof(BlockIQ4_NL), true},  // per row on average, as q4_0x16
    {"q4_1x16", kQBlock, sizeof(BlockQ4_1), true}, {"q5_1x16", kQBlock, sizeof(BlockQ5_1), true},
    {"q5_0x16", kQBlock, sizeof(BlockQ5_0), true},  // per row on average, as q4_0x16
};
static_assert(sizeof(kDTypeInfo) / sizeof(kDTypeInfo[0]) == size_t(DType::kCount));

constexpr const DTypeInfo& dtype_info(DType t) { return kDTypeInfo[int(t)]; }
constexpr std::string_view dtype_name(DType t) { return dtype_info(t).name; }
constexpr bool dtype_is_quantized(DType t) { return dtype_info(t).quantized; }
// Panel dtypes: rows are interleaved in groups of kPanelRows, so a row has no address of its own.
constexpr bool dtype_is_panel(DType t) {
  return t == DType::Q8_0X16 || t == DType::Q4_0X16 || t == DType::Q4_KX16 || t == DType::Q5_KX16 ||
         t == DType::Q6_KX16 || t == DType::MXFP4X16 || t == DType::Q2_KX16 || t == DType::Q3_KX16 ||
         t == DType::IQ4_XSX16 || t == DType::IQ4_NLX16 || t == DType::Q4_1X16 || t == DType::Q5_1X16 ||
         t == DType::Q5_0X16;
}
constexpr DType dtype_panel_of(DType t) {
  switch (t) {
    case DType::Q8_0: return DType::Q8_0X16;
    case DType::Q4_0: return DType::Q4_0X16;
    case DType::Q4_K: return DType::Q4_KX16;
    case DType::Q5_K: return DType::Q5_KX16;
    case DType::Q6_K: return DType::Q6_KX16;
    case DType::MXFP4: return DType::MXFP4X16;
    case DType::Q2_K: return DType::Q2_KX16;
    case DType::Q3_K: return DType::Q3_KX16;
    case DType::IQ4_XS: return DType::IQ4_XSX16;
    case DType::IQ4_NL: return DType::IQ4_NLX16;
    case DType::Q4_1: return DType::Q4_1X16;
    case DType::Q5_1: return DType::Q5_1X16;
    case DType::Q5_0: return DType::Q5_0X16;
    default: return t;
  }
}
constexpr DType dtype_unpanel(DType t) {
  switch (t) {
    case DType::Q8_0X16: return DType::Q8_0;
    case DType::Q4_0X16: return DType::Q4_0;
    case DType::Q4_KX16: return DType::Q4_K;
    case DType::Q5_KX16: return DType::Q5_K;
    case DType::Q6_KX16: return DType::Q6_K;
    case DType::MXFP4X16: return DType::MXFP4;
    case DType::Q2_KX16: return DType::Q2_K;
    case DType::Q3_KX16: return DType::Q3_K;
    case DType::IQ4_XSX16: return DType::IQ4_XS;
    case DType::IQ4_NLX16: return DType::IQ4_NL;
    case DType::Q4_1X16: return DType::Q4_1;
    case DType::Q5_1X16: return DType::Q5_1;
    case DType::Q5_0X16: return DType::Q5_0;
    default: return t;
  }
}
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
