// The op API that models call, the same on every device. Each op checks shapes and dtypes (PIPIT_ASSERT: a
// mismatch here is a bug in a model, files are validated at load), allocates its output from the context's arena
// and runs on ctx.device(): this CPU (backends/cpu/cpu_device.h, the default) or another Device
// (backends/device.h: OpenCL today). Activations are f32. A model calls only these: no kernel tables, no loops over
// tensor data (docs/contributing.md: adding an op).
#pragma once

#include <bitset>
#include <initializer_list>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/threads.h"

namespace pipit {

class Device;    // backends/device.h
struct Kernels;  // backends/cpu/kernels.h: the CPU's kernel table (only CPU code looks inside)

// Every op of this file by name: what a device says it implements (Device::supports) and what a model says it
// needs (Model::ops_used), so that placement is decided by capabilities, never by model names. Variants a device
// may lack have their own entry (attention with sinks or a soft-cap). kHostLoops is not an op: a model that still
// reads or writes activations through host pointers declares it, and only the CPU has it.
#define PIPIT_OPS(X)                                                                                              \
  X(kToF32, "to_f32") X(kLinear, "linear") X(kLinearGated, "linear_gated") X(kEmbedding, "embedding")             \
  X(kRmsNorm, "rms_norm") X(kRmsNormHeads, "rms_norm_heads") X(kGated, "gated") X(kAdd, "add") X(kScale, "scale") \
  X(kSoftmax, "softmax") X(kGatherRows, "gather_rows") X(kCopyRows, "copy_rows") X(kRope, "rope")                \
  X(kRopeMulti, "rope_multi") X(kStoreKv, "store_kv") X(kAttention, "attention")                                  \
  X(kAttentionSinks, "attention with sinks") X(kAttentionSoftcap, "attention with a soft-cap")                    \
  X(kCausalConv1dSilu, "causal_conv1d_silu") X(kL2NormGroups, "l2_norm_groups") X(kDeltaGates, "delta_gates")     \
  X(kGatedDeltaRule, "gated_delta_rule") X(kRmsNormGated, "rms_norm_gated") X(kLayerNorm, "layer_norm")           \
  X(kActivation, "activation") X(kAttentionSegments, "attention_segments") X(kClamp, "clamp")                     \
  X(kShiftScale, "shift_scale") X(kRopeParts, "rope_parts") X(kPoolGrid, "pool_grid") X(kGlu, "glu")              \
  X(kDepthwiseConv1dCausal, "depthwise_conv1d_causal") X(kConv2d3x3S2, "conv2d_3x3_s2")                           \
  X(kLocalRelAttention, "local_rel_attention")                                                                    \
  X(kCopy, "copy") X(kFill, "fill") X(kScaleChannels, "scale_channels") X(kConv2d, "conv2d")                      \
  X(kWindowPartition, "window_partition") X(kWindowUnpartition, "window_unpartition")                             \
  X(kRelPosAttention, "rel_pos_attention") X(kResizeBicubicAa, "resize_bicubic_aa")                               \
  X(kResizeBilinearAligned, "resize_bilinear_aligned")                                                            \
  X(kMoeRoute, "moe_route") X(kAddRowsScaled, "add_rows_scaled")                                                   \
  X(kSwigluClamped, "swiglu_clamped") X(kSigmoidMul, "sigmoid_mul") X(kSoftcap, "softcap") X(kAddRows, "add_rows")  \
  X(kHostLoops, "host loops over activations")

enum class Op {
#define PIPIT_OP_ENUM(id, name) id,
  PIPIT_OPS(PIPIT_OP_ENUM)
#undef PIPIT_OP_ENUM
  kCount
};
const char* op_name(Op op);
using OpSet = std::bitset<size_t(Op::kCount)>;
OpSet op_set(std::initializer_list<Op> ops);

// Everything an op needs: where activations go, who runs them, on which device, and the debug hook that sees every
// named intermediate (parity tests and `--dump` use it).
struct Ctx {
  Arena* arena;
  ThreadPool* pool;
  const Kernels* k;  // the CPU's kernels (tests pin an ISA level here); read only by backends/cpu
  std::function<void(const std::string& name, int layer, const Tensor& t)> on_tensor;
  // rope_'s cos/sin table for the last (positions, frequencies, scale) it saw: every layer of a forward pass
  // rotates by the same angles, so they are computed once per pass.
  struct RopeTable {
    std::vector<int32_t> pos;
    const float* inv_freq = nullptr;
    size_t n_freq = 0;
    float mscale = 0.0f;
    std::vector<float> cs;  // [n_tokens, 2 * n_freq]: cos then sin
  } rope_table = {};
  // The device the activations live on (null: this CPU). When set, the arena hands out device memory and every op
  // below runs on the device; the model code is the same.
  Device* dev = nullptr;
  // When set, every op called through this context is recorded (tests check a model's Model::ops_used with it).
  OpSet* ops_seen = nullptr;

