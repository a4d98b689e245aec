// AVX2 matmul for the iq4_xs panels iq4_xsx16: the shared 256-bit tiles (matmul_iq4panel_avx2.h) with vpmaddubsw +
// vpmaddwd as the dot product.
#include "backends/cpu/x86/avx2/kernels_avx2.h"
#include "backends/cpu/x86/avx2/matmul_iq4panel_avx2.h"

namespace pipit::avx2 {

void matmul_iq4_xsx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_iq4_panels<MaddubsDot>(a, n0, n1); }

}  // namespace pipit::avx2
