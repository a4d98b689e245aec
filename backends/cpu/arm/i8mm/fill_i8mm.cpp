// Arm i8mm kernels: the quantized matmuls for M >= 2 (smmla), and with FEAT_BF16 the bf16dot matmul (bfmmla);
// everything else stays NEON's / dotprod's.
#include "backends/cpu/arm/i8mm/kernels_i8mm.h"
#include "backends/cpu/isa.h"

namespace pipit::i8mm {

void fill(Kernels& k, const CpuFeatures& f) {
  k.name = "i8mm";
  k.matmul[int(DType::Q8_0)] = matmul_q8_0;
  k.matmul[int(DType::Q4_0)] = matmul_q4_0;
  if (f.bf16) {  // without it bf16dot stays ref's and the loader never makes it
    k.matmul[int(DType::BF16DOT)] = matmul_bf16dot;
    k.bf16_dot = true;
  }
}

}  // namespace pipit::i8mm
