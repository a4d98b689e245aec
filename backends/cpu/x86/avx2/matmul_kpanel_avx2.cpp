// AVX2 matmuls for the K-quant panels q4_kx16 / q5_kx16 / q6_kx16: the shared 256-bit tiles (matmul_kpanel_avx2.h)
// with vpmaddubsw + vpmaddwd as the dot product.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/matmul_kpanel_avx2.h"

namespace pipit::avx2 {

void matmul_q4_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kpanels<PQ4K<MaddubsDot>>(a, n0, n1); }
void matmul_q5_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kpanels<PQ5K<MaddubsDot>>(a, n0, n1); }
void matmul_q6_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kpanels<PQ6K<MaddubsDot>>(a, n0, n1); }

}  // namespace pipit::avx2
