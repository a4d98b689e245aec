// Reference attention for one query row: scores = scale * q . k_j for visible keys j, optional tanh soft-cap,
// softmax, then out = sum_j p_j v_j. K/V rows are f32, f16 or q8_0 (the KV cache dtype).
#include <cmath>

#include "backends/cpu/ref/ref.h"

namespace pipit::ref {

namespace {

template <class Load>
void attn_row(const AttnRowArgs& a, Load load) {
  const int64_t n = a.k1 - a.k0;
  float* s = a.scratch;
  const uint8_t* kb = static_cast<const uint8_t*>(a.k);
  const uint8_t* vb = static_cast<const uint8_t*>(a.v);
  // row of the j-th visible key: a wrapped ring continues at row 0
  auto row = [&](int64_t j) { return a.ring > 0 && a.k0 + j >= a.ring ? a.k0 + j - a.ring : a.k0 + j; };
  for (int64_t j = 0; j < n; ++j) {  // scores
    const uint8_t* k = kb + row(j) * a.kv_stride;
    float dot = 0.0f;
    for (int64_t d = 0; d < a.head_dim; ++d) dot += a.q[d] * load(k, d);
    float sc = dot * a.scale;
    if (a.softcap > 0.0f) sc = a.softcap * std::tanh(sc / a.softcap);
    s[j] = sc;
  }
  softmax(s, with_sink(s, n, a.has_sink, a.sink));
  for (int64_t d = 0; d < a.head_dim; ++d) a.out[d] = 0.0f;
  for (int64_t j = 0; j < n; ++j) {  // weighted values
    const uint8_t* v = vb + row(j) * a.kv_stride;
    for (int64_t d = 0; d < a.head_dim; ++d) a.out[d] += s[j] * load(v, d);
  }
}

}  // namespace

void attn_row_f32(const AttnRowArgs& a) {
  attn_row(a, [](const uint8_t* p, int64_t d) { return reinterpret_cast<const float*>(p)[d]; });
}
void attn_row_f16(const AttnRowArgs& a) {
  attn_row(a, [](const uint8_t* p, int64_t d) { return f16_to_f32(reinterpret_cast<const f16_t*>(p)[d]); });
}

// q8_0 (the quantized KV cache): head_dim a multiple of 32, each head's row its own q8_0 blocks; element d is
// d_block * q as float, the same product every ISA forms before its multiply-add.
void attn_row_q8_0(const AttnRowArgs& a) {
  attn_row(a, [](const uint8_t* p, int64_t d) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p) + (d >> 5);
    return f16_to_f32(b->d) * float(b->qs[d & 31]);
  });
}

void fill(Kernels& k) {
  k.name = "ref";
  k.matmul[int(DType::F32)] = matmul_f32;
  k.matmul[int(DType::F16)] = matmul_f16;
  k.matmul[int(DType::BF16)] = matmul_bf16;
  k.matmul[int(DType::BF16DOT)] = matmul_bf16dot;
  k.matmul[int(DType::Q8_0)] = matmul_q8_0;
  k.matmul[int(DType::Q4_0)] = matmul_q4_0;
  k.matmul[int(DType::Q8_0X16)] = matmul_q8_0x16;
  k.matmul[int(DType::Q4_0X16)] = matmul_q4_0x16;
  k.matmul[int(DType::MXFP4)] = matmul_mxfp4;
  k.matmul[int(DType::MXFP4X16)] = matmul_mxfp4x16;
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
  k.to_f32[int(DType::F32)] = f32_to_f32;
  k.to_f32[int(DType::F16)] = f16_to_f32_row;
  k.to_f32[int(DType::BF16)] = bf16_to_f32_row;
  k.to_f32[int(DType::BF16DOT)] = bf16_to_f32_row;
  k.to_f32[int(DType::Q8_0)] = q8_0_to_f32;
  k.to_f32[int(DType::Q4_0)] = q4_0_to_f32;
  k.to_f32[int(DType::MXFP4)] = mxfp4_to_f32;
  k.from_f32[int(DType::F32)] = f32_from_f32;
  k.from_f32[int(DType::F16)] = f16_from_f32_row;
  k.from_f32[int(DType::BF16)] = bf16_from_f32_row;
  k.from_f32[int(DType::Q8_0)] = q8_0_from_f32;
  k.from_f32[int(DType::Q4_0)] = q4_0_from_f32;
  k.from_f32[int(DType::MXFP4)] = mxfp4_from_f32;
  k.attn_row[int(DType::F32)] = attn_row_f32;
  k.attn_row[int(DType::F16)] = attn_row_f16;
  k.attn_row[int(DType::Q8_0)] = attn_row_q8_0;
  k.causal_conv = causal_conv;
  k.delta_step = delta_step;
  k.delta_chunk = delta_chunk;
  k.rms_norm_gated = rms_norm_gated;
  fill_kquants(k);
}

}  // namespace pipit::ref
