// llama.cpp's other block formats (core/dtype.h): dequantization to f32 computed exactly as ggml's
// dequantize_row_* (same f32 operations in the same order, so the floats are bit-identical), llama.cpp's reference
// quantizers for the formats `pipit convert` writes (quantize_row_*_ref semantics: a pipit-converted tensor gets
// llama-quantize's bytes when llama-quantize runs without an importance matrix), and the reference matmuls against
// BlockQ8Act activations.
//
// Matmul activations: pipit's BlockQ8Act (int8 per 32 with an f32 scale and the block's sum), not ggml's Q8_K (one
// scale per 256). Every K-quant group is 16 or 32 weights, so a group always lies inside one activation block; a
// scale per 32 is more accurate than one per 256, the q4_0/q8_0 path already produces these blocks (one
// quantization of x serves every weight of a layer whatever its type), and the integer part stays exact.
// Per 32-block the result is accumulated with fused multiply-adds in a fixed order that the SIMD kernels reproduce
// lane for lane, so they equal this reference bit for bit:
//   q4_K / q5_K: acc = fma(isum, (d*sc) * da, acc); acc = fma(-(dmin*m), da * sum(a), acc)   (q unsigned)
//   q6_K:        acc = fma(sc0 * isum0 + sc1 * isum1, d * da, acc)                            (q - 32 signed)
//   iq4_xs:      acc = fma(isum, (d*(ls - 32)) * da, acc); iq4_nl: acc = fma(isum, d * da, acc)
//   q5_0:        acc = fma(isum, d * da, acc)     (q - 16 signed; the loader runs it as q8_0x16: its kernels' step)
//   q4_1 / q5_1: acc = fma(isum, d * da, acc); acc = fma(m, da * sum(a), acc)                  (q unsigned)
//   q2_K:        acc = fma(sc0 * isum0 + sc1 * isum1, d * da, acc);
//                acc = fma(m0 * sum0(a) + m1 * sum1(a), -(dmin * da), acc)                     (q unsigned 0..3)
//   q3_K:        acc = fma(sc0 * isum0 + sc1 * isum1, d * da, acc)                  (q - 4 * !hbit, sc - 32 signed)
// (q2_K / q3_K: isum0 / isum1, sum0 / sum1 over the 16-weight halves of the block, each with its own scale.)
// q8_K takes a generic path: each block is dequantized to f32 (the function above) and dotted with the activation
// block in f32. No SIMD kernel exists for it (it is llama.cpp's activation format, not found as weights).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/ref/ref.h"
#include "core/panels.h"

// ggml's formulas as written: no fused multiply-add where they have a product then a sum (GCC contracts across
// statements by default on aarch64, which would change the last bit of q4_1/q5_1/K-quant values there). The fused
// operations below are explicit std::fma calls, the same on every ISA.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace pipit::ref {

namespace {

// ggml's nearest_int: round to nearest even through the f32 adder (|v| <= 2^22).
inline int nearest_int(float v) {
  const float f = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &f, 4);
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace

// ---------------------------------------------------------------- dequantization (== ggml dequantize_row_*)

void q4_1_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4_1*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
    for (int j = 0; j < kQBlock / 2; ++j) {
      const int x0 = x[b].qs[j] & 0x0F, x1 = x[b].qs[j] >> 4;
      y[b * kQBlock + j] = float(x0) * d + m;
      y[b * kQBlock + j + 16] = float(x1) * d + m;
    }
  }
}

void q5_0_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_0*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float d = f16_to_f32(x[b].d);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    for (int j = 0; j < kQBlock / 2; ++j) {
      const int h0 = int(((qh >> j) << 4) & 0x10), h1 = int((qh >> (j + 12)) & 0x10);
      const int x0 = ((x[b].qs[j] & 0x0F) | h0) - 16, x1 = ((x[b].qs[j] >> 4) | h1) - 16;
      y[b * kQBlock + j] = float(x0) * d;
      y[b * kQBlock + j + 16] = float(x1) * d;
    }
  }
}

