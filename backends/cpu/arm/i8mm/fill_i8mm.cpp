// Arm i8mm kernels: registers the ones this folder implements.
#include "backends/cpu/isa.h"

namespace pipit::i8mm {

void fill(Kernels& k) { k.name = "i8mm"; }

}  // namespace pipit::i8mm
