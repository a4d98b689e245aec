// Reference matmuls: y[m, n] = sum_k x[m, k] * w[n, k], accumulated in f32 in index order.
// Quantized weights use integer dot products per block of 32: y += (d_w * d_a) * sum_i(w_i * a_i).
#include "backends/cpu/ref/ref.h"
#include "core/panels.h"

#include <vector>

namespace pipit::ref {

namespace {

// x rows of X (f32, or bf16 for bf16dot) read as f32 by load_x, weights by load
template <class X = float, class Load, class LoadX = float (*)(X)>
void matmul_float(const MatmulArgs& a, int64_t n0, int64_t n1, Load load, LoadX load_x = [](X v) { return float(v); }) {
  for (int64_t m = 0; m < a.M; ++m) {
    const X* x = reinterpret_cast<const X*>(static_cast<const uint8_t*>(a.x) + m * a.x_stride);
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + m * a.y_stride);
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* w = static_cast<const uint8_t*>(a.w) + n * a.w_stride;
      float acc = 0.0f;
      for (int64_t k = 0; k < a.K; ++k) acc += load_x(x[k]) * load(w, k);
      y[n] = acc;
    }
  }
}

// The scale of a weight block: q8_0 / q4_0 an f16 d, mxfp4 2^(e - 128) (exact).
inline float block_scale(const BlockQ8_0& b) { return f16_to_f32(b.d); }
inline float block_scale(const BlockQ4_0& b) { return f16_to_f32(b.d); }
inline float block_scale(const BlockMXFP4& b) { return e8m0_half_to_f32(b.e); }

template <class Block, class Dot>
void matmul_quant(const MatmulArgs& a, int64_t n0, int64_t n1, Dot dot) {
  const int64_t nb = a.K / kQBlock;
  for (int64_t m = 0; m < a.M; ++m) {
    const auto* x = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + m * a.x_stride);
    float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + m * a.y_stride);
    for (int64_t n = n0; n < n1; ++n) {
      const auto* w = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a.w) + n * a.w_stride);
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) acc += block_scale(w[b]) * x[b].d * float(dot(w[b], x[b]));
      y[n] = acc;
    }
  }
}

// Panel dtypes (q4_0x16, q8_0x16, mxfp4x16): row n's blocks are unpacked from its panel, then summed exactly as the
// plain blocks. n0 and n1 need not be multiples of 16 here; a.w_stride is the plain row size, so a panel is 16 strides.
template <class Block, class Dot>
void matmul_panel(const MatmulArgs& a, int64_t n0, int64_t n1, DType panel, Dot dot) {
  const int64_t nb = a.K / kQBlock;
  std::vector<Block> row(static_cast<size_t>(nb));
  for (int64_t n = n0; n < n1; ++n) {
    unpack_panel_rows(panel, static_cast<const uint8_t*>(a.w), a.K, n, n + 1, reinterpret_cast<uint8_t*>(row.data()));
    for (int64_t m = 0; m < a.M; ++m) {
      const auto* x = reinterpret_cast<const BlockQ8Act*>(static_cast<const uint8_t*>(a.x) + m * a.x_stride);
      float* y = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.y) + m * a.y_stride);
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) acc += block_scale(row[b]) * x[b].d * float(dot(row[b], x[b]));
      y[n] = acc;
    }
  }
}

}  // namespace

void matmul_f32(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_float(a, n0, n1, [](const uint8_t* w, int64_t k) { return reinterpret_cast<const float*>(w)[k]; });
}
void matmul_f16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_float(a, n0, n1, [](const uint8_t* w, int64_t k) { return f16_to_f32(reinterpret_cast<const f16_t*>(w)[k]); });
}
void matmul_bf16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_float(a, n0, n1,
               [](const uint8_t* w, int64_t k) { return bf16_to_f32(reinterpret_cast<const bf16_t*>(w)[k]); });
}

// bf16dot (core/dtype.h): x arrives as bf16 rows (ops rounds it once, to nearest even); each product of two bf16
// values is exact in f32, summed in f32 in index order.
void matmul_bf16dot(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_float<bf16_t>(
      a, n0, n1, [](const uint8_t* w, int64_t k) { return bf16_to_f32(reinterpret_cast<const bf16_t*>(w)[k]); },
      bf16_to_f32);
}

int32_t dot_q8_0_block(const BlockQ8_0& w, const BlockQ8Act& a) {
  int32_t s = 0;
  for (int i = 0; i < kQBlock; ++i) s += int32_t(w.qs[i]) * int32_t(a.qs[i]);
  return s;
}

int32_t dot_q4_0_block(const BlockQ4_0& w, const BlockQ8Act& a) {
  int32_t s = 0;
  for (int j = 0; j < kQBlock / 2; ++j) {
    s += (int32_t(w.qs[j] & 0x0f) - 8) * int32_t(a.qs[j]);           // low nibble: weight j
    s += (int32_t(w.qs[j] >> 4) - 8) * int32_t(a.qs[j + kQBlock / 2]);  // high nibble: weight j + 16
  }
  return s;
}

int32_t dot_mxfp4_block(const BlockMXFP4& w, const BlockQ8Act& a) {
  int32_t s = 0;
  for (int j = 0; j < kQBlock / 2; ++j) {
    s += int32_t(kMxfp4Int8[w.qs[j] & 0x0f]) * int32_t(a.qs[j]);              // low nibble: element j
    s += int32_t(kMxfp4Int8[w.qs[j] >> 4]) * int32_t(a.qs[j + kQBlock / 2]);  // high nibble: element j + 16
  }
  return s;
}

// mxfp4: y += (2^(e - 128) * d_a) * sum_i(2 w_i * a_i); the block scale is exact, so only the activation's int8
// rounding separates this from the f32 product.
void matmul_mxfp4(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_quant<BlockMXFP4>(a, n0, n1, dot_mxfp4_block); }

void matmul_q8_0(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_quant<BlockQ8_0>(a, n0, n1, dot_q8_0_block); }
void matmul_q4_0(const MatmulArgs& a, int64_t n0, int64_t n1) { matmul_quant<BlockQ4_0>(a, n0, n1, dot_q4_0_block); }
void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_panel<BlockQ8_0>(a, n0, n1, DType::Q8_0X16, dot_q8_0_block);
}
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_panel<BlockQ4_0>(a, n0, n1, DType::Q4_0X16, dot_q4_0_block);
}

void matmul_mxfp4x16(const MatmulArgs& a, int64_t n0, int64_t n1) {
  matmul_panel<BlockMXFP4>(a, n0, n1, DType::MXFP4X16, dot_mxfp4_block);
}

}  // namespace pipit::ref
