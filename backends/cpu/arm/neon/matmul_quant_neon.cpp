// NEON (Armv8.0) integer matmuls for q8_0, q4_0 and mxfp4 weights against BlockQ8Act rows. A block's dot product:
// vmull_s8 / vmlal_high_s8 multiply 8 byte pairs each and add two products per int16 lane (|w a| <= 128 * 127,
// so two fit), vpadal widens pairs into 4 int32 lanes: exact. The tile is quant_tile_neon.h's.
#include "backends/cpu/arm/neon/kernels_neon.h"
#include "backends/cpu/arm/neon/quant_tile_neon.h"

namespace pipit::neon {

namespace {

struct DotMull {
  static int32x4_t dot(int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1) {
    int16x8_t p = vmull_s8(vget_low_s8(w0), vget_low_s8(a0));
    p = vmlal_high_s8(p, w0, a0);
    int16x8_t q = vmull_s8(vget_low_s8(w1), vget_low_s8(a1));
    q = vmlal_high_s8(q, w1, a1);
    return vpadalq_s16(vpaddlq_s16(p), q);
  }
};

}  // namespace

void matmul_q8_0(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_quant<DotMull, WQ8>(a, n0, n1); }
void matmul_q4_0(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_quant<DotMull, WQ4>(a, n0, n1); }
void matmul_mxfp4(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_quant<DotMull, WMX>(a, n0, n1); }

}  // namespace pipit::neon