  Device& device() const;  // *dev, or the CPU
  void seen(Op op) const {
    if (ops_seen) ops_seen->set(size_t(op));
  }
  Tensor name(const Tensor& t, const char* n, int layer = -1);  // a device tensor is read back for the hook
  Tensor alloc(DType dt, const std::vector<int64_t>& shape) { return Tensor::arena(*arena, dt, shape); }
};

// The CPU as a device (backends/cpu/ops.cpp): what Ctx::device() is without ctx.dev.
Device& cpu_device();
// The kernel table of this CPU's best ISA level (backends/cpu/dispatch.cpp): what a front end puts in Ctx::k.
const Kernels& kernels();

// y = x @ w^T (+ bias). x: [n_tokens, K] f32; w: [N, K] in any weight dtype; bias: [N] f32/bf16/f16 or undefined.
Tensor linear(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());
// y_i = x @ w_i^T (+ b_i) for up to 4 weights sharing x (q/k/v): x is quantized once and one parallel job covers
// the rows of all of them. Biases may be undefined tensors. ys[i] receives [n_tokens, N_i].
void linear_multi(Ctx& ctx, const Tensor& x, std::span<const Tensor* const> ws, std::span<const Tensor* const> biases,
                  std::span<Tensor* const> ys);
// act(x @ gate^T) * (x @ up^T) (SwiGLU / GeGLU): both matmuls and the activation run chunk by chunk of output
// columns in one parallel job, so each chunk is combined while it is still in cache.
enum class GateAct { kSilu, kGeluTanh };
Tensor linear_gated(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& up, GateAct act);
// Rows of `table` ([n_vocab, n_embd], any dtype) for each id, as f32 [n_ids, n_embd].
Tensor embedding(Ctx& ctx, const Tensor& table, std::span<const int32_t> ids);
// RMSNorm over the last dim, weight any float dtype: y = norm(x) * (w_offset + w).
Tensor rms_norm(Ctx& ctx, const Tensor& x, const Tensor& w, float eps, float w_offset = 0.0f);
// In-place RMSNorm of every head_dim row of x ([n_tokens, n_head, head_dim]): Qwen3/Gemma3 q_norm / k_norm.
void rms_norm_heads_(Ctx& ctx, Tensor& x, const Tensor& w, float eps, float w_offset = 0.0f);
Tensor swiglu(Ctx& ctx, const Tensor& gate, const Tensor& up);  // silu(gate) * up
Tensor geglu(Ctx& ctx, const Tensor& gate, const Tensor& up);   // gelu_tanh(gate) * up
void add_(Ctx& ctx, Tensor& x, const Tensor& y);                // x += y (same shape)
void scale_(Ctx& ctx, Tensor& x, float s);
Tensor to_f32(Ctx& ctx, const Tensor& x);                       // any dtype -> f32 copy (contiguous)
void softmax_(Ctx& ctx, Tensor& x);                             // softmax over the last dim, in place

// ---- moving rows (the edges of a forward pass) ----
// Rows `rows` of x ([n, d] f32) as a new [rows.size(), d] tensor (the rows that want logits).
Tensor gather_rows(Ctx& ctx, const Tensor& x, std::span<const int64_t> rows);
// dst row i = src row src_row[i] for every src_row[i] >= 0 (image features spliced into token embeddings). src is a
// host f32 tensor [rows, >= dst.dim(1)] (its first dst.dim(1) columns are used); dst is where the ops run.
void copy_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src);
// x as a host tensor: x itself on the CPU; a copy read back from the device otherwise (logits out).
Tensor to_host(Ctx& ctx, const Tensor& x);

