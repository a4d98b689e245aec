// Armv8.2-A dotprod integer matmuls for q8_0, q4_0 and mxfp4 weights against BlockQ8Act rows: a block's dot product is
// two sdot instructions (each 4 lanes of 4 int8 products), exact in int32. The tile is quant_tile_neon.h's.
#include "backends/cpu/arm/dotprod/kernels_dotprod.h"
#include "backends/cpu/arm/neon/quant_tile_neon.h"

namespace pipit::dotprod {

namespace {

struct DotSdot {
  static int32x4_t dot(int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, a0), w1, a1);
  }
};

}  // namespace

void matmul_q8_0(const MatmulArgs& a, int64_t n0, int64_t n1) { neon::matmul_quant<DotSdot, neon::WQ8>(a, n0, n1); }
void matmul_q4_0(const MatmulArgs& a, int64_t n0, int64_t n1) { neon::matmul_quant<DotSdot, neon::WQ4>(a, n0, n1); }
void matmul_mxfp4(const MatmulArgs& a, int64_t n0, int64_t n1) { neon::matmul_quant<DotSdot, neon::WMX>(a, n0, n1); }

}  // namespace pipit::dotprod
