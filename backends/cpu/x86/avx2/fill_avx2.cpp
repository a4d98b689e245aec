// AVX2 + FMA + F16C kernels: registers the ones this folder implements (every table entry except the f32 identity
// conversions, which are plain copies, and the q8_0 / q4_0 weight quantizers, which only the converter runs).
#include "backends/cpu/isa.h"
#include "backends/cpu/x86/avx2/kernels_avx2.h"

namespace pipit::avx2 {

void fill(Kernels& k) {
  k.name = "avx2";
  k.causal_conv = causal_conv;
  k.delta_step = delta_step;
  k.delta_chunk = delta_chunk;
  k.rms_norm_gated = rms_norm_gated;
  k.matmul[int(DType::F32)] = matmul_f32;
  k.matmul[int(DType::F16)] = matmul_f16;
  k.matmul[int(DType::BF16)] = matmul_bf16;
  k.matmul[int(DType::Q8_0)] = matmul_q8_0;
  k.matmul[int(DType::Q4_0)] = matmul_q4_0;
  k.matmul[int(DType::MXFP4)] = matmul_mxfp4;
  k.matmul[int(DType::Q8_0X16)] = matmul_q8_0x16;
  k.matmul[int(DType::Q4_0X16)] = matmul_q4_0x16;
  k.matmul[int(DType::MXFP4X16)] = matmul_mxfp4x16;
  k.matmul[int(DType::Q4_K)] = matmul_q4_k;
  k.matmul[int(DType::Q5_K)] = matmul_q5_k;
  k.matmul[int(DType::Q6_K)] = matmul_q6_k;
  k.matmul[int(DType::IQ4_XS)] = matmul_iq4_xs;
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
  k.pack_quant = true;
  k.pack_mxfp4 = true;
  k.pack_kquant = true;
  k.quantize_act = quantize_act;
  k.rms_norm = rms_norm;
  k.swiglu = swiglu;
  k.geglu = geglu;
  k.add = add;
  k.scale = scale;
  k.softmax = softmax;
  k.gelu = gelu;
  k.gelu_tanh = gelu_tanh;
  k.quick_gelu = quick_gelu;
  k.layer_norm = layer_norm;
  k.to_f32[int(DType::F16)] = f16_to_f32_row;
  k.to_f32[int(DType::BF16)] = bf16_to_f32_row;
  k.to_f32[int(DType::Q8_0)] = q8_0_to_f32;
  k.to_f32[int(DType::Q4_0)] = q4_0_to_f32;
  k.from_f32[int(DType::F16)] = f16_from_f32_row;
  k.from_f32[int(DType::BF16)] = bf16_from_f32_row;
  k.attn_row[int(DType::F32)] = attn_row_f32;
  k.attn_row[int(DType::F16)] = attn_row_f16;
  k.attn_row[int(DType::Q8_0)] = attn_row_q8_0;
  k.attn_rows[int(DType::F32)] = attn_rows_f32;
  k.attn_rows[int(DType::F16)] = attn_rows_f16;
  k.attn_rows[int(DType::Q8_0)] = attn_rows_q8_0;
  k.attn_merge = attn_merge;
}

}  // namespace pipit::avx2
