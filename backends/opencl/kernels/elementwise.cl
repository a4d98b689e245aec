// Element-wise ops over contiguous f32 tensors, one work-item per element: x += y, x *= s, and the gated
// activations of the MLP (silu(g) * u, gelu_tanh(g) * u), plus weight dtype -> f32 rows.
__kernel void add_inplace(__global char* xb, ulong xo, __global const char* yb, ulong yo, int n) {
  const int i = get_global_id(0);
  if (i < n) GPTR(float, xb, xo)[i] += GPTR(const float, yb, yo)[i];
}

__kernel void scale_inplace(__global char* xb, ulong xo, float s, int n) {
  const int i = get_global_id(0);
  if (i < n) GPTR(float, xb, xo)[i] *= s;
}

// act 0: silu(g) * u = g / (1 + exp(-g)) * u; act 1: gelu_pytorch_tanh(g) * u. Rows of n; g and u rows may be
// strided (column views, Gemma 4's per-layer inputs), y contiguous.
__kernel void gated_act(__global const char* gb, ulong go, int g_stride, __global const char* ub, ulong uo,
                        int u_stride, __global char* yb, ulong yo, int n, int act) {
  const int c = get_global_id(0), r = get_global_id(1);
  if (c >= n) return;
  const float g = GPTR(const float, gb, go)[(ulong)r * g_stride + c];
  const float u = GPTR(const float, ub, uo)[(ulong)r * u_stride + c];
  float a;
  if (act == 0) {
    a = g / (1.0f + exp(-g));
  } else {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    a = 0.5f * g * (1.0f + tanh(k * (g + 0.044715f * g * g * g)));
  }
  GPTR(float, yb, yo)[(ulong)r * n + c] = a * u;
}

// y [rows, K] f32 = rows of a weight [N, K] (device layout of dtype wt): embedding lookups (row ids[i]) and
// to_f32 (ids null: row i).
__kernel void weight_rows(__global const char* wb, ulong wo, int wt, int N, int K, __global const char* idsb, ulong idso,
                          int use_ids, __global char* yb, ulong yo) {
  __global const int* ids = GPTR(const int, idsb, idso);
  const int k = get_global_id(0), i = get_global_id(1);
  if (k >= K) return;
  const int n = use_ids ? ids[i] : i;
  GPTR(float, yb, yo)[(ulong)i * K + k] = wval(wb + wo, N, K, n, k, wt);
}

// y [rows, d] contiguous = x's rows (f32, x rows x_stride floats apart): to_f32 of a column view (Qwen3.5's
// query / gate halves of each head's q_proj row)
__kernel void strided_rows_f32(__global const char* xb, ulong xo, int x_stride, int d, __global char* yb, ulong yo) {
  const int e = get_global_id(0), i = get_global_id(1);
  if (e < d) GPTR(float, yb, yo)[(ulong)i * d + e] = GPTR(const float, xb, xo)[(ulong)i * x_stride + e];
}

// y row i = x row rows[i] (f32, d wide; x rows x_stride floats apart)
__kernel void gather_rows(__global const char* xb, ulong xo, int x_stride, __global const char* rowsb, ulong rowso, int d,
                          __global char* yb, ulong yo) {
  __global const int* rows = GPTR(const int, rowsb, rowso);
  const int e = get_global_id(0), i = get_global_id(1);
  if (e < d) GPTR(float, yb, yo)[(ulong)i * d + e] = GPTR(const float, xb, xo)[(ulong)rows[i] * x_stride + e];
}

// x row rows[i] = src row i (f32, d wide)
__kernel void scatter_rows(__global const char* sb, ulong so, __global const char* rowsb, ulong rowso, int d, __global char* xb,
                           ulong xo) {
  __global const int* rows = GPTR(const int, rowsb, rowso);
  const int e = get_global_id(0), i = get_global_id(1);
  if (e < d) GPTR(float, xb, xo)[(ulong)rows[i] * d + e] = GPTR(const float, sb, so)[(ulong)i * d + e];
}