// RoPE with HF's rotate_half convention on x [n_tokens, n_head, head_dim], in place. `inv_freq` has rot_dim/2
// entries (rot_dim <= head_dim: partial rotary leaves the tail untouched); angle = pos * inv_freq[i] * (1 / attn
// factor applied by the caller via cos/sin scale `mscale`).
void rope_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const float> inv_freq, float mscale = 1.0f);

// RoPE (rotate_half) where frequency i of token t turns by pos[stream[i] * n_tokens + t] * inv_freq[i]: `pos` holds
// several position streams of n_tokens each, `stream` names the stream of every frequency. Qwen2-VL's M-RoPE uses
// streams (t, h, w) split by mrope_section; its vision RoPE uses (h, w). With one stream this is rope_().
void rope_multi_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const uint8_t> stream,
                 std::span<const float> inv_freq);

// ---- linear attention (Gated DeltaNet; CPU: backends/cpu/ops_linear_attn.cpp) ----
// Depthwise causal conv1d + SiLU over x [n, C] (rows may be strided) for one sequence, continuing the window in
// `state` ([K, C] f32, updated to the last K inputs); w: [K, C] f32. Writes y [n, C] (rows may be strided).
void causal_conv1d_silu(Ctx& ctx, const Tensor& x, Tensor& state, const Tensor& w, Tensor& y);
// In place: every group of `group` consecutive elements of each row of x ([rows, n], rows may be strided)
// becomes x * rsqrt(sum(x^2) + eps) * scale (HF / FLA l2norm; scale folds in the query's dk^-0.5).
void l2_norm_groups_(Ctx& ctx, Tensor& x, int64_t group, float eps, float scale = 1.0f);
// In place on [n, n_head] rows: a -> g = -exp(A_log) * softplus(a + dt_bias) (log decay), b -> beta = sigmoid(b).
// A_log, dt_bias: [n_head] f32.
void delta_gates_(Ctx& ctx, Tensor& a, Tensor& b, const Tensor& A_log, const Tensor& dt_bias);
// The gated delta rule (kernels.h: DeltaRuleArgs) for the sequences of a batch. q, k: [n, n_k_head * dk] and
// v: [n, n_v_head * dv] (rows may be strided: views into the conv output); g, beta: [n, n_v_head]; out:
// [n, n_v_head * dv] contiguous. Value head h reads key head h / (n_v_head / n_k_head) (HF repeat_interleave).
// Each sequence's tokens [begin, begin + n) update its state ([n_v_head, dk, dv] f32): one token runs the
// recurrent step, more the chunked form.
struct DeltaSeq {
  int64_t begin, n;
  Tensor state;
};
void gated_delta_rule(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t dk, int64_t dv,
                      const Tensor& g, const Tensor& beta, std::span<const DeltaSeq> seqs, Tensor& out);
// Qwen3_5RMSNormGated over the last dim: y = w * norm(x) * silu(z); x, z: [rows, n] contiguous, w: [n] f32.
Tensor rms_norm_gated(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& z, float eps);

// ---- vision encoder ops (CPU: backends/cpu/ops_vision.cpp) ----
// LayerNorm over the last dim: y = (x - mean) / sqrt(var + eps) * w + b (biased variance, as torch).
Tensor layer_norm(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& b, float eps);
// Elementwise activations in place (one device op, Op::kActivation, with the function as a parameter).
enum class Act { kGelu, kGeluTanh, kQuickGelu, kSilu };
void activation_(Ctx& ctx, Tensor& x, Act act);
inline void gelu_(Ctx& ctx, Tensor& x) { activation_(ctx, x, Act::kGelu); }             // erf GELU (nn.GELU())
inline void gelu_tanh_(Ctx& ctx, Tensor& x) { activation_(ctx, x, Act::kGeluTanh); }    // gelu_pytorch_tanh
inline void quick_gelu_(Ctx& ctx, Tensor& x) { activation_(ctx, x, Act::kQuickGelu); }  // x * sigmoid(1.702 x)
inline void silu_(Ctx& ctx, Tensor& x) { activation_(ctx, x, Act::kSilu); }              // x * sigmoid(x)
// Bidirectional attention inside segments: query rows [cu[s], cu[s+1]) see exactly the key rows of their segment
// (Qwen2-VL cu_seqlens, Qwen2.5-VL windows, one CLIP image). q: [n, n_head, head_dim]; k, v: [n, n_head_kv,
// head_dim] f32 whose head rows are contiguous (rows may be strided); out: [n, n_head, head_dim] contiguous.
// Memory: a tile of 32 rows of scores per thread (32 x the longest segment), never an n x n matrix.
void attention_segments(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, std::span<const int32_t> cu,
                        float scale, Tensor& out);

