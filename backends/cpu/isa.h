// Entry points of the per-ISA kernel folders: each fills the table entries it implements.
#pragma once

#include "backends/cpu/kernels.h"

namespace pipit {
namespace avx2 { void fill(Kernels& k); }
namespace avxvnni { void fill(Kernels& k); }
namespace avx512 { void fill(Kernels& k, const CpuFeatures& f); }
namespace neon { void fill(Kernels& k); }
namespace dotprod { void fill(Kernels& k); }
namespace i8mm { void fill(Kernels& k, const CpuFeatures& f); }
}  // namespace pipit
