// CPU feature detection, done once. Kernel dispatch reads it to fill its table.
// PIPIT_CPU_MAX_ISA=scalar|avx2|avxvnni|avx512|neon|dotprod|i8mm caps what is used, so tests can cover the lower paths.
#pragma once

#include <string>

namespace pipit {

struct CpuFeatures {
  // x86
  bool avx2 = false, fma = false, f16c = false;
  bool avxvnni = false;  // VEX-encoded vpdpbusd on ymm (Alder Lake and later, Zen 5): AVX2 CPUs without AVX-512
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false, avx512bf16 = false;
  // arm
  bool neon = false, fp16 = false, dotprod = false, i8mm = false, bf16 = false;  // bf16: FEAT_BF16 (bfdot, bfmmla)

  bool x86_avx2() const { return avx2 && fma && f16c; }
  bool x86_avxvnni() const { return x86_avx2() && avxvnni; }
  bool x86_avx512() const { return x86_avx2() && avx512f && avx512bw && avx512vl && avx512dq; }
  std::string describe() const;
};

// Features of this CPU after applying PIPIT_CPU_MAX_ISA.
const CpuFeatures& cpu_features();
// Features with an explicit cap ("scalar", "avx2", ...); used by tests to enumerate variants.
CpuFeatures cpu_features_capped(const std::string& max_isa);

}  // namespace pipit
