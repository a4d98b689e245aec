// AVX-VNNI matmul for the iq4_xs panels iq4_xsx16: the shared 256-bit tiles (x86/avx2/matmul_iq4panel_avx2.h) with
// vpdpbusd as the dot product.
#include "backends/cpu/x86/avx2/matmul_iq4panel_avx2.h"
#include "backends/cpu/x86/avxvnni/int8_dot_avxvnni.h"
#include "backends/cpu/x86/avxvnni/kernels_avxvnni.h"

namespace pipit::avxvnni {

void matmul_iq4_xsx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_iq4_panels<VnniDot>(a, n0, n1); }

}  // namespace pipit::avxvnni
