// AVX2 matmuls for the panel dtypes q4_0x16 / mxfp4x16 / iq4_nlx16 / q4_1x16 / q5_0x16 / q5_1x16 / q8_0x16: the
// shared tiles (matmul_panel_avx2.h) with vpmaddubsw + vpmaddwd as the dot product.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/matmul_panel_avx2.h"

namespace pipit::avx2 {

void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<MaddubsDot, NQ8>(a, n0, n1); }
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<MaddubsDot, NQ4>(a, n0, n1); }
void matmul_mxfp4x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<MaddubsDot, NMX>(a, n0, n1); }
void matmul_iq4_nlx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<MaddubsDot, NIQ4>(a, n0, n1); }
void matmul_q4_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<MaddubsDot, NQ41>(a, n0, n1); }
void matmul_q5_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<MaddubsDot, NQ51>(a, n0, n1); }
void matmul_q5_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<MaddubsDot, NQ50>(a, n0, n1); }

}  // namespace pipit::avx2
