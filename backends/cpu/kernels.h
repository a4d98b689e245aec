// The kernel table: one function pointer per (op, dtype), filled once at start-up from the CPU's features
// (dispatch.cpp). ref/ holds the scalar versions — the spec every SIMD variant is tested against.
// Kernels work on raw pointers over a row range so that ops.cpp can split work across threads; they never allocate.
#pragma once

#include <cstdint>
#include <string>

#include "core/cpu.h"
#include "core/dtype.h"

namespace pipit {

// Activations quantized on the fly for integer matmuls (w8a8, w4a8): int8 per block of 32 with an f32 scale and the
// sum of the block's int8 values (lets kernels fold q4's "-8" offset and unsigned x signed dot products).
struct BlockQ8Act {
  float d;
  int32_t sum;
  int8_t qs[kQBlock];
};
static_assert(sizeof(BlockQ8Act) == 40);

// y[m, n] = sum_k x[m, k] * w[n, k] for m in [0, M), n in [n0, n1).
// x: M rows of K activations (f32 rows, BlockQ8Act rows for quantized weights, bf16 rows for bf16dot), row stride
// x_stride bytes.
// w: weight rows of K elements in the weight dtype, row stride w_stride bytes. y: f32, row stride y_stride bytes.
struct MatmulArgs {
  const void* x;
  int64_t x_stride;
  const void* w;
  int64_t w_stride;
  float* y;
  int64_t y_stride;
  int64_t M, K;
};
using MatmulFn = void (*)(const MatmulArgs& a, int64_t n0, int64_t n1);

// Quantize M rows of K floats (K % 32 == 0) into BlockQ8Act rows.
using QuantizeActFn = void (*)(const float* x, int64_t x_stride, BlockQ8Act* y, int64_t M, int64_t K);

// Element-wise / row kernels on contiguous f32 rows of n elements.
using RmsNormFn = void (*)(const float* x, const float* w, float* y, int64_t n, float eps, float w_offset);
using SwigluFn = void (*)(const float* gate, const float* up, float* y, int64_t n);   // silu(gate) * up
using GegluFn = void (*)(const float* gate, const float* up, float* y, int64_t n);    // gelu_tanh(gate) * up
using AddFn = void (*)(const float* a, const float* b, float* y, int64_t n);
using ScaleFn = void (*)(float* x, float s, int64_t n);
using SoftmaxFn = void (*)(float* x, int64_t n);  // in place, max-subtracted
// The vision towers' activations, in place over n elements: gelu (erf: 0.5 x (1 + erf(x / sqrt 2))), gelu_tanh
// (gelu_pytorch_tanh), quick_gelu (x sigmoid(1.702 x), CLIP / Qwen2-VL).
using ActFn = void (*)(float* x, int64_t n);
// LayerNorm over n elements: y = (x - mean) / sqrt(var + eps) * w + b, biased variance (nn.LayerNorm).
using LayerNormFn = void (*)(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
// Row conversion to f32 (embedding lookup, dequantization): n elements of dtype -> f32.
using ToF32Fn = void (*)(const void* src, float* dst, int64_t n);
using FromF32Fn = void (*)(const float* src, void* dst, int64_t n);

// Attention for one query row over keys/values: out = softmax(scale * q . K^T [+ mask]) V.
// K/V rows are head_dim elements of kv_dtype (f32 or f16), stride kv_stride bytes between consecutive positions.
// Keys [k0, k1) are visible. When softcap > 0, scores become softcap * tanh(score / softcap).
// ring > 0: the keys wrap around a ring buffer of `ring` rows: key j is at row j for j < ring and at row j - ring
// after (k0 < ring < k1 <= k0 + ring), i.e. two contiguous segments [k0, ring) then [0, k1 - ring), in that order.
// has_sink (GPT-OSS attention sinks): one more logit, `sink`, joins the softmax and its probability is dropped, so
// the weights of the keys sum to less than 1; the scratch then needs one more float.
struct AttnRowArgs {
  const float* q;
  const void* k;
  const void* v;
  int64_t kv_stride;
  float* out;
  float* scratch;  // attn_scratch_floats(1, k1 - k0, head_dim) floats
  int64_t head_dim, k0, k1;
  float scale, softcap;
  int64_t ring = 0;
  bool has_sink = false;
  float sink = 0.0f;
};
// The length to hand the softmax over the scores s[0, n): with a sink it goes in s[n] and takes part.
inline int64_t with_sink(float* s, int64_t n, bool has_sink, float sink) {
  if (!has_sink) return n;
  s[n] = sink;
  return n + 1;
}
using AttnRowFn = void (*)(const AttnRowArgs& a);

// Attention for up to kAttnMaxRows query rows that share K/V (the heads of a GQA group, consecutive tokens) and the
// first visible key k0: row i sees keys [k0, k1[i]). A kernel must give each row exactly (bit for bit) what its
// attn_row gives for that row alone, so results never depend on how queries are grouped (prefill chunking, batch
// composition); grouping only lets K/V rows be loaded and converted once for all rows.
constexpr int kAttnMaxRows = 64;
struct AttnRowsArgs {
  int n_q;
  const float* q[kAttnMaxRows];
  float* out[kAttnMaxRows];
  int64_t k1[kAttnMaxRows];
  const void* k;
  const void* v;
  int64_t kv_stride;
  float* scratch;  // attn_scratch_floats(n_q, max k1 - k0, head_dim) floats
  int64_t head_dim, k0;
  float scale, softcap;
  int64_t ring = 0;  // as AttnRowArgs::ring
  bool has_sink = false;  // as AttnRowArgs: row i's sink logit is sink[i]
  float sink[kAttnMaxRows];
  // Split over keys (a decode step over a long context, so that every thread has a share of one token's work):
  // with state[0] set, each row's keys [k0, k1[i]) are one chunk (at most kAttnChunk keys, see below) and row i
  // writes that chunk's state to state[i] instead of its output; attn_merge combines a row's chunk states. Only
  // levels that set attn_merge read this (ops never sets it for the others).
  float* state[kAttnMaxRows] = {};
};
using AttnRowsFn = void (*)(const AttnRowsArgs& a);

// Chunked attention (levels with attn_merge): a row's keys are taken in chunks of kAttnChunk from its first key k0.
// A chunk's state is {m, l, o[head_dim]}: m = its largest score, l = sum_j e^(s_j - m), o = sum_j e^(s_j - m) v_j
// (head_dim + 2 floats). States combine in key order, acc = fold(acc, next): m' = max(m_a, m_c), l' = l_a e^(m_a - m')
// + l_c e^(m_c - m'), o likewise; the output is o / l (with a sink, its e^(sink - m) joins l). attn_rows folds the
// chunks of a row as it goes, attn_merge folds states written by split jobs with the same code, so a row's result
// is the same bits whichever way (and with however many threads) it was computed.
constexpr int64_t kAttnChunk = 256;
// out = the fold of n chunk states (state c at states + c * (head_dim + 2)), with the sink logit when has_sink.
// scratch: head_dim + 2 floats.
using AttnMergeFn = void (*)(const float* states, int64_t n, int64_t head_dim, bool has_sink, float sink,
                             float* scratch, float* out);
// Scratch floats attn_row / attn_rows may use for n_q rows of up to n_keys keys: every score of every row (the
// levels that keep whole rows) plus, for the chunked levels, a chunk of scores, o and state per row and one block
// of 64 keys converted to f32.
inline int64_t attn_scratch_floats(int64_t n_q, int64_t n_keys, int64_t head_dim) {
  const int64_t hdp = (head_dim + 15) / 16 * 16;
  return n_q * (n_keys + 1) + 4 * head_dim + n_q * (kAttnChunk + 32 + 3 * hdp) + 64 * hdp + 64;
}

// ---- linear attention (Gated DeltaNet, Qwen3.5) ----
// Depthwise causal conv1d + SiLU over channels [c0, c1) of n tokens that continue a window of the K previous
// inputs: y[t][c] = silu(sum_j w[j][c] * in[t - K + 1 + j][c]), where inputs before this call come from `state`.
struct CausalConvArgs {
  const float* x;    // n rows of C inputs, x_stride floats apart
  int64_t x_stride;
  float* y;          // n rows of C outputs, y_stride floats apart (never x)
  int64_t y_stride;
  float* state;      // [K, C]: the last K inputs before this call, oldest first; the last K after it on return
  const float* w;    // [K, C]: HF's conv1d.weight [C, 1, K] transposed (tap-major, so channels are contiguous)
  int64_t n, C, K;
};
using CausalConvFn = void (*)(const CausalConvArgs& a, int64_t c0, int64_t c1);

// The gated delta rule for one value head of one sequence over n tokens, on its state S [dk, dv] (row d of S is
// key dimension d), updated in place. Per token t, with decay exp(g_t) and write strength beta_t:
//   S = exp(g_t) S;  S += k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T q_t
// q and k are already L2-normalised and q scaled by dk^-0.5. `delta_step` runs exactly this, token by token
// (decode); `delta_chunk` computes the same in chunks of kDeltaChunk tokens (HF torch_chunk_gated_delta_rule):
// within a chunk the writes are solved as one unit-lower-triangular system, so the state is read and written once
// per chunk instead of once per token (prefill).
constexpr int64_t kDeltaChunk = 64;
struct DeltaRuleArgs {
  const float* q;       // token t: q + t * qk_stride (dk floats)
  const float* k;
  int64_t qk_stride;
  const float* v;       // token t: v + t * v_stride (dv floats)
  int64_t v_stride;
  const float* g;       // token t: g[t * gb_stride] (log decay, <= 0)
  const float* beta;    // token t: beta[t * gb_stride]
  int64_t gb_stride;
  float* out;           // token t: out + t * out_stride (dv floats)
  int64_t out_stride;
  float* state;         // [dk, dv]
  float* scratch;       // delta_chunk: delta_rule_scratch(dk, dv) floats; delta_step: dv floats
  int64_t n, dk, dv;
};
using DeltaRuleFn = void (*)(const DeltaRuleArgs& a);
inline int64_t delta_rule_scratch(int64_t dk, int64_t dv) {
  return kDeltaChunk * (2 * kDeltaChunk + dk + dv + 1);
}
// Qwen3_5RMSNormGated: y = w * x / sqrt(mean(x^2) + eps) * silu(z) over n elements.
using RmsNormGatedFn = void (*)(const float* x, const float* w, const float* z, float* y, int64_t n, float eps);

struct Kernels {
  std::string name;  // "ref", "avx2", "avx512", "neon", "dotprod", "i8mm"
  MatmulFn matmul[int(DType::kCount)] = {};
  QuantizeActFn quantize_act = nullptr;
  RmsNormFn rms_norm = nullptr;
  SwigluFn swiglu = nullptr;
  GegluFn geglu = nullptr;
  AddFn add = nullptr;
  ScaleFn scale = nullptr;
  SoftmaxFn softmax = nullptr;
  ActFn gelu = nullptr, gelu_tanh = nullptr, quick_gelu = nullptr;
  LayerNormFn layer_norm = nullptr;
  ToF32Fn to_f32[int(DType::kCount)] = {};
  FromF32Fn from_f32[int(DType::kCount)] = {};
  AttnRowFn attn_row[int(DType::kCount)] = {};  // indexed by kv dtype
  AttnRowsFn attn_rows[int(DType::kCount)] = {};  // optional: ops falls back to attn_row per row
  AttnMergeFn attn_merge = nullptr;  // set by levels whose attn_rows are chunked and write states (split decode)
  CausalConvFn causal_conv = nullptr;
  DeltaRuleFn delta_step = nullptr, delta_chunk = nullptr;
  RmsNormGatedFn rms_norm_gated = nullptr;
  // q4_0 / q8_0 weights run faster as 16-row panels (q4_0x16, q8_0x16) here: the loader packs them once.
  bool pack_quant = false;
  // q2_K .. q6_K / iq4_xs / iq4_nl / q4_1 / q5_1 weights likewise as q2_kx16 .. q6_kx16 / iq4_xsx16 / iq4_nlx16 /
  // q4_1x16 / q5_1x16 (set where panel kernels for all of them exist).
  bool pack_kquant = false;
  // mxfp4 (GPT-OSS experts, 2-D or stacked 3-D) likewise as mxfp4x16 (set where a panel mxfp4 kernel exists).
  bool pack_mxfp4 = false;
  // Native bf16 dot products (AVX512-BF16 vdpbf16ps, Arm BF16 bfmmla): matmul[BF16DOT] runs at twice the f32 FMA
  // rate, so the loader turns f16 / bf16 matrices into bf16dot under LoadOptions::precision fast. Elsewhere bf16dot
  // has only the scalar ref.
  bool bf16_dot = false;
};

// The table for this CPU (PIPIT_CPU_MAX_ISA caps it). Built once.
const Kernels& kernels();
// A table for an explicit feature set: tests build one per ISA level the machine supports.
Kernels make_kernels(const CpuFeatures& f);
// Scalar reference table.
const Kernels& ref_kernels();

}  // namespace pipit