// Causal attention of q [n_tokens, n_head, head_dim] against cached keys/values of one sequence.
// k_cache/v_cache: [n_rows, n_head_kv, head_dim] (f32 or f16). Query i sees cache positions
// [max(0, pos[i] - window + 1), pos[i]] (window <= 0: no window). GQA: head h reads kv head h / (n_head / n_head_kv).
// ring: the cache is a sliding-window ring (needs window > 0): position p is at row p % n_rows, and every position a
// query sees must still be there (the caller bounds the chunk; see KvCache).
// sinks: optional per-query-head sink logits ([n_head] f32, GPT-OSS): each head's softmax has one more logit whose
// probability is dropped (see AttnRowArgs::has_sink).
struct AttnParams {
  float scale;
  float softcap = 0.0f;
  int window = 0;
  bool ring = false;
  const float* sinks = nullptr;
};
// Writes into `out` ([n_tokens, n_head, head_dim] f32, may be a view into a larger batch output).
void attention(Ctx& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> pos,
               const AttnParams& p, Tensor& out);

// Writes rows of src ([n_tokens, n_head_kv, head_dim] f32) into dst cache rows at positions pos (converting dtype);
// ring: at rows pos % dst.dim(0).
void store_kv(Ctx& ctx, const Tensor& src, Tensor& dst, std::span<const int32_t> pos, bool ring = false);

// ---- ops over vision patches (Gemma 4's vision tower; CPU: backends/cpu/ops_patch.cpp) ----
// In place, f32 rows (may be strided between rows): x = min(max(x, lo), hi) (torch.clamp).
void clamp_(Ctx& ctx, Tensor& x, float lo, float hi);
// In place, f32 rows: x = (x + shift) * scale.
void shift_scale_(Ctx& ctx, Tensor& x, float shift, float scale);
// x [n_tokens, n_head, head_dim] f32 contiguous, in place: head_dim is split into n_part equal parts and part d of
// token t is rotated (HF rotate_half inside the part) by pos[d * n_tokens + t] * inv_freq[i], i < head_dim / n_part
// / 2 (HF apply_multidimensional_rope; Gemma 4 vision: n_part 2, x then y). cos / sin in float32 as HF.
void rope_parts_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, int n_part, std::span<const float> inv_freq);
// x [grid_h * grid_w, d] f32 (row-major grid) -> [(grid_h / k) * (grid_w / k), d]: each output row the mean of a
// k x k block (sum of x / k^2 terms, HF Gemma4VisionPooler's one-hot matmul), output blocks row-major. grid_h and
// grid_w must be multiples of k.
Tensor pool_grid(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t k);

// ---- audio encoder ops (Gemma 4's conformer; CPU: backends/cpu/ops_audio.cpp) ----
// torch GLU over the last dim: x [n, 2C] -> a * sigmoid(b), a = columns [0, C), b = [C, 2C).
Tensor glu(Ctx& ctx, const Tensor& x);

// Depthwise causal conv1d over time: x [T, C] f32, w [C, K] f32 (torch Conv1d(C, C, K, groups=C) weight [C, 1, K]),
// y[t][c] = sum_j w[c][j] * x[t - (K - 1) + j][c], inputs before t = 0 read as 0 (left pad K - 1).
Tensor depthwise_conv1d_causal(Ctx& ctx, const Tensor& x, const Tensor& w);

// torch Conv2d(Cin, Cout, 3, stride=2, padding=1, bias=False) on a channels-last input x [H, W, Cin] f32;
// w [Cout, Cin * 9] (the [Cout, Cin, 3, 3] weight flattened, any weight dtype). Returns [H', W', Cout] with
// H' = (H - 1) / 2 + 1 (same for W). Built as im2col over a block of output rows + linear, so the im2col buffer
// stays small whatever H is.
Tensor conv2d_3x3_s2(Ctx& ctx, const Tensor& x, const Tensor& w);

