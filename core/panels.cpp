// Packing q4_0 / q8_0 / mxfp4 / q2_K .. q6_K / iq4_xs / iq4_nl / q4_1 / q5_1 rows into 16-row panels and back: a
// byte permutation (plus the K-quant scale unpacking and q5_1's widening to a byte per weight, which are bijective),
// so both directions are exact. q5_0 rows are widened to q8_0 (exact values, not bytes: they unpack as q8_0).
#include "core/panels.h"

#include <cstring>
#include <vector>

namespace pipit {

namespace {

// The packers below move 4 consecutive bytes of a row at a time (one panel lane: 4 row bytes, 4r..4r+3) as one 32-bit
// word, shifting and masking every byte alike: a right shift by < 8 and a per-byte mask leave each byte's own bits, so
// this is endian-neutral. Byte at a time they ran at 0.3-0.8 GB/s (q2_K .. q6_K, q5_0 / q5_1), which on a Q4_K_M 4B
// GGUF was seconds of load.
inline uint32_t load4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store4(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
constexpr uint32_t kBits1 = 0x01010101u, kBits2 = 0x03030303u, kBits4 = 0x0f0f0f0fu;

// ---- K-quant panels (layout in core/dtype.h). Weight 32g + l (l < 32) of a super-block sits in panel chunk
// c = (l % 16) / 4, byte i = l % 4, nibble l / 16 of group g; the helpers below move one row's super-block.

// The 12-byte q4_K / q5_K scale packing from 8 six-bit scales and mins (the inverse of kquant_scale_min).
void pack_scale_min(const uint8_t* sc, const uint8_t* m, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = uint8_t((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    q[j + 8] = uint8_t((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

template <class Plain, class Panel>
void pack_k4_row(const Plain& b, Panel& p, int r) {
  constexpr bool kQ5 = sizeof(Plain) == sizeof(BlockQ5_K);
  p.d[r] = b.d;
  p.dmin[r] = b.dmin;
  for (int g = 0; g < 8; ++g) kquant_scale_min(g, b.scales, &p.sc[g][r], &p.m[g][r]);
  for (int g = 0; g < 8; ++g) {
    // weight 32g + l (l < 32) of the plain block: nibble g % 2 of qs[32 (g / 2) + l]; q5's fifth bit: bit g of qh[l]
    const uint8_t* qs = b.qs + 32 * (g / 2);
    const int sh = 4 * (g % 2);
    uint32_t h = 0;
    for (int c = 0; c < 4; ++c) {
      const uint32_t lo = (load4(qs + 4 * c) >> sh) & kBits4, hi = (load4(qs + 16 + 4 * c) >> sh) & kBits4;
      store4(&p.qs[g][c][4 * r], lo | hi << 4);
      if constexpr (kQ5)
        h |= ((load4(b.qh + 4 * c) >> g) & kBits1) << c | ((load4(b.qh + 16 + 4 * c) >> g) & kBits1) << (4 + c);
    }
    if constexpr (kQ5) store4(&p.qh[g][4 * r], h);
  }
}

template <class Plain, class Panel>
void unpack_k4_row(const Panel& p, int r, Plain& b) {
  constexpr bool kQ5 = sizeof(Plain) == sizeof(BlockQ5_K);
  b.d = p.d[r];
  b.dmin = p.dmin[r];
  uint8_t sc[8], m[8];
  for (int g = 0; g < 8; ++g) sc[g] = p.sc[g][r], m[g] = p.m[g][r];
  pack_scale_min(sc, m, b.scales);
  std::memset(b.qs, 0, sizeof(b.qs));
  if constexpr (kQ5) std::memset(b.qh, 0, sizeof(b.qh));
  for (int g = 0; g < 8; ++g)
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 4; ++i) {
        const int lo = 4 * c + i, hi = 16 + 4 * c + i;
        const uint8_t v = p.qs[g][c][4 * r + i];
        b.qs[32 * (g / 2) + lo] = uint8_t(b.qs[32 * (g / 2) + lo] | ((v & 0xf) << (4 * (g % 2))));
        b.qs[32 * (g / 2) + hi] = uint8_t(b.qs[32 * (g / 2) + hi] | ((v >> 4) << (4 * (g % 2))));
        if constexpr (kQ5) {
          const uint8_t h = p.qh[g][4 * r + i];
          b.qh[lo] = uint8_t(b.qh[lo] | (((h >> c) & 1) << g));
          b.qh[hi] = uint8_t(b.qh[hi] | (((h >> (4 + c)) & 1) << g));
        }
      }
}

// q6_K weight 32g + l: 4 low bits at ql[64h + 32 (s & 1) + l] >> 4 (s >> 1), 2 high bits at qh[32h + l] >> 2s,
// h = g / 4, s = g % 4 (core/dtype.h).
void pack_q6k_row(const BlockQ6_K& b, BlockQ6_Kx16& p, int r) {
  p.d[r] = b.d;
  for (int j = 0; j < 16; ++j) p.sc[j][r] = b.scales[j];
  for (int g = 0; g < 8; ++g) {
    const int h = g / 4, s = g % 4;
    const uint8_t* ql = b.ql + 64 * h + 32 * (s & 1);
    const uint8_t* qh = b.qh + 32 * h;
    const int sl = 4 * (s >> 1), sh = 2 * s;
    for (int pair = 0; pair < 2; ++pair) {
      uint32_t q = 0;
      for (int k = 0; k < 2; ++k) {
        const int c = 2 * pair + k;
        const uint32_t lo = (load4(ql + 4 * c) >> sl) & kBits4, hi = (load4(ql + 16 + 4 * c) >> sl) & kBits4;
        store4(&p.ql[g][c][4 * r], lo | hi << 4);
        q |= ((load4(qh + 4 * c) >> sh) & kBits2) << (2 * k) | ((load4(qh + 16 + 4 * c) >> sh) & kBits2) << (4 + 2 * k);
      }
      store4(&p.qh[g][pair][4 * r], q);
    }
  }
}

void unpack_q6k_row(const BlockQ6_Kx16& p, int r, BlockQ6_K& b) {
  b.d = p.d[r];
  for (int j = 0; j < 16; ++j) b.scales[j] = p.sc[j][r];
  std::memset(b.ql, 0, sizeof(b.ql));
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int g = 0; g < 8; ++g) {
    const int h = g / 4, s = g % 4;
    auto put = [&](int l, int v) {
      uint8_t& ql = b.ql[64 * h + 32 * (s & 1) + l];
      ql = uint8_t(ql | ((v & 0xf) << (4 * (s >> 1))));
      b.qh[32 * h + l] = uint8_t(b.qh[32 * h + l] | ((v >> 4) << (2 * s)));
    };
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 4; ++i) {
        const uint8_t l4 = p.ql[g][c][4 * r + i], h2 = p.qh[g][c / 2][4 * r + i];
        const int sh = 2 * (c % 2);
        put(4 * c + i, (l4 & 0xf) | (((h2 >> sh) & 3) << 4));
        put(16 + 4 * c + i, (l4 >> 4) | (((h2 >> (4 + sh)) & 3) << 4));
      }
  }
}

// q2_K / q3_K (layout in core/dtype.h): weight 32g + 8k + 4c + i sits in bits 2k..2k+1 of panel byte qs[g][c][4r + i]
// (q3_K's high bit: bit 4c + k of hm[g][4r + i]). In the file, weight j's 2 bits are bits 2((j / 32) % 4) of
// qs[32 (j / 128) + j % 32] and q3_K's high bit is bit j / 32 of hmask[j % 32].
inline int q2_weight(int g, int c, int k, int i) { return 32 * g + 8 * k + 4 * c + i; }

void pack_q2_bits(const uint8_t* qs, uint8_t (*out)[2][64], int r) {
  for (int g = 0; g < 8; ++g) {  // q2k_quant(qs, q2_weight(g, c, k, i)): byte 32 (g / 4) + 8k + 4c + i, shift 2 (g % 4)
    const uint8_t* q = qs + 32 * (g / 4);
    const int sh = 2 * (g % 4);
    for (int c = 0; c < 2; ++c) {
      uint32_t v = 0;
      for (int k = 0; k < 4; ++k) v |= ((load4(q + 8 * k + 4 * c) >> sh) & kBits2) << (2 * k);
      store4(&out[g][c][4 * r], v);
    }
  }
}

void unpack_q2_bits(const uint8_t (*in)[2][64], int r, uint8_t* qs) {
  std::memset(qs, 0, kQK / 4);
  for (int g = 0; g < 8; ++g)
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 4; ++i)
        for (int k = 0; k < 4; ++k) {
          const int j = q2_weight(g, c, k, i), q = (in[g][c][4 * r + i] >> (2 * k)) & 3;
          qs[32 * (j / 128) + j % 32] = uint8_t(qs[32 * (j / 128) + j % 32] | (q << (2 * ((j / 32) % 4))));
        }
}

void pack_q2k_row(const BlockQ2_K& b, BlockQ2_Kx16& p, int r) {
  p.d[r] = b.d;
  p.dmin[r] = b.dmin;
  for (int j = 0; j < 16; ++j) p.sc[j][r] = b.scales[j];
  pack_q2_bits(b.qs, p.qs, r);
}

void unpack_q2k_row(const BlockQ2_Kx16& p, int r, BlockQ2_K& b) {
  b.d = p.d[r];
  b.dmin = p.dmin[r];
  for (int j = 0; j < 16; ++j) b.scales[j] = p.sc[j][r];
  unpack_q2_bits(p.qs, r, b.qs);
}

void pack_q3k_row(const BlockQ3_K& b, BlockQ3_Kx16& p, int r) {
  p.d[r] = b.d;
  for (int j = 0; j < 16; ++j) p.sc[j][r] = int8_t(q3k_scale(b, j) - 32);
  pack_q2_bits(b.qs, p.qs, r);
  for (int g = 0; g < 8; ++g) {  // the high bit of weight q2_weight(g, c, k, i): bit g of hmask[8k + 4c + i]
    uint32_t h = 0;
    for (int c = 0; c < 2; ++c)
      for (int k = 0; k < 4; ++k) h |= ((load4(b.hmask + 8 * k + 4 * c) >> g) & kBits1) << (4 * c + k);
    store4(&p.hm[g][4 * r], h);
  }
}

void unpack_q3k_row(const BlockQ3_Kx16& p, int r, BlockQ3_K& b) {
  b.d = p.d[r];
  int s[16];
  for (int j = 0; j < 16; ++j) s[j] = p.sc[j][r] + 32;
  for (int j = 0; j < 4; ++j) {  // the inverse of q3k_scale
    b.scales[j] = uint8_t((s[j] & 0xF) | ((s[8 + j] & 0xF) << 4));
    b.scales[4 + j] = uint8_t((s[4 + j] & 0xF) | ((s[12 + j] & 0xF) << 4));
    b.scales[8 + j] = uint8_t((s[j] >> 4) | ((s[4 + j] >> 4) << 2) | ((s[8 + j] >> 4) << 4) | ((s[12 + j] >> 4) << 6));
  }
  unpack_q2_bits(p.qs, r, b.qs);
  std::memset(b.hmask, 0, sizeof(b.hmask));
  for (int g = 0; g < 8; ++g)
    for (int i = 0; i < 4; ++i)
      for (int c = 0; c < 2; ++c)
        for (int k = 0; k < 4; ++k) {
          const int j = q2_weight(g, c, k, i);
          b.hmask[j % 32] = uint8_t(b.hmask[j % 32] | (((p.hm[g][4 * r + i] >> (4 * c + k)) & 1) << (j / 32)));
        }
}

// iq4_xs: the nibbles stay in their bytes (chunk c byte i of group g is qs[16g + 4c + i]); the 6-bit scales are
// unpacked (ls - 32).
void pack_iq4xs_row(const BlockIQ4_XS& b, BlockIQ4_XSx16& p, int r) {
  p.d[r] = b.d;
  for (int g = 0; g < 8; ++g) p.sc[g][r] = int8_t(iq4_xs_scale(b, g) - 32);
  for (int g = 0; g < 8; ++g)
    for (int c = 0; c < 4; ++c) std::memcpy(&p.qs[g][c][4 * r], &b.qs[16 * g + 4 * c], 4);
}

void unpack_iq4xs_row(const BlockIQ4_XSx16& p, int r, BlockIQ4_XS& b) {
  b.d = p.d[r];
  b.scales_h = 0;
  std::memset(b.scales_l, 0, sizeof(b.scales_l));
  for (int g = 0; g < 8; ++g) {
    const int ls = p.sc[g][r] + 32;
    b.scales_l[g / 2] = uint8_t(b.scales_l[g / 2] | ((ls & 0xF) << (4 * (g % 2))));
    b.scales_h = uint16_t(b.scales_h | ((ls >> 4) << (2 * g)));
  }
  for (int g = 0; g < 8; ++g)
    for (int c = 0; c < 4; ++c) std::memcpy(&b.qs[16 * g + 4 * c], &p.qs[g][c][4 * r], 4);
}

// q4_1 / q5_0 / q5_1 (32-weight blocks): d (and m) per row; the nibbles as q4_0x16's, and q5's fifth bits (ggml's
// order: bit j of the little-endian qh is weight j's) moved to the panel's per-vector masks (core/dtype.h).
void pack_q41_row(const BlockQ4_1& b, BlockQ4_1x16& p, int r) {
  p.d[r] = b.d;
  p.m[r] = b.m;
  for (int c = 0; c < 4; ++c) std::memcpy(&p.qs[64 * c + 4 * r], &b.qs[4 * c], 4);
}
void unpack_q41_row(const BlockQ4_1x16& p, int r, BlockQ4_1& b) {
  b.d = p.d[r];
  b.m = p.m[r];
  for (int c = 0; c < 4; ++c) std::memcpy(&b.qs[4 * c], &p.qs[64 * c + 4 * r], 4);
}
// Where weight j (< 32) of row r sits in a q5 panel's masks: vector v (q4_vector_x_offset's numbering), byte 4r + i.
constexpr int q5_vector_of(int j) { return j < 16 ? 2 * (j / 4) : 2 * ((j - 16) / 4) + 1; }
template <class Plain, class Panel>
void pack_q5_quants(const Plain& b, Panel& p, int r) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int c = 0; c < 4; ++c) std::memcpy(&p.qs[64 * c + 4 * r], &b.qs[4 * c], 4);
  // weights 4t .. 4t + 3 are bits 4r .. 4r + 3 of vector q5_vector_of(4t): one nibble of byte 8 v + r / 2
  const int sh = 4 * (r % 2);
  for (int t = 0; t < 8; ++t) {
    uint8_t& byte = p.qh[8 * q5_vector_of(4 * t) + r / 2];
    byte = uint8_t((byte & ~(0xf << sh)) | ((qh >> (4 * t)) & 0xf) << sh);
  }
}
template <class Panel, class Plain>
void unpack_q5_quants(const Panel& p, int r, Plain& b) {
  uint32_t qh = 0;
  for (int c = 0; c < 4; ++c) std::memcpy(&b.qs[4 * c], &p.qs[64 * c + 4 * r], 4);
  for (int j = 0; j < kQBlock; ++j) {
    const int bit = 4 * r + j % 4;
    qh |= uint32_t((p.qh[8 * q5_vector_of(j) + bit / 8] >> (bit % 8)) & 1) << j;
  }
  std::memcpy(b.qh, &qh, 4);
}
void pack_q50_row(const BlockQ5_0& b, BlockQ5_0x16& p, int r) {
  p.d[r] = b.d;
  pack_q5_quants(b, p, r);
}
void unpack_q50_row(const BlockQ5_0x16& p, int r, BlockQ5_0& b) {
  b.d = p.d[r];
  unpack_q5_quants(p, r, b);
}
void pack_q51_row(const BlockQ5_1& b, BlockQ5_1x16& p, int r) {
  p.d[r] = b.d;
  p.m[r] = b.m;
  pack_q5_quants(b, p, r);
}
void unpack_q51_row(const BlockQ5_1x16& p, int r, BlockQ5_1& b) {
  b.d = p.d[r];
  b.m = p.m[r];
  unpack_q5_quants(p, r, b);
}

// Rows of `Plain` blocks of `elems` weights (a K-quant super-block, or 32 for q4_1 / q5_0 / q5_1) to panels and back.
template <class Plain, class Panel, class PackRow>
void pack_k(const uint8_t* src, int64_t src_stride, int64_t N, int64_t K, uint8_t* dst, PackRow pack_row,
            int64_t elems = kQK) {
  const int64_t nsb = K / elems;
  auto* out = reinterpret_cast<Panel*>(dst);
  for (int64_t n = 0; n < N; ++n) {
    const auto* row = reinterpret_cast<const Plain*>(src + n * src_stride);
    for (int64_t s = 0; s < nsb; ++s) pack_row(row[s], out[(n / kPanelRows) * nsb + s], int(n % kPanelRows));
  }
}

template <class Plain, class Panel, class UnpackRow>
void unpack_k(const uint8_t* src, int64_t K, int64_t r0, int64_t r1, uint8_t* dst, UnpackRow unpack_row,
              int64_t elems = kQK) {
  const int64_t nsb = K / elems;
  const auto* in = reinterpret_cast<const Panel*>(src);
  auto* out = reinterpret_cast<Plain*>(dst);
  for (int64_t n = r0; n < r1; ++n)
    for (int64_t s = 0; s < nsb; ++s)
      unpack_row(in[(n / kPanelRows) * nsb + s], int(n % kPanelRows), out[(n - r0) * nsb + s]);
}

// Bytes of one row's quants and scale in a block (q4_0 / q8_0 / iq4_nl: an f16 d; mxfp4: one exponent byte), and the
// interleave unit (4 bytes: one int32 lane of the dot product).
constexpr int64_t kLane = 4;
int64_t quant_bytes(DType plain) { return plain == DType::Q8_0 ? kQBlock : kQBlock / 2; }
int64_t scale_bytes(DType plain) { return plain == DType::MXFP4 ? 1 : 2; }
int64_t block_bytes(DType plain) { return scale_bytes(plain) + quant_bytes(plain); }

// q4_0 / q8_0 / iq4_nl / mxfp4 rows (blocks of a scale of kScale bytes, then kQuant bytes of quants) to panels; the
// sizes as constants make every move a fixed-size one (with them read at run time this ran at ~4 GB/s).
template <int64_t kScale, int64_t kQuant>
void pack_blocks(const uint8_t* src, int64_t src_stride, int64_t N, int64_t K, uint8_t* dst) {
  constexpr int64_t kBlock = kScale + kQuant, kPanelBlock = kPanelRows * kBlock;  // 16 scales, then 16 rows' quants
  const int64_t nb = K / kQBlock;
  for (int64_t p = 0; p < N / kPanelRows; ++p) {
    uint8_t* panel = dst + p * nb * kPanelBlock;
    for (int64_t r = 0; r < kPanelRows; ++r) {  // each row read in order; its blocks go to the panel's lane r
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* out = panel + b * kPanelBlock;
        const uint8_t* blk = src + (p * kPanelRows + r) * src_stride + b * kBlock;  // scale, then quants
        std::memcpy(out + kScale * r, blk, kScale);
        for (int64_t c = 0; c < kQuant / kLane; ++c)  // group c of 4 quant bytes -> lane r of 64-byte chunk c
          std::memcpy(out + kScale * kPanelRows + c * kLane * kPanelRows + r * kLane, blk + kScale + c * kLane, kLane);
      }
    }
  }
}

}  // namespace

