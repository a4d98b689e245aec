// AVX-VNNI (VEX-encoded vpdpbusd on ymm): the level for AVX2 CPUs without AVX-512 that have it (Intel Alder Lake
// and later client cores, AMD Zen 5 when AVX-512 is capped). It takes every kernel from the AVX2 level and replaces
// the integer dot products (vpmaddubsw + vpmaddwd: 2 instructions and an int16 partial sum per step) with one
// vpdpbusd; the int32 sums are the same integers, so outputs keep the AVX2 kernels' bits.
#include "backends/cpu/isa.h"
#include "backends/cpu/x86/avxvnni/kernels_avxvnni.h"

namespace pipit::avxvnni {

void fill(Kernels& k) {
  k.name = "avxvnni";
  k.matmul[int(DType::Q8_0X16)] = matmul_q8_0x16;
  k.matmul[int(DType::Q4_0X16)] = matmul_q4_0x16;
  k.matmul[int(DType::MXFP4X16)] = matmul_mxfp4x16;
  k.matmul[int(DType::Q4_KX16)] = matmul_q4_kx16;
  k.matmul[int(DType::Q5_KX16)] = matmul_q5_kx16;
  k.matmul[int(DType::Q6_KX16)] = matmul_q6_kx16;
  k.matmul[int(DType::Q2_KX16)] = matmul_q2_kx16;
  k.matmul[int(DType::Q3_KX16)] = matmul_q3_kx16;
  k.matmul[int(DType::IQ4_XSX16)] = matmul_iq4_xsx16;
  k.matmul[int(DType::IQ4_NLX16)] = matmul_iq4_nlx16;
  k.matmul[int(DType::Q4_1X16)] = matmul_q4_1x16;
  k.matmul[int(DType::Q5_1X16)] = matmul_q5_1x16;
  k.matmul[int(DType::Q5_0X16)] = matmul_q5_0x16;
}

}  // namespace pipit::avxvnni
