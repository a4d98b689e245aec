// Linear attention (Gated DeltaNet, Qwen3.5; contracts in backends/ops.h) on the device: the depthwise causal
// conv1d + SiLU with its rolling window, the grouped L2 norm, the delta-rule gates, the gated delta rule and the
// gated RMSNorm. All f32; rows that may be strided take a row stride in floats.
// Every sum runs in the order of the CPU's scalar reference (backends/cpu/ref/linear_attn_ref.cpp), one work-item
// per independent sum, without fused multiply-adds: the rows are short (a head's dk or dv, a conv's K taps) and
// the recurrent state carries any rounding difference from token to token, so matching the order keeps the device
// within the CPU's numbers over a long prompt.
#pragma OPENCL FP_CONTRACT OFF

// One work-item per channel c of one sequence: y[t][c] = silu(sum_j w[j][c] * in(t - (K - 1) + j)), inputs before
// t = 0 from the window state [K][C] (row K + src); then the window becomes the last K inputs of (state, x).
__kernel void causal_conv1d_silu(__global const char* xb, ulong xo, int x_stride, __global char* yb, ulong yo,
                                 int y_stride, __global char* sb, ulong so, __global const char* wb, ulong wo, int n,
                                 int C, int K) {
  const int c = get_global_id(0);
  if (c >= C) return;
  __global const float* x = GPTR(const float, xb, xo) + c;
  __global float* y = GPTR(float, yb, yo) + c;
  __global float* st = GPTR(float, sb, so) + c;
  __global const float* w = GPTR(const float, wb, wo) + c;
  for (int t = 0; t < n; ++t) {
    float s = 0.0f;
    for (int j = 0; j < K; ++j) {
      const int src = t - (K - 1) + j;
      const float in = src >= 0 ? x[(ulong)src * x_stride] : st[(ulong)(K + src) * C];
      s += w[(ulong)j * C] * in;
    }
    y[(ulong)t * y_stride] = s / (1.0f + exp(-s));
  }
  // row r reads row r + n of the old window, which no earlier r has written (r + n > r)
  for (int r = 0; r < K; ++r) {
    const int src = n - K + r;
    st[(ulong)r * C] = src >= 0 ? x[(ulong)src * x_stride] : st[(ulong)(r + n) * C];
  }
}

// In place, one work-item per (group, row): x = x * (1 / sqrt(sum(x^2) + eps) * scale) over `group` elements.
__kernel void l2_norm_groups(__global char* xb, ulong xo, int x_stride, int n_groups, int group, float eps,
                             float scale) {
  const int g = get_global_id(0), r = get_global_id(1);
  if (g >= n_groups) return;
  __global float* p = GPTR(float, xb, xo) + (ulong)r * x_stride + (ulong)g * group;
  float ss = 0.0f;
  for (int i = 0; i < group; ++i) ss += p[i] * p[i];
  const float s = 1.0f / sqrt(ss + eps) * scale;
  for (int i = 0; i < group; ++i) p[i] = p[i] * s;
}

// In place on [n, nh] contiguous: a -> -exp(A_log[h]) * softplus(a + dt_bias[h]) (torch softplus: x > 20 is x),
// b -> sigmoid(b).
__kernel void delta_gates(__global char* ab, ulong ao, __global char* bb, ulong bo, __global const char* alb,
                          ulong alo, __global const char* dtb, ulong dto, int nh, int total) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int h = i % nh;
  __global float* a = GPTR(float, ab, ao) + i;
  __global float* b = GPTR(float, bb, bo) + i;
  const float x = *a + GPTR(const float, dtb, dto)[h];
  const float sp = x > 20.0f ? x : log1p(exp(x));
  *a = -exp(GPTR(const float, alb, alo)[h]) * sp;
  *b = 1.0f / (1.0f + exp(-*b));
}

// The gated delta rule token by token (HF torch_recurrent_gated_delta_rule) for one sequence. Column e of value
// head h's state S [dk][dv] evolves on its own: S[:, e] *= exp(g); kv = S[:, e] . k; delta = beta (v[e] - kv);
// S[:, e] += k delta; o[e] = S[:, e] . q. So one work-item per (e, h) keeps its column in private memory for the
// whole sequence, and its sums run over d in the CPU step's order (delta_rule_impl.h: delta_step_impl).
#define DELTA_MAX_DK 256

__kernel void gated_delta_rule(__global const char* qb, ulong qo, __global const char* kb, ulong ko, int qk_stride,
                               __global const char* vb, ulong vo, int v_stride, __global const char* gb, ulong go,
                               __global const char* bb, ulong bo, __global char* ob, ulong oo, __global char* sb,
                               ulong so, int n, int dk, int dv, int nv, int per_kv) {
  const int e = get_global_id(0), h = get_global_id(1);
  if (e >= dv || h >= nv) return;
  const int kh = h / per_kv;
  __global const float* q = GPTR(const float, qb, qo) + kh * dk;
  __global const float* k = GPTR(const float, kb, ko) + kh * dk;
  __global const float* v = GPTR(const float, vb, vo) + h * dv + e;
  __global const float* g = GPTR(const float, gb, go) + h;
  __global const float* beta = GPTR(const float, bb, bo) + h;
  __global float* o = GPTR(float, ob, oo) + h * dv + e;
  __global float* S = GPTR(float, sb, so) + (ulong)h * dk * dv + e;
  float s[DELTA_MAX_DK];
  for (int d = 0; d < dk; ++d) s[d] = S[(ulong)d * dv];
  for (int t = 0; t < n; ++t) {
    __global const float* qt = q + (ulong)t * qk_stride;
    __global const float* kt = k + (ulong)t * qk_stride;
    const float eg = exp(g[(ulong)t * nv]), bt = beta[(ulong)t * nv];
    float kv = 0.0f;
    for (int d = 0; d < dk; ++d) {
      s[d] *= eg;
      kv += kt[d] * s[d];
    }
    const float delta = (v[(ulong)t * v_stride] - kv) * bt;
    float acc = 0.0f;
    for (int d = 0; d < dk; ++d) {
      s[d] += kt[d] * delta;
      acc += qt[d] * s[d];
    }
    o[(ulong)t * nv * dv] = acc;
  }
  for (int d = 0; d < dk; ++d) S[(ulong)d * dv] = s[d];
}

// Qwen3_5RMSNormGated, one work-item per row of n (a head's dv): y = w * (x / sqrt(mean(x^2) + eps)) * silu(z).
__kernel void rms_norm_gated(__global const char* xb, ulong xo, __global const char* wb, ulong wo,
                             __global const char* zb, ulong zo, __global char* yb, ulong yo, int n, int rows,
                             float eps) {
  const int r = get_global_id(0);
  if (r >= rows) return;
  __global const float* x = GPTR(const float, xb, xo) + (ulong)r * n;
  __global const float* z = GPTR(const float, zb, zo) + (ulong)r * n;
  __global const float* w = GPTR(const float, wb, wo);
  __global float* y = GPTR(float, yb, yo) + (ulong)r * n;
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float rs = 1.0f / sqrt(ss / (float)n + eps);
  for (int i = 0; i < n; ++i) y[i] = w[i] * (x[i] * rs) * (z[i] / (1.0f + exp(-z[i])));
}
