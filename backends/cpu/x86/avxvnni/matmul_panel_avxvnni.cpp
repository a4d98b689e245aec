// AVX-VNNI matmuls for the panel dtypes q4_0x16 / mxfp4x16 / iq4_nlx16 / q4_1x16 / q5_0x16 / q5_1x16 / q8_0x16:
// the shared tiles (x86/avx2/matmul_panel_avx2.h) with vpdpbusd as the dot product (int32 lanes throughout, no int16
// partial sums to widen).
#include "backends/cpu/x86/avx2/matmul_panel_avx2.h"
#include "backends/cpu/x86/avxvnni/int8_dot_avxvnni.h"
#include "backends/cpu/x86/avxvnni/kernels_avxvnni.h"

namespace pipit {
namespace avxvnni {

void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<VnniDot, NQ8>(a, n0, n1); }
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<VnniDot, NQ4>(a, n0, n1); }
void matmul_mxfp4x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<VnniDot, NMX>(a, n0, n1); }
void matmul_iq4_nlx16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<VnniDot, NIQ4>(a, n0, n1); }
void matmul_q4_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<VnniDot, NQ41>(a, n0, n1); }
void matmul_q5_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<VnniDot, NQ51>(a, n0, n1); }
void matmul_q5_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_panels<VnniDot, NQ50>(a, n0, n1); }

}  // namespace avxvnni
}  // namespace pipit
