// CPUID (x86) / HWCAP (Arm) feature detection.
#include "core/cpu.h"

#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1 << 10)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#endif

namespace pipit {

namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    f.fma = c & (1u << 12);
    f.f16c = c & (1u << 29);
    bool osxsave = c & (1u << 27);
    unsigned long long xcr0 = 0;
    if (osxsave) {
      unsigned lo, hi;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      xcr0 = (unsigned long long)hi << 32 | lo;
    }
    bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
      f.avx2 = ymm && (b & (1u << 5));
      f.avx512f = zmm && (b & (1u << 16));
      f.avx512dq = zmm && (b & (1u << 17));
      f.avx512bw = zmm && (b & (1u << 30));
      f.avx512vl = zmm && (b & (1u << 31));
      f.avx512vnni = zmm && (c & (1u << 11));
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
      f.avxvnni = ymm && (a & (1u << 4));
      f.avx512bf16 = zmm && (a & (1u << 5));
    }
    if (!ymm) f.fma = f.f16c = false;
  }
#elif defined(__aarch64__)
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.neon = true;  // mandatory in AArch64
  f.fp16 = hw & HWCAP_ASIMDHP;
  f.dotprod = hw & HWCAP_ASIMDDP;
  f.i8mm = hw2 & HWCAP2_I8MM;
  f.bf16 = hw2 & HWCAP2_BF16;
#endif
  return f;
}

void apply_cap(CpuFeatures& f, const std::string& cap) {
  if (cap.empty()) return;
  if (cap == "scalar") {
    f = CpuFeatures{};
    return;
  }
  if (cap == "avx2" || cap == "avxvnni") {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512vnni = f.avx512bf16 = false;
    if (cap == "avx2") f.avxvnni = false;
  } else if (cap == "avx512") {
    // keep everything
  } else if (cap == "neon") {
    f.dotprod = f.i8mm = f.bf16 = false;
  } else if (cap == "dotprod") {
    f.i8mm = f.bf16 = false;
  }
}

}  // namespace

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&](bool b, const char* n) {
    if (b) s += std::string(s.empty() ? "" : " ") + n;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avxvnni, "avxvnni");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512vnni, "avx512vnni");
  add(avx512bf16, "avx512bf16");
  add(neon, "neon");
  add(fp16, "fp16");
  add(dotprod, "dotprod");
  add(i8mm, "i8mm");
  add(bf16, "bf16");
  return s.empty() ? "scalar" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    const char* cap = std::getenv("PIPIT_CPU_MAX_ISA");
    return cpu_features_capped(cap ? cap : "");
  }();
  return f;
}

CpuFeatures cpu_features_capped(const std::string& max_isa) {
  CpuFeatures f = detect();
  apply_cap(f, max_isa);
  return f;
}

}  // namespace pipit
