// Software prefetch for the K-quant panel kernels (q4_kx16 / q5_kx16 / q6_kx16), shared by every ISA.
// A panel super-block (2.4-3.4 KB) is read as several interleaved streams (scales, quant bits, quants), which the
// hardware prefetchers follow poorly from DRAM: q6_K decode of a 151936 x 1024 output head (bench/kernels_bench
// gemv/avx512/q6_kx16/K=1024/N=151936) ran at 17.6 GB/s against 46 GB/s with its panels in L2, and at 26-35 GB/s
// with this. So while it works on group g of super-block s, a kernel fetches the g-th eighth of the super-block
// kAhead blocks further on. Panels lie one after another, so past a panel's end that is the next panel's start;
// past the weights' end it is a harmless prefetch (a prefetch never faults).
#pragma once

#include <cstdint>

namespace pipit {

template <class Block>
inline void prefetch_kpanel_share(const Block* panel, int64_t s, int g) {
  constexpr int64_t kAhead = 4;
  constexpr int kShare = int((sizeof(Block) + 7) / 8);
  const char* p = reinterpret_cast<const char*>(panel + s + kAhead) + g * kShare;
  for (int b = 0; b < kShare; b += 64) __builtin_prefetch(p + b, 0, 3);
}

}  // namespace pipit
