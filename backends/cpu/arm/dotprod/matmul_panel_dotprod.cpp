// Armv8.2-A dotprod matmuls for the row-interleaved panel dtypes q4_0x16 / mxfp4x16 / iq4_nlx16 / q4_1x16 / q5_0x16
// / q5_1x16 / q8_0x16 (core/dtype.h) against BlockQ8Act rows; the design of
// backends/cpu/x86/avx512/matmul_panel_avx512.cpp with 128-bit registers.
// A 64-byte chunk of a panel block holds 4 quant bytes of each of 16 rows: 4 registers of 4 rows each. sdot by
// lane (vdotq_laneq_s32) multiplies each row's 4 bytes with one activation dword and adds into that row's int32
// lane, so 4 accumulators hold the 16 rows' exact block dot products without horizontal sums. sdot is signed x
// signed and nibbles 0..15 are valid int8s: q4 lanes start at -8 * sum(a) (BlockQ8Act::sum) and take the nibbles as
// they are, which saves the 32 subtractions of q - 8 per block; q8 bytes are used as they are; mxfp4 nibbles go
// through one tbl to their doubled E2M1 value (kMxfp4Int8, signed: no offset), iq4_nl nibbles to their grid value
// (kIq4Values, likewise); q5 nibbles get their fifth bits back (0..31, valid int8s; q5_0's lanes start at
// -16 * sum(a)).
// Per block, f32 acc += float(dot) * (d_w d_a), the same arithmetic per row whatever the number of rows M.
#include <arm_neon.h>

#include <type_traits>

#include "backends/cpu/arm/dotprod/kernels_dotprod.h"
#include "backends/cpu/prefetch.h"

namespace pipit::dotprod {

namespace {

constexpr int kMR = 2;  // activation rows per tile: 2 x (4 int + 4 f32 accumulators) of the 32 registers

// sdot of 4 rows' bytes w with activation dword `lane` of a (lanes 0-3 = bytes 0-15 of a block, then 16-31).
template <int kLane>
inline int32x4_t sdot_lane(int32x4_t acc, int8x16_t w, int8x16_t a) { return vdotq_laneq_s32(acc, w, a, kLane); }

// The 16 rows' f16 block scales, 4 rows per register.
inline void f16_scales(const f16_t* d, float32x4_t* dw) {
  for (int q = 0; q < 4; ++q) dw[q] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(d + 4 * q)));
}

// The 4-bit formats: nibble -> int8 weight value (as sdot takes it) and the row scales.
struct NQ4 {
  using Block = BlockQ4_0x16;
  static constexpr int kOffset = 8;
  static constexpr bool kMins = false, kFifthBit = false;
  static inline int8x16_t map(uint8x16_t q) { return vreinterpretq_s8_u8(q); }  // q, not q - 8
  static inline void scales(const Block& w, float32x4_t* dw) { f16_scales(w.d, dw); }
};
struct NMX {
  using Block = BlockMXFP4x16;
  static constexpr int kOffset = 0;
  static constexpr bool kMins = false, kFifthBit = false;
  static inline int8x16_t map(uint8x16_t q) { return vqtbl1q_s8(vld1q_s8(kMxfp4Int8), q); }
  // 2^(e - 128) per row, as e8m0_half_to_f32 (core/dtype.h): (e - 1) << 23, or the subnormals 2^21 << e for e < 2
  static inline void scales(const Block& w, float32x4_t* dw) {
    const uint8x16_t e8 = vld1q_u8(w.e);
    const uint16x8_t e16[2] = {vmovl_u8(vget_low_u8(e8)), vmovl_u8(vget_high_u8(e8))};
    for (int q = 0; q < 4; ++q) {
      const uint32x4_t e = q % 2 ? vmovl_high_u16(e16[q / 2]) : vmovl_u16(vget_low_u16(e16[q / 2]));
      const uint32x4_t normal = vshlq_n_u32(vsubq_u32(e, vdupq_n_u32(1)), 23);
      const uint32x4_t sub = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(e));
      dw[q] = vreinterpretq_f32_u32(vbslq_u32(vcltq_u32(e, vdupq_n_u32(2)), sub, normal));
    }
  }
};