void q5_1_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_1*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    for (int j = 0; j < kQBlock / 2; ++j) {
      const int h0 = int(((qh >> j) << 4) & 0x10), h1 = int((qh >> (j + 12)) & 0x10);
      const int x0 = (x[b].qs[j] & 0x0F) | h0, x1 = (x[b].qs[j] >> 4) | h1;
      y[b * kQBlock + j] = float(x0) * d + m;
      y[b * kQBlock + j + 16] = float(x1) * d + m;
    }
  }
}

void iq4_nl_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (int j = 0; j < kQBlock / 2; ++j) {
      y[b * kQBlock + j] = d * float(kIq4Values[x[b].qs[j] & 0xf]);
      y[b * kQBlock + j + 16] = d * float(kIq4Values[x[b].qs[j] >> 4]);
    }
  }
}

void q2_k_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ2_K*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d), dmin = f16_to_f32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    int is = 0;
    for (int h = 0; h < kQK; h += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {  // 16 weights from q[0..16), then 16 from q[16..32)
          const uint8_t sc = x[b].scales[is++];
          const float dl = d * float(sc & 0xF), ml = dmin * float(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
      q += 32;
    }
  }
}

// q3_K's 16 six-bit scales (ggml unpacks the 12 bytes through four u32 words: low nibbles / high nibbles, then the
// 2-bit high parts from the last word), minus 32.
void q3_k_scales(const BlockQ3_K& blk, int8_t out[16]) {
  uint32_t aux[4];
  std::memcpy(aux, blk.scales, 12);
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  int8_t s[16];
  std::memcpy(s, aux, 16);
  for (int i = 0; i < 16; ++i) out[i] = int8_t(s[i] - 32);
}

void q3_k_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ3_K*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d_all = f16_to_f32(x[b].d);
    int8_t sc[16];
    q3_k_scales(x[b], sc);
    const uint8_t* q = x[b].qs;
    const uint8_t* hm = x[b].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int h = 0; h < kQK; h += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * float(sc[is++]);
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            *y++ = dl * float(int((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
        m = uint8_t(m << 1);
      }
      q += 32;
    }
  }
}

void q4_k_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4_K*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d), dmin = f16_to_f32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    for (int p = 0; p < 4; ++p, q += 32) {
      uint8_t sc, m;
      kquant_scale_min(2 * p, x[b].scales, &sc, &m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      kquant_scale_min(2 * p + 1, x[b].scales, &sc, &m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

void q5_k_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_K*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d), dmin = f16_to_f32(x[b].dmin);
    const uint8_t* ql = x[b].qs;
    const uint8_t* qh = x[b].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int p = 0; p < 4; ++p, ql += 32) {
      uint8_t sc, m;
      kquant_scale_min(2 * p, x[b].scales, &sc, &m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      kquant_scale_min(2 * p + 1, x[b].scales, &sc, &m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      u1 = uint8_t(u1 << 2);
      u2 = uint8_t(u2 << 2);
    }
  }
}

void q6_k_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d);
    const uint8_t* ql = x[b].ql;
    const uint8_t* qh = x[b].qh;
    const int8_t* sc = x[b].scales;
    for (int h = 0; h < 2; ++h, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

void q8_k_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ8_K*>(src);
  for (int64_t b = 0; b < n / kQK; ++b)
    for (int j = 0; j < kQK; ++j) *y++ = x[b].d * float(x[b].qs[j]);
}

void iq4_xs_to_f32(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(x[b].d);
    const uint8_t* qs = x[b].qs;
    for (int g = 0; g < 8; ++g, y += 32, qs += 16) {
      const float dl = d * float(iq4_xs_scale(x[b], g) - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * float(kIq4Values[qs[j] & 0xf]);
        y[j + 16] = dl * float(kIq4Values[qs[j] >> 4]);
      }
    }
  }
}

