// Shared by the kernel tests: the ISA levels this machine can run (each gets a table from make_kernels and is
// compared with ref_kernels()), seeded random inputs, and strided buffers with guard values around them.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/cpu.h"

namespace pipit::test {

// ISA caps (PIPIT_CPU_MAX_ISA names) whose features this CPU has; "scalar" is ref itself and is skipped.
inline std::vector<std::string> isa_levels() {
  std::vector<std::string> out;
#if defined(__x86_64__)
  if (cpu_features_capped("avx2").x86_avx2()) out.push_back("avx2");
  if (cpu_features_capped("avxvnni").x86_avxvnni()) out.push_back("avxvnni");
  if (cpu_features_capped("avx512").x86_avx512()) out.push_back("avx512");
#elif defined(__aarch64__)
  out.push_back("neon");
  if (cpu_features_capped("dotprod").dotprod) out.push_back("dotprod");
  if (cpu_features_capped("i8mm").i8mm) out.push_back("i8mm");
#endif
  if (out.empty()) out.push_back("scalar");  // keeps the suites non-empty on other targets
  return out;
}

inline const Kernels& kernels_for(const std::string& isa) {
  static std::map<std::string, Kernels> cache;
  auto it = cache.find(isa);
  if (it == cache.end()) it = cache.emplace(isa, make_kernels(cpu_features_capped(isa))).first;
  return it->second;
}

// Fixture parameterized by ISA level: k() is the table under test, r() the reference.
class IsaTest : public ::testing::TestWithParam<std::string> {
 protected:
  const Kernels& k() const { return kernels_for(GetParam()); }
  const Kernels& r() const { return ref_kernels(); }
  // True when entry get(table) of this level is the same function as at a lower level (dotprod keeps NEON's float
  // matmuls, for instance): it was tested there, and testing it again only costs time under qemu.
  template <class Get>
  bool inherited(Get get) const {
    for (const auto& lower : isa_levels()) {
      if (lower == GetParam()) return false;
      if (get(kernels_for(lower)) == get(k())) return true;
    }
    return false;
  }
};

inline std::string isa_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

#define PIPIT_INSTANTIATE_ISA(suite) \
  INSTANTIATE_TEST_SUITE_P(Isa, suite, ::testing::ValuesIn(::pipit::test::isa_levels()), ::pipit::test::isa_name)

struct Rng {
  std::mt19937 gen;
  explicit Rng(uint32_t seed) : gen(seed) {}
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen); }
  int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
  std::vector<float> floats(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = uniform(lo, hi);
    return v;
  }
};

// Byte buffer of rows with a stride, filled with a guard byte so writes outside the rows can be detected.
struct Rows {
  std::vector<uint8_t> bytes;
  int64_t stride = 0;
  Rows(int64_t rows, int64_t stride_bytes, uint8_t guard = 0xA5) : bytes(size_t(rows * stride_bytes + 64), guard), stride(stride_bytes) {}
  uint8_t* row(int64_t r) { return bytes.data() + r * stride; }
  template <class T>
  T* row_as(int64_t r) { return reinterpret_cast<T*>(row(r)); }
};

inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace pipit::test