struct NIQ4 {  // iq4_nl: tbl to the grid value (kIq4Values, signed: no offset)
  using Block = BlockIQ4_NLx16;
  static constexpr int kOffset = 0;
  static constexpr bool kMins = false, kFifthBit = false;
  static inline int8x16_t map(uint8x16_t q) { return vqtbl1q_s8(vld1q_s8(kIq4Values), q); }
  static inline void scales(const Block& w, float32x4_t* dw) { f16_scales(w.d, dw); }
};
struct NQ41 {  // q4_1: the nibbles q as they are (w = d q + m), the rows' mins added per block (kMins)
  using Block = BlockQ4_1x16;
  static constexpr int kOffset = 0;
  static constexpr bool kMins = true, kFifthBit = false;
  static inline int8x16_t map(uint8x16_t q) { return vreinterpretq_s8_u8(q); }
  static inline void scales(const Block& w, float32x4_t* dw) { f16_scales(w.d, dw); }
  static inline void mins(const Block& w, float32x4_t* mw) { f16_scales(w.m, mw); }
};
// q5_0 / q5_1 (core/dtype.h): q = nibble | fifth bit << 4 (kFifthBit), 0..31; q5_0 is w = d (q - 16), q5_1 as q4_1
struct NQ50 {
  using Block = BlockQ5_0x16;
  static constexpr int kOffset = 16;
  static constexpr bool kMins = false, kFifthBit = true;
  static inline int8x16_t map(uint8x16_t q) { return vreinterpretq_s8_u8(q); }
  static inline void scales(const Block& w, float32x4_t* dw) { f16_scales(w.d, dw); }
};
struct NQ51 {
  using Block = BlockQ5_1x16;
  static constexpr int kOffset = 0;
  static constexpr bool kMins = true, kFifthBit = true;
  static inline int8x16_t map(uint8x16_t q) { return vreinterpretq_s8_u8(q); }
  static inline void scales(const Block& w, float32x4_t* dw) { f16_scales(w.d, dw); }
  static inline void mins(const Block& w, float32x4_t* mw) { f16_scales(w.m, mw); }
};

// Rows 4q .. 4q + 3 of weight vector v's fifth bits (the 16 bits qh[8 v + 2 q ..], core/dtype.h) as bytes: 0x10
// where the bit is set (byte j tests bit j % 8 of byte j / 8), or'd into the nibbles where format N has them.
template <class N>
inline uint8x16_t with_fifth_bits(uint8x16_t nib, const typename N::Block& w, int v, int q) {
  if constexpr (N::kFifthBit) {
    static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8_t* h = w.qh + 8 * v + 2 * q;
    const uint8x16_t b = vcombine_u8(vdup_n_u8(h[0]), vdup_n_u8(h[1]));
    return vorrq_u8(nib, vandq_u8(vtstq_u8(b, vld1q_u8(kBit)), vdupq_n_u8(0x10)));
  }
  return nib;
}

template <class N>
struct PQ4 {
  using Block = typename N::Block;
  static constexpr int kOffset = N::kOffset;
  static constexpr bool kMins = N::kMins;
  static inline void scales(const Block& w, float32x4_t* dw) { N::scales(w, dw); }
  static inline void mins(const Block& w, float32x4_t* mw) {
    if constexpr (N::kMins) N::mins(w, mw);
  }
  template <int MR>
  static inline void dots(const Block& w, int8x16_t (*a)[2], int32x4_t (*isum)[4]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
#define PIPIT_PQ4_CHUNK(c)                                                                                      \
  for (int q = 0; q < 4; ++q) {                                                                                 \
    const uint8x16_t v = vld1q_u8(w.qs + 64 * (c) + 16 * q);                                                    \
    const int8x16_t lo = N::map(with_fifth_bits<N>(vandq_u8(v, m4), w, 2 * (c), q)); /* weights 4c.. */        \
    const int8x16_t hi = N::map(with_fifth_bits<N>(vshrq_n_u8(v, 4), w, 2 * (c) + 1, q)); /* 16 + 4c.. */       \
    for (int i = 0; i < MR; ++i) {                                                                              \
      isum[i][q] = sdot_lane<c>(isum[i][q], lo, a[i][0]);                                                       \
      isum[i][q] = sdot_lane<c>(isum[i][q], hi, a[i][1]);                                                       \
    }                                                                                                           \
  }
    PIPIT_PQ4_CHUNK(0)
    PIPIT_PQ4_CHUNK(1)
    PIPIT_PQ4_CHUNK(2)
    PIPIT_PQ4_CHUNK(3)
#undef PIPIT_PQ4_CHUNK
  }
};

