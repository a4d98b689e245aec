// Arm dotprod kernels: registers the ones this folder implements.
#include "backends/cpu/isa.h"

namespace pipit::dotprod {

void fill(Kernels& k) { k.name = "dotprod"; }

}  // namespace pipit::dotprod
