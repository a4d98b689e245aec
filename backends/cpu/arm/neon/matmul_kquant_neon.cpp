// NEON (Armv8.0) matmuls for q4_K, q5_K, q6_K and iq4_xs weights against BlockQ8Act rows: the tile of
// kquant_tile_neon.h with vmull_s8 / vmlal_high_s8 dot products (two products per int16 lane, |w a| <= 127 * 127).
#include "backends/cpu/arm/neon/kernels_neon.h"
#include "backends/cpu/arm/neon/kquant_tile_neon.h"

namespace pipit::neon {

namespace {

struct Dot16Mull {
  static int32x4_t dot16(int8x16_t w, int8x16_t a) {
    return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(a)), w, a));
  }
};

}  // namespace

void matmul_q4_k(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kquant<Dot16Mull, KQ4K>(a, n0, n1); }
void matmul_q5_k(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kquant<Dot16Mull, KQ5K>(a, n0, n1); }
void matmul_q6_k(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kquant<Dot16Mull, KQ6K>(a, n0, n1); }
void matmul_iq4_xs(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kquant<Dot16Mull, KIQ4XS>(a, n0, n1); }

}  // namespace pipit::neon