// ---------------------------------------------------------------- quantizers (== ggml quantize_row_*_ref)

namespace {

// make_qx_quants for a group with rmse_type 1 (weights x^2) and no importance matrix: the scale of a symmetric
// quantization to [-nmax, nmax - 1], searched over 19 candidate inverse scales around -nmax / max.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {  // GROUP_MAX_EPS: all zero
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -float(nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = int8_t(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(float(nmax) + 0.1f * float(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = int8_t(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// make_qkx2_quants: an asymmetric quantization of a group to [0, nmax] (scale and min), the weighted squared error
// minimized over nstep + 1 candidate scales by a least-squares fit of scale and min for each. Returns the scale;
// *the_min receives -min (>= 0).
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = float(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(std::max(0, std::min(nmax, l)));
    float diff = scale * float(L[i]) + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * float(l);
      sum_l2 += w * float(l) * float(l);
      sum_xl += w * float(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * float(Laux[i]) + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Shared by q4_K (nmax 15) and q5_K (nmax 31): per group of 32 a scale and a min from make_qkx2_quants, both
// quantized to 6 bits against the block maxima, then every weight requantized with the final scales.
void quantize_kx(const float* x, int nmax, float rmin, float rdelta, int nstep, uint8_t scales_out[12], f16_t* d_out,
                 f16_t* dmin_out, uint8_t L[kQK]) {
  float mins[8], scales[8], weights[32];
  uint8_t Laux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(scales_out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = uint8_t(nearest_int(inv_scale * scales[j]));
    uint8_t lm = uint8_t(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      scales_out[j] = ls;
      scales_out[j + 4] = lm;
    } else {
      scales_out[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
      scales_out[j - 4] |= uint8_t((ls >> 4) << 6);
      scales_out[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  *d_out = f32_to_f16(max_scale / 63.f);
  *dmin_out = f32_to_f16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    kquant_scale_min(j, scales_out, &sc, &m);
    const float d = f16_to_f32(*d_out) * float(sc);
    if (d == 0) continue;
    const float dm = f16_to_f32(*dmin_out) * float(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = uint8_t(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

void q4_k_from_f32(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(dst);
  uint8_t L[kQK];
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    quantize_kx(x, 15, -1.f, 0.1f, 20, y[b].scales, &y[b].d, &y[b].dmin, L);
    uint8_t* q = y[b].qs;
    for (int j = 0; j < kQK; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
  }
}

void q5_k_from_f32(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(dst);
  uint8_t L[kQK];
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    quantize_kx(x, 31, -0.5f, 0.1f, 15, y[b].scales, &y[b].d, &y[b].dmin, L);
    uint8_t* qh = y[b].qh;
    uint8_t* ql = y[b].qs;
    std::memset(qh, 0, kQK / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int p = 0; p < kQK; p += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[p + j], l2 = L[p + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = uint8_t(l1 | (l2 << 4));
      }
      m1 = uint8_t(m1 << 2);
      m2 = uint8_t(m2 << 2);
    }
  }
}

void q6_k_from_f32(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(dst);
  int8_t L[kQK];
  float scales[kQK / 16];
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < 1e-15f) {  // an all-zero block
      std::memset(&y[b], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[b].d = f32_to_f16(1 / iscale);
    for (int ib = 0; ib < kQK / 16; ++ib) y[b].scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < kQK / 16; ++j) {
      const float d = f16_to_f32(y[b].d) * float(y[b].scales[j]);
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[b].ql;
    uint8_t* qh = y[b].qh;
    for (int j = 0; j < kQK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l] = uint8_t(q1 | (q3 << 4));
        ql[l + 32] = uint8_t(q2 | (q4 << 4));
        qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                        ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

void q8_k_from_f32(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQK; ++j)
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    if (amax == 0) {
      y[b].d = 0;
      std::memset(y[b].qs, 0, kQK);
      std::memset(y[b].bsums, 0, sizeof(y[b].bsums));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK; ++j) y[b].qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQK / 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * j + i];
      y[b].bsums[j] = int16_t(sum);
    }
    y[b].d = 1 / iscale;
  }
}

void q4_1_from_f32(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t b = 0; b < n / kQBlock; ++b, x += kQBlock) {
    float min = x[0], max = x[0];
    for (int j = 1; j < kQBlock; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 15, id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    y[b].m = f32_to_f16(min);
    for (int j = 0; j < 16; ++j) {
      const uint8_t x0 = std::min<uint8_t>(15, uint8_t(int8_t((x[j] - min) * id + 0.5f)));
      const uint8_t x1 = std::min<uint8_t>(15, uint8_t(int8_t((x[j + 16] - min) * id + 0.5f)));
      y[b].qs[j] = uint8_t(x0 | (x1 << 4));
    }
  }
}

void q5_0_from_f32(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_0*>(dst);
  for (int64_t b = 0; b < n / kQBlock; ++b, x += kQBlock) {
    float amax = 0, max = 0;
    for (int j = 0; j < kQBlock; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -16, id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t x0 = std::min<uint8_t>(31, uint8_t(int8_t(x[j] * id + 16.5f)));
      const uint8_t x1 = std::min<uint8_t>(31, uint8_t(int8_t(x[j + 16] * id + 16.5f)));
      y[b].qs[j] = uint8_t((x0 & 0x0F) | ((x1 & 0x0F) << 4));
      qh |= uint32_t((x0 & 0x10u) >> 4) << j;
      qh |= uint32_t((x1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[b].qh, &qh, 4);
  }
}

void q5_1_from_f32(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_1*>(dst);
  for (int64_t b = 0; b < n / kQBlock; ++b, x += kQBlock) {
    float min = x[0], max = x[0];
    for (int j = 1; j < kQBlock; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 31, id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    y[b].m = f32_to_f16(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t x0 = uint8_t((x[j] - min) * id + 0.5f), x1 = uint8_t((x[j + 16] - min) * id + 0.5f);
      y[b].qs[j] = uint8_t((x0 & 0x0F) | ((x1 & 0x0F) << 4));
      qh |= uint32_t((x0 & 0x10u) >> 4) << j;
      qh |= uint32_t((x1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[b].qh, &qh, 4);
  }
}

// ---------------------------------------------------------------- matmuls against BlockQ8Act rows

namespace {

const BlockQ8Act* act_row(const MatmulArgs& a, int64_t m) {
  return reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + m * a.x_stride);
}
float* out_row(const MatmulArgs& a, int64_t m) {
  return reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + m * a.y_stride);
}

// Every output of rows [n0, n1): the weight blocks of kElems weights in order, each folded into one f32
// accumulator by `step(block, its kElems / 32 activation blocks, acc)`.
template <class Block, int kElems, class Step>
void matmul_blocks(const MatmulArgs& a, int64_t n0, int64_t n1, Step step) {
  const int64_t nb = a.K / kElems;
  for (int64_t m = 0; m < a.M; ++m) {
    const BlockQ8Act* x = act_row(a, m);
    float* y = out_row(a, m);
    for (int64_t n = n0; n < n1; ++n) {
      const auto* w = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a.w) + n * a.w_stride);
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) acc = step(w[b], x + (kElems / kQBlock) * b, acc);
      y[n] = acc;
    }
  }
}

template <class Block, class SuperDot>
void matmul_super(const MatmulArgs& a, int64_t n0, int64_t n1, SuperDot dot) {
  matmul_blocks<Block, kQK>(a, n0, n1, dot);
}

// Generic path: blocks of `elems` weights dequantized to f32, each 32 dotted with an activation block in f32.
template <int kElems>
void matmul_dequant(const MatmulArgs& a, int64_t n0, int64_t n1, ToF32Fn deq, int64_t block_bytes) {
  const int64_t nblk = a.K / kElems;
  float wf[kElems];
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* w = static_cast<const uint8_t*>(a.w) + n * a.w_stride;
    for (int64_t m = 0; m < a.M; ++m) {
      const BlockQ8Act* x = act_row(a, m);
      float acc = 0.0f;
      for (int64_t b = 0; b < nblk; ++b) {
        deq(w + b * block_bytes, wf, kElems);
        for (int j = 0; j < kElems / kQBlock; ++j) {
          const BlockQ8Act& xa = x[b * (kElems / kQBlock) + j];
          float s = 0.0f;
          for (int i = 0; i < kQBlock; ++i) s += wf[kQBlock * j + i] * float(xa.qs[i]);
          acc += s * xa.d;
        }
      }
      out_row(a, m)[n] = acc;
    }
  }
}

}  // namespace

int32_t dot_q4_k_group(const BlockQ4_K& w, int g, const BlockQ8Act& a) {
  const uint8_t* q = w.qs + 32 * (g / 2);
  const int shift = 4 * (g % 2);
  int32_t s = 0;
  for (int l = 0; l < 32; ++l) s += int32_t((q[l] >> shift) & 0xF) * int32_t(a.qs[l]);
  return s;
}

int32_t dot_q5_k_group(const BlockQ5_K& w, int g, const BlockQ8Act& a) {
  const uint8_t* q = w.qs + 32 * (g / 2);
  const int shift = 4 * (g % 2);
  int32_t s = 0;
  for (int l = 0; l < 32; ++l) {
    const int v = ((q[l] >> shift) & 0xF) | (((w.qh[l] >> g) & 1) << 4);
    s += int32_t(v) * int32_t(a.qs[l]);
  }
  return s;
}

int32_t dot_q6_k_group(const BlockQ6_K& w, int g, const BlockQ8Act& a) {
  // group g (32 weights 32g..) lies in half h = g / 4 at sub-position s = g % 4
  const int h = g / 4, s = g % 4;
  const uint8_t* ql = w.ql + 64 * h + (s & 1) * 32;
  const uint8_t* qh = w.qh + 32 * h;
  const int lshift = (s >> 1) * 4, hshift = 2 * s;
  int32_t part[2] = {0, 0};
  for (int l = 0; l < 32; ++l) {
    const int q = int(((ql[l] >> lshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4)) - 32;
    part[l / 16] += q * int32_t(a.qs[l]);
  }
  return int32_t(w.scales[2 * g]) * part[0] + int32_t(w.scales[2 * g + 1]) * part[1];
}

int32_t dot_iq4_group(const uint8_t* qs, const BlockQ8Act& a) {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) {
    s += int32_t(kIq4Values[qs[j] & 0xf]) * int32_t(a.qs[j]);
    s += int32_t(kIq4Values[qs[j] >> 4]) * int32_t(a.qs[j + 16]);
  }
  return s;
}

// Group g (weights 32g + l, l < 32) is bits 2 (g % 4) of qs[32 (g / 4) + l] (core/dtype.h's q2k_quant, unrolled
// over the group); q3_K's high bit is bit g of hmask[l].
void dot_q2_k_halves(const BlockQ2_K& w, int g, const BlockQ8Act& a, int32_t out[2]) {
  const uint8_t* q = w.qs + 32 * (g / 4);
  const int shift = 2 * (g % 4);
  for (int h = 0; h < 2; ++h) {  // two plain loops of 16 (vectorizable)
    int32_t s = 0;
    for (int l = 16 * h; l < 16 * h + 16; ++l) s += int32_t((q[l] >> shift) & 3) * int32_t(a.qs[l]);
    out[h] = s;
  }
}

void dot_q3_k_halves(const BlockQ3_K& w, int g, const BlockQ8Act& a, int32_t out[2]) {
  const uint8_t* q = w.qs + 32 * (g / 4);
  const int shift = 2 * (g % 4);
  for (int h = 0; h < 2; ++h) {
    int32_t s = 0;
    for (int l = 16 * h; l < 16 * h + 16; ++l) {
      const int v = ((q[l] >> shift) & 3) - (((w.hmask[l] >> g) & 1) ? 0 : 4);
      s += int32_t(v) * int32_t(a.qs[l]);
    }
    out[h] = s;
  }
}

namespace {

// Sums of the activation block's two 16-value halves (q2_K's mins).
void half_sums(const BlockQ8Act& a, int32_t out[2]) {
  out[0] = out[1] = 0;
  for (int l = 0; l < 32; ++l) out[l / 16] += a.qs[l];
}

// Q4_K and Q5_K: 8 groups of 32 with a 6-bit scale and min each; a group adds d sc (w . x) - dmin m x.d sum(x).
template <class Block, int32_t (*kDotGroup)(const Block&, int, const BlockQ8Act&)>
void matmul_k_with_mins(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_super<Block>(a, n0, n1, [](const Block& w, const BlockQ8Act* x, float acc) {
    const float d = f16_to_f32(w.d), dmin = f16_to_f32(w.dmin);
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      kquant_scale_min(g, w.scales, &sc, &m);
      acc = std::fma(float(kDotGroup(w, g, x[g])), (d * float(sc)) * x[g].d, acc);
      acc = std::fma(-(dmin * float(m)), x[g].d * float(x[g].sum), acc);
    }
    return acc;
  });
}

}  // namespace

void matmul_q4_k(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_with_mins<BlockQ4_K, dot_q4_k_group>(a, n0, n1);
}

void matmul_q5_k(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_with_mins<BlockQ5_K, dot_q5_k_group>(a, n0, n1);
}

void matmul_q6_k(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_super<BlockQ6_K>(a, n0, n1, [](const BlockQ6_K& w, const BlockQ8Act* x, float acc) {
    const float d = f16_to_f32(w.d);
    for (int g = 0; g < 8; ++g) acc = std::fma(float(dot_q6_k_group(w, g, x[g])), d * x[g].d, acc);
    return acc;
  });
}

void matmul_iq4_xs(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_super<BlockIQ4_XS>(a, n0, n1, [](const BlockIQ4_XS& w, const BlockQ8Act* x, float acc) {
    const float d = f16_to_f32(w.d);
    for (int g = 0; g < 8; ++g)
      acc = std::fma(float(dot_iq4_group(w.qs + 16 * g, x[g])), (d * float(iq4_xs_scale(w, g) - 32)) * x[g].d, acc);
    return acc;
  });
}

void matmul_iq4_nl(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_blocks<BlockIQ4_NL, kQBlock>(a, n0, n1, [](const BlockIQ4_NL& w, const BlockQ8Act* x, float acc) {
    return std::fma(float(dot_iq4_group(w.qs, *x)), f16_to_f32(w.d) * x->d, acc);
  });
}

namespace {

// q4_1 / q5_1: w = d q + m with q unsigned, so a block adds d da (q . a) + m da sum(a), the dot exact in int32.
template <class Block, class Dot>
void matmul_with_min(const MatmulArgs& a, int64_t n0, int64_t n1, Dot dot) {
  matmul_blocks<Block, kQBlock>(a, n0, n1, [dot](const Block& w, const BlockQ8Act* x, float acc) {
    acc = std::fma(float(dot(w, *x)), f16_to_f32(w.d) * x->d, acc);
    return std::fma(f16_to_f32(w.m), x->d * float(x->sum), acc);
  });
}

int32_t dot_q4_1_block(const BlockQ4_1& w, const BlockQ8Act& a) {
  int32_t s = 0;
  for (int j = 0; j < kQBlock / 2; ++j)
    s += int32_t(w.qs[j] & 0x0F) * int32_t(a.qs[j]) + int32_t(w.qs[j] >> 4) * int32_t(a.qs[j + 16]);
  return s;
}

int32_t dot_q5_1_block(const BlockQ5_1& w, const BlockQ8Act& a) {
  uint32_t qh;
  std::memcpy(&qh, w.qh, 4);
  int32_t s = 0;
  for (int j = 0; j < kQBlock / 2; ++j) {
    s += int32_t((w.qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) * int32_t(a.qs[j]);
    s += int32_t((w.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) * int32_t(a.qs[j + 16]);
  }
  return s;
}

}  // namespace

void matmul_q4_1(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_with_min<BlockQ4_1>(a, n0, n1, dot_q4_1_block);
}
// q5_0: the block widened to q8_0 (core/panels.h: exact), its integer dot, then the panel kernels' f32 step (one
// fused multiply-add), which every level's q5_0x16 kernel takes too.
void matmul_q5_0(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_blocks<BlockQ5_0, kQBlock>(a, n0, n1, [](const BlockQ5_0& w, const BlockQ8Act* x, float acc) {
    BlockQ8_0 q;
    q5_0_to_q8_0(w, q);
    return std::fma(float(dot_q8_0_block(q, *x)), f16_to_f32(q.d) * x->d, acc);
  });
}
void matmul_q5_1(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_with_min<BlockQ5_1>(a, n0, n1, dot_q5_1_block);
}
// q2_K: 16 groups of 16 with a 4-bit scale and min each (scales[j] = scale | min << 4); a 32-block adds
// d (sc0 w0 . x0 + sc1 w1 . x1) x.d - dmin (m0 sum x0 + m1 sum x1) x.d, both sums exact in int32.
void matmul_q2_k(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_super<BlockQ2_K>(a, n0, n1, [](const BlockQ2_K& w, const BlockQ8Act* x, float acc) {
    const float d = f16_to_f32(w.d), dmin = f16_to_f32(w.dmin);
    for (int g = 0; g < 8; ++g) {
      int32_t dot[2], sum[2];
      dot_q2_k_halves(w, g, x[g], dot);
      half_sums(x[g], sum);
      const int32_t s0 = w.scales[2 * g], s1 = w.scales[2 * g + 1];
      const int32_t isum = (s0 & 0xF) * dot[0] + (s1 & 0xF) * dot[1];
      const int32_t msum = (s0 >> 4) * sum[0] + (s1 >> 4) * sum[1];
      acc = std::fma(float(isum), d * x[g].d, acc);
      acc = std::fma(float(msum), -(dmin * x[g].d), acc);
    }
    return acc;
  });
}

// q3_K: 16 groups of 16 with a signed 6-bit scale each, q signed; a 32-block adds d (sc0 w0 . x0 + sc1 w1 . x1) x.d.
void matmul_q3_k(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_super<BlockQ3_K>(a, n0, n1, [](const BlockQ3_K& w, const BlockQ8Act* x, float acc) {
    const float d = f16_to_f32(w.d);
    int8_t sc[16];
    q3_k_scales(w, sc);
    for (int g = 0; g < 8; ++g) {
      int32_t dot[2];
      dot_q3_k_halves(w, g, x[g], dot);
      acc = std::fma(float(int32_t(sc[2 * g]) * dot[0] + int32_t(sc[2 * g + 1]) * dot[1]), d * x[g].d, acc);
    }
    return acc;
  });
}
void matmul_q8_k(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_dequant<kQK>(a, n0, n1, q8_k_to_f32, sizeof(BlockQ8_K));
}

namespace {

// K-quant panels (q2_kx16 .. q6_kx16, iq4_xsx16), iq4_nlx16, q4_1x16, q5_0x16, q5_1x16: row n is unpacked from its
// panel to plain blocks (a bit permutation, core/panels.h), then run through the plain matmul above, so a panel gives
// the plain type's results bit for bit.
// n0, n1 need not be multiples of 16 here.
void matmul_k_panel(const MatmulArgs& a, int64_t n0, int64_t n1, DType panel, MatmulFn plain) {
  const int64_t rb = dtype_row_bytes(dtype_unpanel(panel), a.K);
  std::vector<uint8_t> row(static_cast<size_t>(rb));
  for (int64_t n = n0; n < n1; ++n) {
    unpack_panel_rows(panel, static_cast<const uint8_t*>(a.w), a.K, n, n + 1, row.data());
    MatmulArgs r = a;
    r.w = row.data();
    r.w_stride = rb;
    r.y = a.y + n;
    plain(r, 0, 1);
  }
}

}  // namespace

void matmul_q4_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::Q4_KX16, matmul_q4_k);
}
void matmul_q5_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::Q5_KX16, matmul_q5_k);
}
void matmul_q6_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::Q6_KX16, matmul_q6_k);
}
void matmul_q2_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::Q2_KX16, matmul_q2_k);
}
void matmul_q3_kx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::Q3_KX16, matmul_q3_k);
}
void matmul_iq4_xsx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::IQ4_XSX16, matmul_iq4_xs);
}
void matmul_iq4_nlx16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::IQ4_NLX16, matmul_iq4_nl);
}
void matmul_q4_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::Q4_1X16, matmul_q4_1);
}
void matmul_q5_1x16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::Q5_1X16, matmul_q5_1);
}
void matmul_q5_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_k_panel(a, n0, n1, DType::Q5_0X16, matmul_q5_0);
}

