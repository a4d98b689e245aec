// Software prefetch for the panel kernels' decode (one activation row streaming every panel from DRAM), shared by
// every ISA.
//
// q4_0x16 / q8_0x16 / mxfp4x16 (prefetch_panel_ahead): a thread streams its panels in address order, and the
// hardware prefetchers alone left the q4_0 GEMV short of the read bandwidth: kernels_bench
// gemv/avx512/q4_0x16/K=1024/N=151936, 1 thread, 33-37 GB/s, 39-43 with a software prefetch 16 blocks (4.6 KB) ahead;
// `pipit bench` Qwen3-0.6B Q4_0 tg128 at 2 threads, alternating in one run: 101-113 -> 115-136 tok/s (32 blocks ahead:
// no better; q8_0 at the same distance in bytes: +2-4%, within the noise). The 256-bit x86 levels use the same
// distance (gemv avxvnni/q4_0x16 at that shape: 2.49-2.74 -> 2.34-2.55 ms; avx2 within the noise: closer to
// compute-bound there), and so does Arm dotprod (not measured: no Arm hardware here).
//
// K-quant panels (q4_kx16 / q5_kx16 / q6_kx16, prefetch_kpanel_share):
// A panel super-block (2.4-3.4 KB) is read as several interleaved streams (scales, quant bits, quants), which the
// hardware prefetchers follow poorly from DRAM: q6_K decode of a 151936 x 1024 output head (bench/kernels_bench
// gemv/avx512/q6_kx16/K=1024/N=151936) ran at 17.6 GB/s against 46 GB/s with its panels in L2, and at 26-35 GB/s with
// this. So while it works on group g of super-block s, a kernel fetches the g-th eighth of the super-block kAhead
// blocks further on. kAhead 2 (4.6-6.7 KB ahead, about kDecodeAheadBytes) rather than 4: Qwen3-0.6B Q4_K_M tg128 at 2
// threads, alternating binaries in one run, 6 of 6 pairs faster (mean 81.3 -> 91.4 tok/s); 1 thread and Q6_K at 2
// threads within noise; 8 and 12 were 15-25% slower. Panels lie one after another, so past a panel's end that is the
// next panel's start; past the weights' end it is a harmless prefetch (a prefetch never faults).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pipit {

constexpr int64_t kDecodeAheadBytes = 4608;

// The block about kDecodeAheadBytes after block b of a panel. Past a panel's end the next panel lies right after;
// past the weights' end a prefetch never faults.
template <class Block>
inline void prefetch_panel_ahead(const Block* panel, int64_t b) {
  constexpr int64_t kAhead = kDecodeAheadBytes / int64_t(sizeof(Block));
  const char* p = reinterpret_cast<const char*>(panel + b + kAhead);
  for (size_t o = 0; o < sizeof(Block); o += 64) __builtin_prefetch(p + o, 0, 3);
}

template <class Block>
inline void prefetch_kpanel_share(const Block* panel, int64_t s, int g) {
  constexpr int64_t kAhead = 2;
  constexpr int kShare = int((sizeof(Block) + 7) / 8);
  const char* p = reinterpret_cast<const char*>(panel + s + kAhead) + g * kShare;
  for (int b = 0; b < kShare; b += 64) __builtin_prefetch(p + b, 0, 3);
}

}  // namespace pipit