// Local self-attention with relative-position logits and a soft-cap (Gemma 4's audio attention, which HF computes
// over blocks of `chunk` queries with a Transformer-XL rel-shift; the same numbers, written per query): query i of
// q [T, n_head, hd] sees keys j in [i - window + 1, i], j >= 0; logit = q_i . k_j + q_i . rel_k[i - j], then
// softcap * tanh(logit / softcap) (softcap > 0), softmax over the keys it sees, times v. rel_k: [window, n_head,
// hd] f32, row d = the relative key of distance d. k, v: [T, n_head, hd] f32 contiguous. Returns [T, n_head, hd].
Tensor local_rel_attention(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel_k,
                           int window, float softcap);

// ---- encoder layout and convolution ops (DeepSeek-OCR, CLIP, Qwen and Gemma 4 towers; CPU only today:
// backends/cpu/ops_encoder.cpp) ----
// dst = src element by element: f32, the same shape, any strides on either side (concatenation into slices,
// permutes through transposed views, heap copies of arena tensors). The two must not overlap.
void copy_(Ctx& ctx, Tensor& dst, const Tensor& src);
// A heap copy of x (f32): it outlives the arena's next reset (residual streams, a tower's output).
inline Tensor heap_copy(Ctx& ctx, const Tensor& x) {
  Tensor h = Tensor::empty(DType::F32, x.shape());
  copy_(ctx, h, x);
  return h;
}
// x = value everywhere (f32, any strides).
void fill_(Ctx& ctx, Tensor& x, float value);
// In place, per channel: x[..., c] = x[..., c] * w[c]; x f32 rows (may be strided), w f32 [x.dim(-1)] contiguous.
void scale_channels_(Ctx& ctx, Tensor& x, const Tensor& w);
// torch Conv2d(Cin, Cout, kernel, stride, padding) (+ bias) on a channels-last input x [H, W, Cin] f32 with any
// strides (a [3, H, W] image goes in as a permuted view); w [Cout, Cin * kernel^2] (the torch weight flattened, any
// weight dtype); bias [Cout] or undefined. Returns [Ho, Wo, Cout], Ho = (H + 2 padding - kernel) / stride + 1 (same
// for W). im2col over blocks of output rows + linear.
Tensor conv2d(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, int64_t kernel, int64_t stride,
              int64_t padding);
// SAM's window_partition: x [grid_h * grid_w, C] (a row-major grid) zero-padded to multiples of `win` and cut into
// windows: [n_win * win * win, C], windows row-major, tokens row-major inside a window (n_win = ceil(grid_h / win)
// * ceil(grid_w / win)).
Tensor window_partition(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t win);
// The inverse (window_unpartition): windows back to the [grid_h * grid_w, C] grid, the padding dropped.
Tensor window_unpartition(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t win);
// SAM / ViTDet attention with decomposed relative positions inside each of n_win windows of win_h x win_w tokens.
// qkv [n_win * win_h * win_w, 3 * n_head * hd] f32 contiguous (rows window-major, row-major inside a window; columns
// q, k, v, each heads x hd). rel_h [Lh, hd], rel_w [Lw, hd] (any float dtype) are linearly interpolated
// (F.interpolate "linear", align_corners false) to 2 win - 1 rows when their length differs (get_rel_pos). Query i
// at (qh, qw), key j at (kh, kw): logit = q.k / sqrt(hd) + q.Rh[qh - kh + win_h - 1] + q.Rw[qw - kw + win_w - 1],
// softmax over the window, times v. Returns [n_win * win_h * win_w, n_head * hd].
Tensor rel_pos_attention(Ctx& ctx, const Tensor& qkv, int64_t n_win, int64_t win_h, int64_t win_w, int64_t n_head,
                         const Tensor& rel_h, const Tensor& rel_w);
