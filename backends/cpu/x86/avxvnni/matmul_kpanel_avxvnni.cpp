// AVX-VNNI matmuls for the K-quant panels q4_kx16 / q5_kx16 / q6_kx16: the shared 256-bit tiles
// (x86/avx2/matmul_kpanel_avx2.h) with vpdpbusd as the dot product.
#include "backends/cpu/x86/avx2/matmul_kpanel_avx2.h"
#include "backends/cpu/x86/avxvnni/int8_dot_avxvnni.h"
#include "backends/cpu/x86/avxvnni/kernels_avxvnni.h"

namespace pipit::avxvnni {

void matmul_q4_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kpanels<PQ4K<VnniDot>>(a, n0, n1); }
void matmul_q5_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kpanels<PQ5K<VnniDot>>(a, n0, n1); }
void matmul_q6_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_kpanels<PQ6K<VnniDot>>(a, n0, n1); }

}  // namespace pipit::avxvnni
