// AVX-512 (F/BW/VL/DQ, with VNNI and BF16 where present) kernels: registers the ones this folder implements.
#include "backends/cpu/isa.h"

namespace pipit::avx512 {

void fill(Kernels& k, const CpuFeatures& f) { k.name = "avx512"; }

}  // namespace pipit::avx512
