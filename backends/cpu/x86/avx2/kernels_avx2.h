// The AVX2 kernels of this folder, registered by fill_avx2.cpp. Signatures are the table's (backends/cpu/kernels.h).
#pragma once

#include "backends/cpu/kernels.h"

namespace pipit::avx2 {

void matmul_f32(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_f16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_bf16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q8_0(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_0(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_mxfp4(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);  // panels (core/dtype.h)
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_mxfp4x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_k(const MatmulArgs& a, int64_t n0, int64_t n1);  // llama.cpp super-block formats
void matmul_q5_k(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q6_k(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_xs(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);  // their panels
void matmul_q5_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q6_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q2_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q3_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_xsx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_nlx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_1x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_1x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);

void quantize_act(const float* x, int64_t x_stride, BlockQ8Act* y, int64_t M, int64_t K);

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

void f16_to_f32_row(const void* src, float* dst, int64_t n);
void bf16_to_f32_row(const void* src, float* dst, int64_t n);
void q8_0_to_f32(const void* src, float* dst, int64_t n);
void q4_0_to_f32(const void* src, float* dst, int64_t n);
void f16_from_f32_row(const float* src, void* dst, int64_t n);
void bf16_from_f32_row(const float* src, void* dst, int64_t n);

void attn_row_f32(const AttnRowArgs& a);
void attn_row_f16(const AttnRowArgs& a);
void attn_row_q8_0(const AttnRowArgs& a);
void attn_rows_f32(const AttnRowsArgs& a);  // chunked; attn_row for several rows at once, bit-identical per row
void attn_rows_f16(const AttnRowsArgs& a);
void attn_rows_q8_0(const AttnRowsArgs& a);
void attn_merge(const float* states, int64_t n, int64_t head_dim, bool has_sink, float sink, float* scratch,
                float* out);

void causal_conv(const CausalConvArgs& a, int64_t c0, int64_t c1);
void delta_step(const DeltaRuleArgs& a);
void delta_chunk(const DeltaRuleArgs& a);
void rms_norm_gated(const float* x, const float* w, const float* z, float* y, int64_t n, float eps);

}  // namespace pipit::avx2
