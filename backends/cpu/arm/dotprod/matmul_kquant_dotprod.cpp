// Armv8.2-A dotprod matmuls for q4_K, q5_K, q6_K and iq4_xs weights against BlockQ8Act rows: the tile of
// kquant_tile_neon.h with one sdot per 16 weights (4 lanes of 4 int8 products, exact in int32).
#include "backends/cpu/arm/dotprod/kernels_dotprod.h"
#include "backends/cpu/arm/neon/kquant_tile_neon.h"

namespace pipit::dotprod {

namespace {

struct Dot16Sdot {
  static int32x4_t dot16(int8x16_t w, int8x16_t a) { return vdotq_s32(vdupq_n_s32(0), w, a); }
};

}  // namespace

void matmul_q4_k(const MatmulArgs& a, int64_t n0, int64_t n1) { neon::matmul_kquant<Dot16Sdot, neon::KQ4K>(a, n0, n1); }
void matmul_q5_k(const MatmulArgs& a, int64_t n0, int64_t n1) { neon::matmul_kquant<Dot16Sdot, neon::KQ5K>(a, n0, n1); }
void matmul_q6_k(const MatmulArgs& a, int64_t n0, int64_t n1) { neon::matmul_kquant<Dot16Sdot, neon::KQ6K>(a, n0, n1); }
void matmul_iq4_xs(const MatmulArgs& a, int64_t n0, int64_t n1) {
  neon::matmul_kquant<Dot16Sdot, neon::KIQ4XS>(a, n0, n1);
}

}  // namespace pipit::dotprod
