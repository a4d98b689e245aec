// Reference quantizers and dequantizers. Weight quantizers follow llama.cpp's q8_0 / q4_0 reference rounding so a
// tensor quantized by pipit and by llama.cpp gets the same bytes.
#include <algorithm>
#include <cmath>

#include "backends/cpu/ref/ref.h"

namespace pipit::ref {

void quantize_act(const float* x, int64_t x_stride, BlockQ8Act* y, int64_t M, int64_t K) {
  const int64_t nb = K / kQBlock;
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(x) + m * x_stride);
    BlockQ8Act* yr = y + m * nb;
    for (int64_t b = 0; b < nb; ++b) {
      const float* v = xr + b * kQBlock;
      float amax = 0.0f;  // scale so that the largest magnitude maps to 127
      for (int i = 0; i < kQBlock; ++i) amax = std::fmax(amax, std::fabs(v[i]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      int32_t sum = 0;
      for (int i = 0; i < kQBlock; ++i) {
        int q = int(std::nearbyint(v[i] * id));  // round half to even
        yr[b].qs[i] = int8_t(q);
        sum += q;
      }
      yr[b].d = d;
      yr[b].sum = sum;
    }
  }
}

void q8_0_from_f32(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float* v = src + b * kQBlock;
    float amax = 0.0f;
    for (int i = 0; i < kQBlock; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int i = 0; i < kQBlock; ++i) y[b].qs[i] = int8_t(std::round(v[i] * id));  // round half away from zero
  }
}

void q4_0_from_f32(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float* v = src + b * kQBlock;
    // the value of largest magnitude (with its sign) maps to -8, so the full [-8, 7] range is used on one side
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < kQBlock; ++i)
      if (std::fabs(v[i]) > amax) {
        amax = std::fabs(v[i]);
        max = v[i];
      }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int j = 0; j < kQBlock / 2; ++j) {
      int q0 = std::min(15, int(int8_t(v[j] * id + 8.5f)));
      int q1 = std::min(15, int(int8_t(v[j + kQBlock / 2] * id + 8.5f)));
      y[b].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

// mxfp4 as ggml's reference quantizer: exponent floor(log2(amax)) - 2 (so amax / 2^e lands in [4, 8): E2M1's
// largest values), each element the nearest doubled E2M1 value of v / 2^(e - 128), the first code on ties.
void mxfp4_from_f32(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockMXFP4*>(dst);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float* v = src + b * kQBlock;
    float amax = 0.0f;
    for (int i = 0; i < kQBlock; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    const int e = amax > 0.0f ? std::clamp(int(std::floor(std::log2(amax))) - 2 + 127, 0, 254) : 0;
    const float d = e8m0_half_to_f32(uint8_t(e));
    auto best = [&](float x) {
      int bi = 0;
      float be = std::fabs(float(kMxfp4Int8[0]) * d - x);
      for (int i = 1; i < 16; ++i) {
        const float err = std::fabs(float(kMxfp4Int8[i]) * d - x);
        if (err < be) bi = i, be = err;
      }
      return uint8_t(bi);
    };
    y[b].e = uint8_t(e);
    for (int j = 0; j < kQBlock / 2; ++j) y[b].qs[j] = uint8_t(best(v[j]) | (best(v[j + kQBlock / 2]) << 4));
  }
}

void mxfp4_to_f32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockMXFP4*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float d = e8m0_half_to_f32(x[b].e);
    for (int j = 0; j < kQBlock / 2; ++j) {
      dst[b * kQBlock + j] = d * float(kMxfp4Int8[x[b].qs[j] & 0x0f]);
      dst[b * kQBlock + j + kQBlock / 2] = d * float(kMxfp4Int8[x[b].qs[j] >> 4]);
    }
  }
}

void q8_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (int i = 0; i < kQBlock; ++i) dst[b * kQBlock + i] = d * float(x[b].qs[i]);
  }
}

void q4_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (int j = 0; j < kQBlock / 2; ++j) {
      dst[b * kQBlock + j] = d * float(int(x[b].qs[j] & 0x0f) - 8);
      dst[b * kQBlock + j + kQBlock / 2] = d * float(int(x[b].qs[j] >> 4) - 8);
    }
  }
}

void f32_to_f32(const void* src, float* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
}
void f16_to_f32_row(const void* src, float* dst, int64_t n) {
  const f16_t* s = static_cast<const f16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
}
void bf16_to_f32_row(const void* src, float* dst, int64_t n) {
  const bf16_t* s = static_cast<const bf16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}
void f32_from_f32(const float* src, void* dst, int64_t n) {
  float* d = static_cast<float*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = src[i];
}
void f16_from_f32_row(const float* src, void* dst, int64_t n) {
  f16_t* d = static_cast<f16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
}
void bf16_from_f32_row(const float* src, void* dst, int64_t n) {
  bf16_t* d = static_cast<bf16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
}

}  // namespace pipit::ref
