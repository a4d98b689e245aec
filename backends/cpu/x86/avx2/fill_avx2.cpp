// AVX2 + FMA + F16C kernels: registers the ones this folder implements.
#include "backends/cpu/isa.h"

namespace pipit::avx2 {

void fill(Kernels& k) { k.name = "avx2"; }

}  // namespace pipit::avx2
