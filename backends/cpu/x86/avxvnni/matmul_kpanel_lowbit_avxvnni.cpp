// AVX-VNNI matmuls for the low-bit K-quant panels q2_kx16 / q3_kx16: the shared 256-bit tiles
// (x86/avx2/matmul_kpanel_lowbit_avx2.h) with vpdpbusd as the dot product.
#include "backends/cpu/x86/avx2/matmul_kpanel_lowbit_avx2.h"
#include "backends/cpu/x86/avxvnni/int8_dot_avxvnni.h"
#include "backends/cpu/x86/avxvnni/kernels_avxvnni.h"

namespace pipit::avxvnni {

void matmul_q2_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_lowbit_panels<VnniDot, BlockQ2_Kx16>(a, n0, n1);
}
void matmul_q3_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_lowbit_panels<VnniDot, BlockQ3_Kx16>(a, n0, n1);
}

}  // namespace pipit::avxvnni
