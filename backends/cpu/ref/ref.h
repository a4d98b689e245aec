// Scalar reference kernels: plain loops, one comment per step. They define what every SIMD kernel must compute.
#pragma once

#include "backends/cpu/kernels.h"

namespace pipit::ref {

void matmul_f32(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_f16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_bf16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_bf16dot(const MatmulArgs& a, int64_t n0, int64_t n1);  // x is bf16 rows (core/dtype.h, BF16DOT)
void matmul_q8_0(const MatmulArgs& a, int64_t n0, int64_t n1);  // x is BlockQ8Act rows
void matmul_q4_0(const MatmulArgs& a, int64_t n0, int64_t n1);  // x is BlockQ8Act rows
void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);  // row-interleaved panels (core/dtype.h)
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_mxfp4(const MatmulArgs& a, int64_t n0, int64_t n1);  // x is BlockQ8Act rows
void matmul_mxfp4x16(const MatmulArgs& a, int64_t n0, int64_t n1);

void quantize_act(const float* x, int64_t x_stride, BlockQ8Act* y, int64_t M, int64_t K);
// Integer dot products of one weight block with one activation block (exact).
int32_t dot_q8_0_block(const BlockQ8_0& w, const BlockQ8Act& a);
int32_t dot_q4_0_block(const BlockQ4_0& w, const BlockQ8Act& a);
// mxfp4: the doubled E2M1 integers (kMxfp4Int8) times the activation's int8 values.
int32_t dot_mxfp4_block(const BlockMXFP4& w, const BlockQ8Act& a);

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps, float w_offset);
void swiglu(const float* gate, const float* up, float* y, int64_t n);
void geglu(const float* gate, const float* up, float* y, int64_t n);
void add(const float* a, const float* b, float* y, int64_t n);
void scale(float* x, float s, int64_t n);
void softmax(float* x, int64_t n);
void gelu(float* x, int64_t n);
void gelu_tanh(float* x, int64_t n);
void quick_gelu(float* x, int64_t n);
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);

// patch-grid ops (patch_ref.cpp, ops_patch.h)
void clamp(float* x, int64_t n, float lo, float hi);
void shift_scale(float* x, int64_t n, float shift, float scale);
void rope_parts(float* v, int64_t head_dim, int64_t n_part, const float* cs);
void pool_block(const float* x, int64_t grid_w, int64_t d, int64_t k, float w, float* y);

void f32_to_f32(const void* src, float* dst, int64_t n);
void f16_to_f32_row(const void* src, float* dst, int64_t n);
void bf16_to_f32_row(const void* src, float* dst, int64_t n);
void q8_0_to_f32(const void* src, float* dst, int64_t n);
void q4_0_to_f32(const void* src, float* dst, int64_t n);
void mxfp4_to_f32(const void* src, float* dst, int64_t n);
void f32_from_f32(const float* src, void* dst, int64_t n);
void f16_from_f32_row(const float* src, void* dst, int64_t n);
void bf16_from_f32_row(const float* src, void* dst, int64_t n);
void q8_0_from_f32(const float* src, void* dst, int64_t n);  // weight quantizers (converter)
void q4_0_from_f32(const float* src, void* dst, int64_t n);
void mxfp4_from_f32(const float* src, void* dst, int64_t n);

void attn_row_f32(const AttnRowArgs& a);
void attn_row_f16(const AttnRowArgs& a);
void attn_row_q8_0(const AttnRowArgs& a);

void causal_conv(const CausalConvArgs& a, int64_t c0, int64_t c1);
void delta_step(const DeltaRuleArgs& a);
void delta_chunk(const DeltaRuleArgs& a);
void rms_norm_gated(const float* x, const float* w, const float* z, float* y, int64_t n, float eps);
// llama.cpp's other block formats (kquant_ref.cpp): dequantization bit-identical to ggml, llama.cpp's reference
// quantizers (q4_1, q5_0, q5_1, q4_K, q5_K, q6_K, q8_K), matmuls against BlockQ8Act rows.
void q4_1_to_f32(const void* src, float* dst, int64_t n);
void q5_0_to_f32(const void* src, float* dst, int64_t n);
void q5_1_to_f32(const void* src, float* dst, int64_t n);
void q2_k_to_f32(const void* src, float* dst, int64_t n);
void q3_k_to_f32(const void* src, float* dst, int64_t n);
void q4_k_to_f32(const void* src, float* dst, int64_t n);
void q5_k_to_f32(const void* src, float* dst, int64_t n);
void q6_k_to_f32(const void* src, float* dst, int64_t n);
void q8_k_to_f32(const void* src, float* dst, int64_t n);
void iq4_nl_to_f32(const void* src, float* dst, int64_t n);
void iq4_xs_to_f32(const void* src, float* dst, int64_t n);
void q4_1_from_f32(const float* src, void* dst, int64_t n);
void q5_0_from_f32(const float* src, void* dst, int64_t n);
void q5_1_from_f32(const float* src, void* dst, int64_t n);
void q4_k_from_f32(const float* src, void* dst, int64_t n);
void q5_k_from_f32(const float* src, void* dst, int64_t n);
void q6_k_from_f32(const float* src, void* dst, int64_t n);
void q8_k_from_f32(const float* src, void* dst, int64_t n);
void matmul_q4_k(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_k(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q6_k(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_xs(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_nl(const MatmulArgs& a, int64_t n0, int64_t n1);
// K-quant panels: the plain kernel above on each unpacked row.
void matmul_q4_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q6_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q2_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q3_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_xsx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_nlx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_1x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_1x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);
// Exact integer dot of group g (32 weights) of a super-block with one activation block (q6_K: the two 16-weight
// halves times their int8 scales, summed; q4_K/q5_K: unsigned q, no min).
int32_t dot_q4_k_group(const BlockQ4_K& w, int g, const BlockQ8Act& a);
int32_t dot_q5_k_group(const BlockQ5_K& w, int g, const BlockQ8Act& a);
int32_t dot_q6_k_group(const BlockQ6_K& w, int g, const BlockQ8Act& a);
int32_t dot_iq4_group(const uint8_t* qs16, const BlockQ8Act& a);
// q2_K / q3_K: the exact integer dots of the two 16-weight halves of group g (weights 32g..) with one activation
// block, unscaled (q2_K: q unsigned 0..3; q3_K: q - 4 * !hbit, -4..3).
void dot_q2_k_halves(const BlockQ2_K& w, int g, const BlockQ8Act& a, int32_t out[2]);
void dot_q3_k_halves(const BlockQ3_K& w, int g, const BlockQ8Act& a, int32_t out[2]);
void fill_kquants(Kernels& k);

void fill(Kernels& k);  // the whole reference table

}  // namespace pipit::ref
