// Arm i8mm kernels: the quantized matmuls for M >= 2 (smmla); everything else stays NEON's / dotprod's.
#include "backends/cpu/arm/i8mm/kernels_i8mm.h"
#include "backends/cpu/isa.h"

namespace pipit::i8mm {

void fill(Kernels& k) {
  k.name = "i8mm";
  k.matmul[int(DType::Q8_0)] = matmul_q8_0;
  k.matmul[int(DType::Q4_0)] = matmul_q4_0;
}

}  // namespace pipit::i8mm