void q5_0_to_q8_0(const BlockQ5_0& b, BlockQ8_0& out) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  out.d = b.d;
  for (int j = 0; j < kQBlock / 2; ++j) {
    out.qs[j] = int8_t(((b.qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) - 16);
    out.qs[j + 16] = int8_t(((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
  }
}

void pack_panels(DType plain, const uint8_t* src, int64_t src_stride, int64_t N, int64_t K, uint8_t* dst) {
  switch (plain) {
    case DType::Q4_K:
      return pack_k<BlockQ4_K, BlockQ4_Kx16>(src, src_stride, N, K, dst, pack_k4_row<BlockQ4_K, BlockQ4_Kx16>);
    case DType::Q5_K:
      return pack_k<BlockQ5_K, BlockQ5_Kx16>(src, src_stride, N, K, dst, pack_k4_row<BlockQ5_K, BlockQ5_Kx16>);
    case DType::Q6_K: return pack_k<BlockQ6_K, BlockQ6_Kx16>(src, src_stride, N, K, dst, pack_q6k_row);
    case DType::Q2_K: return pack_k<BlockQ2_K, BlockQ2_Kx16>(src, src_stride, N, K, dst, pack_q2k_row);
    case DType::Q3_K: return pack_k<BlockQ3_K, BlockQ3_Kx16>(src, src_stride, N, K, dst, pack_q3k_row);
    case DType::IQ4_XS: return pack_k<BlockIQ4_XS, BlockIQ4_XSx16>(src, src_stride, N, K, dst, pack_iq4xs_row);
    case DType::Q4_1: return pack_k<BlockQ4_1, BlockQ4_1x16>(src, src_stride, N, K, dst, pack_q41_row, kQBlock);
    case DType::Q5_1: return pack_k<BlockQ5_1, BlockQ5_1x16>(src, src_stride, N, K, dst, pack_q51_row, kQBlock);
    case DType::Q5_0: return pack_k<BlockQ5_0, BlockQ5_0x16>(src, src_stride, N, K, dst, pack_q50_row, kQBlock);
    default: break;
  }
  // q4_0 / iq4_nl (an f16 scale, 16 bytes of quants), q8_0 (f16, 32 bytes), mxfp4 (an exponent byte, 16 bytes)
  if (plain == DType::Q8_0) return pack_blocks<2, kQBlock>(src, src_stride, N, K, dst);
  if (plain == DType::MXFP4) return pack_blocks<1, kQBlock / 2>(src, src_stride, N, K, dst);
  return pack_blocks<2, kQBlock / 2>(src, src_stride, N, K, dst);
}

void unpack_panel_rows(DType panel, const uint8_t* src, int64_t K, int64_t r0, int64_t r1, uint8_t* dst) {
  const DType plain = dtype_unpanel(panel);
  switch (plain) {
    case DType::Q4_K:
      return unpack_k<BlockQ4_K, BlockQ4_Kx16>(src, K, r0, r1, dst, unpack_k4_row<BlockQ4_K, BlockQ4_Kx16>);
    case DType::Q5_K:
      return unpack_k<BlockQ5_K, BlockQ5_Kx16>(src, K, r0, r1, dst, unpack_k4_row<BlockQ5_K, BlockQ5_Kx16>);
    case DType::Q6_K: return unpack_k<BlockQ6_K, BlockQ6_Kx16>(src, K, r0, r1, dst, unpack_q6k_row);
    case DType::Q2_K: return unpack_k<BlockQ2_K, BlockQ2_Kx16>(src, K, r0, r1, dst, unpack_q2k_row);
    case DType::Q3_K: return unpack_k<BlockQ3_K, BlockQ3_Kx16>(src, K, r0, r1, dst, unpack_q3k_row);
    case DType::IQ4_XS: return unpack_k<BlockIQ4_XS, BlockIQ4_XSx16>(src, K, r0, r1, dst, unpack_iq4xs_row);
    case DType::Q4_1: return unpack_k<BlockQ4_1, BlockQ4_1x16>(src, K, r0, r1, dst, unpack_q41_row, kQBlock);
    case DType::Q5_1: return unpack_k<BlockQ5_1, BlockQ5_1x16>(src, K, r0, r1, dst, unpack_q51_row, kQBlock);
    case DType::Q5_0: return unpack_k<BlockQ5_0, BlockQ5_0x16>(src, K, r0, r1, dst, unpack_q50_row, kQBlock);
    default: break;
  }
  const int64_t nb = K / kQBlock, qb = quant_bytes(plain), sb = scale_bytes(plain), bb = block_bytes(plain);
  const int64_t pb = kPanelRows * bb;
  for (int64_t row = r0; row < r1; ++row) {
    const uint8_t* pan = src + (row / kPanelRows) * nb * pb;
    const int64_t r = row % kPanelRows;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = dst + (row - r0) * nb * bb + b * bb;
      std::memcpy(blk, pan + b * pb + sb * r, size_t(sb));
      for (int64_t c = 0; c < qb / kLane; ++c)
        std::memcpy(blk + sb + c * kLane, pan + b * pb + sb * kPanelRows + c * kLane * kPanelRows + r * kLane, kLane);
    }
  }
}

}  // namespace pipit