// q8_0x16: the bytes as they are
struct PQ8 {
  using Block = BlockQ8_0x16;
  static constexpr int kOffset = 0;
  static constexpr bool kMins = false;
  static inline void scales(const Block& w, float32x4_t* dw) { f16_scales(w.d, dw); }
  static inline void mins(const Block&, float32x4_t*) {}
  template <int MR>
  static inline void dots(const Block& w, int8x16_t (*a)[2], int32x4_t (*isum)[4]) {
#define PIPIT_PQ8_CHUNK(g)                                                                         \
  for (int q = 0; q < 4; ++q) {                                                                    \
    const int8x16_t v = vld1q_s8(reinterpret_cast<const int8_t*>(w.qs) + 64 * (g) + 16 * q);      \
    for (int i = 0; i < MR; ++i) isum[i][q] = sdot_lane<(g) % 4>(isum[i][q], v, a[i][(g) / 4]);   \
  }
    PIPIT_PQ8_CHUNK(0)
    PIPIT_PQ8_CHUNK(1)
    PIPIT_PQ8_CHUNK(2)
    PIPIT_PQ8_CHUNK(3)
    PIPIT_PQ8_CHUNK(4)
    PIPIT_PQ8_CHUNK(5)
    PIPIT_PQ8_CHUNK(6)
    PIPIT_PQ8_CHUNK(7)
#undef PIPIT_PQ8_CHUNK
  }
};

// y[m .. m+MR, n .. n+16) from the panel starting at `panel`.
template <class P, int MR>
inline void tile(const MatmulArgs& a, const typename P::Block* panel, int64_t m, int64_t n) {
  const BlockQ8Act* x[MR];
  for (int i = 0; i < MR; ++i)
    x[i] = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + (m + i) * a.x_stride);
  float32x4_t acc[MR][4];
  for (int i = 0; i < MR; ++i)
    for (int q = 0; q < 4; ++q) acc[i][q] = vdupq_n_f32(0.0f);
  const int64_t nb = a.K / kQBlock;
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (MR == 1) prefetch_panel_ahead(panel, b);  // decode (backends/cpu/prefetch.h)
    const auto& w = panel[b];
    int8x16_t av[MR][2];
    int32x4_t isum[MR][4];
    for (int i = 0; i < MR; ++i) {
      av[i][0] = vld1q_s8(x[i][b].qs);
      av[i][1] = vld1q_s8(x[i][b].qs + 16);
      for (int q = 0; q < 4; ++q) isum[i][q] = vdupq_n_s32(-P::kOffset * x[i][b].sum);
    }
    P::template dots<MR>(w, av, isum);
    float32x4_t dw[4];
    P::scales(w, dw);
    for (int q = 0; q < 4; ++q) {  // rows 4q .. 4q+3
      for (int i = 0; i < MR; ++i)
        acc[i][q] = vfmaq_f32(acc[i][q], vcvtq_f32_s32(isum[i][q]), vmulq_n_f32(dw[q], x[i][b].d));
    }
    if constexpr (P::kMins) {  // + m d_a sum(a): ref's second fused step (kquant_ref.cpp)
      float32x4_t mw[4];
      P::mins(w, mw);
      for (int i = 0; i < MR; ++i) {
        const float32x4_t ds = vdupq_n_f32(x[i][b].d * float(x[i][b].sum));
        for (int q = 0; q < 4; ++q) acc[i][q] = vfmaq_f32(acc[i][q], mw[q], ds);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + (m + i) * a.y_stride) + n;
    for (int q = 0; q < 4; ++q) vst1q_f32(y + 4 * q, acc[i][q]);
  }
}

template <class P>
void matmul(const MatmulArgs& a, int64_t n0, int64_t n1) {
  using Block = typename P::Block;
  const int64_t nb = a.K / kQBlock;
  for (int64_t n = n0; n < n1; n += kPanelRows) {  // n0, n1: multiples of 16
    const Block* panel = static_cast<const Block*>(a.w) + (n / kPanelRows) * nb;
    int64_t m = 0;
    for (; m + kMR <= a.M; m += kMR) tile<P, kMR>(a, panel, m, n);
    if (m < a.M) tile<P, 1>(a, panel, m, n);
  }
}

}  // namespace

void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ8>(a, n0, n1); }
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4<NQ4>>(a, n0, n1); }
void matmul_mxfp4x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4<NMX>>(a, n0, n1); }
void matmul_iq4_nlx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4<NIQ4>>(a, n0, n1); }
void matmul_q4_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4<NQ41>>(a, n0, n1); }
void matmul_q5_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4<NQ51>>(a, n0, n1); }
void matmul_q5_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul<PQ4<NQ50>>(a, n0, n1); }

}  // namespace pipit::dotprod
