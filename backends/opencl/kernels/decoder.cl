// The decoder ops beyond a dense Llama graph (backends/ops.h: decoder ops): a mixture-of-experts router's top-k,
// an expert's rows summed into its tokens' rows, GPT-OSS's clamped SwiGLU, Qwen3.5's sigmoid gate, the final logit
// soft-cap, DeepStack's row adds, fill and clamp. All f32; tensors whose rows may be strided take a row stride (in
// floats). One work-item per output element, except moe_route: one per token (a row of n_expert logits is short).
// No fused multiply-adds: the CPU's loops round the product and the sum separately, and add_rows_scaled then gives
// the same bits (MoE outputs summed expert by expert).
#pragma OPENCL FP_CONTRACT OFF

// MoE routing of one token (MoeRouteParams): the k largest of v[e] (order 0: v = softmax of the whole row, in f32
// as the CPU's softmax: exp(l - max) * (1 / sum); order 1: v = the logits), largest first, ties to the lower
// index; then the weights: order 0 v[e] (renorm: / their sum, in k order), order 1 a softmax over the k kept
// logits; times scale; times escale[e] when has_escale. Probabilities are recomputed where needed rather than kept:
// a work-item has no n_expert-long array, and exp is cheap next to the expert matmuls.
#define MOE_MAX_K 32

__kernel void moe_route(__global const char* lb, ulong lo, int l_stride, int E, int K, int order, int renorm,
                        float scale, __global const char* esb, ulong eso, int has_escale, int n,
                        __global char* selb, ulong selo, __global char* wb, ulong wo) {
  const int t = get_global_id(0);
  if (t >= n) return;
  __global const float* l = GPTR(const float, lb, lo) + (ulong)t * l_stride;
  __global int* sel = GPTR(int, selb, selo) + (ulong)t * K;
  __global float* w = GPTR(float, wb, wo) + (ulong)t * K;
  float mx = -INFINITY, inv = 1.0f;
  if (order == 0) {
    for (int e = 0; e < E; ++e) mx = fmax(mx, l[e]);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum += exp(l[e] - mx);
    inv = 1.0f / sum;
  }
  int chosen[MOE_MAX_K];
  float val[MOE_MAX_K];
  for (int k = 0; k < K; ++k) {
    int best = -1;
    float bv = 0.0f;
    for (int e = 0; e < E; ++e) {
      bool taken = false;
      for (int j = 0; j < k; ++j) taken = taken || chosen[j] == e;
      if (taken) continue;
      const float v = order == 0 ? exp(l[e] - mx) * inv : l[e];
      if (best < 0 || v > bv) {
        best = e;
        bv = v;
      }
    }
    chosen[k] = best;
    val[k] = bv;
  }
  float sum = 0.0f;
  if (order == 0) {
    if (renorm) {
      for (int k = 0; k < K; ++k) sum += val[k];
      for (int k = 0; k < K; ++k) val[k] /= sum;
    }
  } else {
    const float top = val[0];
    for (int k = 0; k < K; ++k) sum += (val[k] = exp(val[k] - top));
    for (int k = 0; k < K; ++k) val[k] /= sum;
  }
  __global const float* es = GPTR(const float, esb, eso);
  for (int k = 0; k < K; ++k) {
    float v = val[k];
    if (scale != 1.0f) v *= scale;
    if (has_escale) v *= es[chosen[k]];
    sel[k] = chosen[k];
    w[k] = v;
  }
}

// out row rows[i] += w[i] * y row i (rows distinct within one launch: no two work-items write one element)
__kernel void add_rows_scaled(__global char* ob, ulong oo, int o_stride, __global const char* rowsb, ulong rowso,
                              __global const char* wb, ulong wo, __global const char* yb, ulong yo, int y_stride,
                              int d) {
  const int c = get_global_id(0), i = get_global_id(1);
  if (c >= d) return;
  const int r = GPTR(const int, rowsb, rowso)[i];
  GPTR(float, ob, oo)[(ulong)r * o_stride + c] +=
      GPTR(const float, wb, wo)[i] * GPTR(const float, yb, yo)[(ulong)i * y_stride + c];
}

// GPT-OSS: gu row r interleaves gate (even columns) and up (odd); out [m, nf] contiguous
__kernel void swiglu_clamped(__global const char* gb, ulong go, int g_stride, __global char* ob, ulong oo, int nf,
                             float alpha, float limit) {
  const int j = get_global_id(0), r = get_global_id(1);
  if (j >= nf) return;
  __global const float* g = GPTR(const float, gb, go) + (ulong)r * g_stride;
  const float gate = fmin(g[2 * j], limit);
  const float up = clamp(g[2 * j + 1], -limit, limit);
  const float glu = gate * (1.0f / (1.0f + exp(-(gate * alpha))));
  GPTR(float, ob, oo)[(ulong)r * nf + j] = (up + 1.0f) * glu;
}

// In place over rows of n (row strides in floats). op 0: x *= sigmoid(g); 1: x = tanh(x / a) * a (soft-cap a);
// 2: x = a (fill); 3: x = min(max(x, a), b) (clamp, torch's order); 4: x += g (g rows from add_rows' packed
// upload, scattered to row rows[r] of x, r the packed row).
__kernel void rows_inplace(__global char* xb, ulong xo, int x_stride, __global const char* gb, ulong go, int g_stride,
                           __global const char* rowsb, ulong rowso, int n, int op, float a, float b) {
  const int i = get_global_id(0), r = get_global_id(1);
  if (i >= n) return;
  const int xr = op == 4 ? GPTR(const int, rowsb, rowso)[r] : r;
  __global float* x = GPTR(float, xb, xo) + (ulong)xr * x_stride + i;
  __global const float* g = GPTR(const float, gb, go) + (ulong)r * g_stride + i;
  switch (op) {
    case 0: *x *= 1.0f / (1.0f + exp(-*g)); break;
    case 1: *x = tanh(*x / a) * a; break;
    case 2: *x = a; break;
    case 3: *x = fmin(fmax(*x, a), b); break;
    default: *x += *g; break;
  }
}