void fill_kquants(Kernels& k) {
  struct Entry {
    DType t;
    MatmulFn mm;
    ToF32Fn to;
    FromF32Fn from;
  };
  const Entry entries[] = {
      {DType::Q4_1, matmul_q4_1, q4_1_to_f32, q4_1_from_f32},
      {DType::Q5_0, matmul_q5_0, q5_0_to_f32, q5_0_from_f32},
      {DType::Q5_1, matmul_q5_1, q5_1_to_f32, q5_1_from_f32},
      {DType::Q2_K, matmul_q2_k, q2_k_to_f32, nullptr},
      {DType::Q3_K, matmul_q3_k, q3_k_to_f32, nullptr},
      {DType::Q4_K, matmul_q4_k, q4_k_to_f32, q4_k_from_f32},
      {DType::Q5_K, matmul_q5_k, q5_k_to_f32, q5_k_from_f32},
      {DType::Q6_K, matmul_q6_k, q6_k_to_f32, q6_k_from_f32},
      {DType::Q8_K, matmul_q8_k, q8_k_to_f32, q8_k_from_f32},
      {DType::IQ4_NL, matmul_iq4_nl, iq4_nl_to_f32, nullptr},
      {DType::IQ4_XS, matmul_iq4_xs, iq4_xs_to_f32, nullptr},
  };
  k.matmul[int(DType::Q4_KX16)] = matmul_q4_kx16;
  k.matmul[int(DType::Q5_KX16)] = matmul_q5_kx16;
  k.matmul[int(DType::Q6_KX16)] = matmul_q6_kx16;
  k.matmul[int(DType::Q2_KX16)] = matmul_q2_kx16;
  k.matmul[int(DType::Q3_KX16)] = matmul_q3_kx16;
  k.matmul[int(DType::IQ4_XSX16)] = matmul_iq4_xsx16;
  k.matmul[int(DType::IQ4_NLX16)] = matmul_iq4_nlx16;
  k.matmul[int(DType::Q4_1X16)] = matmul_q4_1x16;
  k.matmul[int(DType::Q5_1X16)] = matmul_q5_1x16;
  k.matmul[int(DType::Q5_0X16)] = matmul_q5_0x16;
  for (const Entry& e : entries) {
    k.matmul[int(e.t)] = e.mm;
    k.to_f32[int(e.t)] = e.to;
    k.from_f32[int(e.t)] = e.from;
  }
}

}  // namespace pipit::ref