// torch F.interpolate(mode="bicubic", antialias=True, align_corners=False) of a channels-last grid x [h, w, C] f32
// contiguous -> [out_h, out_w, C], computed in float as torch's _upsample_bicubic2d_aa (Keys a = -0.5, support
// widened when shrinking, weights normalised to sum 1; width pass, then height). DeepSeek-OCR's position tables.
Tensor resize_bicubic_aa(Ctx& ctx, const Tensor& x, int64_t out_h, int64_t out_w);
// Bilinear resize of x [h, w, C] f32 contiguous -> [out_h, out_w, C] at torch.linspace(0, side - 1, out) sample
// points (align_corners true), Qwen3-VL's fast_pos_embed_interpolate: floor, floor + 1 clipped, weights in float32,
// the four rows summed in HF's order (00, 01, 10, 11).
Tensor resize_bilinear_aligned(Ctx& ctx, const Tensor& x, int64_t out_h, int64_t out_w);
// ---- decoder ops: mixture-of-experts routing and combining, gates, soft-cap, row adds (CPU:
// backends/cpu/ops_moe.cpp, ops_decoder.cpp) ----
// A router's choice per token (HF Qwen3MoeSparseMoeBlock, DeepseekV2MoE, Gemma4TextRouter: kSoftmaxTopK; HF
// GptOssTopKRouter: kTopKSoftmax) from logits [n_tokens, n_expert] f32: the k experts of each row, largest first
// (ties: the lower expert index), with weights in this order:
//  kSoftmaxTopK: p = softmax(logits row) in f32, w = p[e]; renormalize: w = w / sum of the k kept (summed in k order);
//  kTopKSoftmax: w = softmax over the k kept logits (exp(l - l_max) / sum; renormalize is moot);
// then w = w * scale (skipped when scale == 1), then w = w * expert_scale[e] (when given, [n_expert]).
enum class MoeOrder { kSoftmaxTopK, kTopKSoftmax };
struct MoeRouteParams {
  int64_t k = 1;  // experts per token
  MoeOrder order = MoeOrder::kSoftmaxTopK;
  bool renormalize = false;
  float scale = 1.0f;                   // DeepSeek routed_scaling_factor
  std::span<const float> expert_scale;  // Gemma 4 per_expert_scale (host values, like AttnParams::sinks)
};
struct MoeRoutes {
  Tensor sel;  // [n_tokens, k] i32 expert ids
  Tensor wt;   // [n_tokens, k] f32 weights
};
MoeRoutes moe_route(Ctx& ctx, const Tensor& logits, const MoeRouteParams& p);
// The routes read back to the host and grouped by expert, which is where the host decides which expert matmuls run
// (one small read per MoE layer on a device): expert e's entries are [begin[e], begin[e + 1]) of token / weight,
// tokens ascending. Not an op (no Op id, like to_host): a counting sort over n_tokens * k ids.
struct ExpertGroups {
  std::vector<int64_t> begin;  // [n_expert + 1]
  std::vector<int64_t> token;
  std::vector<float> weight;
};
ExpertGroups group_by_expert(Ctx& ctx, const MoeRoutes& r, int64_t n_expert);
// out row rows[i] += w[i] * y row i, for i in order (an expert's outputs summed into its tokens' rows). out: [n, d]
// f32, y: [rows.size(), d] f32, rows distinct (rows of one call may be updated in parallel).
void add_rows_scaled_(Ctx& ctx, Tensor& out, std::span<const int64_t> rows, std::span<const float> w,
                      const Tensor& y);
// HF GptOssExperts' activation on gu [m, 2 * nf] f32 whose columns interleave gate (even) and up (odd): gate =
// min(gate, limit), up = clamp(up, -limit, limit), out = (up + 1) * gate * sigmoid(gate * alpha), [m, nf].
Tensor swiglu_clamped(Ctx& ctx, const Tensor& gu, float alpha, float limit);
// In place, f32 rows: x = x * sigmoid(gate), gate the same shape (Qwen3.5's gated attention output).
void sigmoid_mul_(Ctx& ctx, Tensor& x, const Tensor& gate);
// In place, f32 rows: x = tanh(x / cap) * cap, cap > 0 (Gemma's final logit soft-cap).
void softcap_(Ctx& ctx, Tensor& x, float cap);
// dst row i += src row src_row[i] for every src_row[i] >= 0 (Qwen3-VL DeepStack features added after a layer). Like
// copy_rows_: src is a host f32 tensor [rows, >= dst.dim(1)] (its first dst.dim(1) columns; rows may be strided, e.g.
// a column block of the batch's embedding rows).
void add_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src);

inline Device& Ctx::device() const { return dev ? *dev : cpu_device(); }

inline Tensor Ctx::name(const Tensor& t, const char* n, int layer) {
  if (on_tensor) on_tensor(n, layer, dev ? to_host(*this, t) : t);
  return t;
}

}  // namespace pipit
