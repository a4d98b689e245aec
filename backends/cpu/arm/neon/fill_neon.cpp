// Arm neon kernels: registers the ones this folder implements.
#include "backends/cpu/isa.h"

namespace pipit::neon {

void fill(Kernels& k) { k.name = "neon"; }

}  // namespace pipit::neon
