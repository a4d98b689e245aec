// Scalar f16 conversions (IEEE binary16, round to nearest even) and dtype names.
#include "core/dtype.h"

#include <cmath>

namespace pipit {

bool dtype_from_name(std::string_view name, DType* out) {
  for (int i = 0; i < int(DType::kCount); ++i) {
    if (kDTypeInfo[i].name == name) {
      *out = DType(i);
      return true;
    }
  }
  return false;
}

float f16_to_f32(f16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: value = man * 2^-24
      float f = std::ldexp(float(man), -24);
      std::memcpy(&u, &f, 4);
      u |= sign;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

f16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return f16_t(sign | 0x7e00);      // NaN
  if (abs >= 0x477ff000u) return f16_t(sign | 0x7c00);     // overflow (>= 65520 rounds to inf) or inf
  if (abs < 0x38800000u) {                                 // below the smallest normal 2^-14: subnormal or zero
    // value / 2^-24 rounded to nearest even, computed exactly in float (the product is exact).
    float a;
    std::memcpy(&a, &abs, 4);
    float m = std::nearbyint(a * 16777216.0f);  // 2^24; default rounding mode = nearest even
    return f16_t(sign | uint32_t(m));
  }
  // normal: rebias exponent, round mantissa 23 -> 10 bits to nearest even
  uint32_t r = abs + 0x0fffu + ((abs >> 13) & 1);
  r -= (127 - 15) << 23;
  return f16_t(sign | (r >> 13));
}

}  // namespace pipit
