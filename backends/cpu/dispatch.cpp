// Fills the kernel table once from the CPU's features: the reference first, then each ISA level overrides the
// entries it implements. Adding a kernel for an ISA is one line in that ISA's fill function.
#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/ref/ref.h"

namespace pipit {

Kernels make_kernels(const CpuFeatures& f) {
  Kernels k;
  ref::fill(k);
#if defined(PIPIT_HAVE_X86_KERNELS)
  if (f.x86_avx2()) avx2::fill(k);
  if (f.x86_avxvnni()) avxvnni::fill(k);
  if (f.x86_avx512()) avx512::fill(k, f);
#elif defined(PIPIT_HAVE_ARM_KERNELS)
  if (f.neon) neon::fill(k);
  if (f.dotprod) dotprod::fill(k);
  if (f.i8mm) i8mm::fill(k, f);
#endif
  return k;
}

const Kernels& kernels() {
  static const Kernels k = make_kernels(cpu_features());
  return k;
}

const Kernels& ref_kernels() {
  static const Kernels k = [] {
    Kernels r;
    ref::fill(r);
    return r;
  }();
  return k;
}

}  // namespace pipit
