// Arm dotprod kernels: the quantized matmuls (sdot); everything else stays NEON's.
#include "backends/cpu/arm/dotprod/kernels_dotprod.h"
#include "backends/cpu/isa.h"

namespace pipit::dotprod {

void fill(Kernels& k) {
  k.name = "dotprod";
  k.matmul[int(DType::Q8_0)] = matmul_q8_0;
  k.matmul[int(DType::Q4_0)] = matmul_q4_0;
  k.matmul[int(DType::Q4_K)] = matmul_q4_k;
  k.matmul[int(DType::Q5_K)] = matmul_q5_k;
  k.matmul[int(DType::Q6_K)] = matmul_q6_k;
  k.matmul[int(DType::IQ4_XS)] = matmul_iq4_xs;
  k.matmul[int(DType::MXFP4)] = matmul_mxfp4;
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
  k.pack_quant = true;
  k.pack_mxfp4 = true;
  k.pack_kquant = true;
}

}  // namespace pipit::dotprod
