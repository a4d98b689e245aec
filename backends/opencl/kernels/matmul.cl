// y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]): nn.Linear with f32 activations. Built once per weight dtype with
// -DWT=<WT_*> so wval() folds to one load path. Two kernels: matmul_gemv for a few rows (decode: one work-group per
// output column streams that weight row once for all rows of x) and matmul_gemm (prefill: 16 x 16 output tiles,
// x and w tiles staged in local memory so each weight is read once per 16 rows of x).
// Accumulation is f32; q8_0 / q4_0 weights are dequantized to f32 (w8a32 / w4a32), not w8a8 like the CPU: the
// device path is closer to the f32 model than the CPU's quantized path.

#define GEMV_WG 64
#define GEMV_MAX_M 4

__kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1)))
void matmul_gemv(__global const char* xb, ulong xo, int x_stride, __global const char* wb, ulong wo,
                 __global const char* bb, ulong bo, int has_bias, __global char* yb, ulong yo, int y_stride,
                 int M, int N, int K) {
  const int n = get_group_id(0), lid = get_local_id(0);
  __global const float* x = GPTR(const float, xb, xo);
  __global const char* w = wb + wo;
  __local float red[GEMV_MAX_M][GEMV_WG];
  float acc[GEMV_MAX_M];
  for (int m = 0; m < GEMV_MAX_M; ++m) acc[m] = 0.0f;
#if WT == WT_Q8_0 || WT == WT_Q4_0
  {  // whole blocks per work-item: one scale load per 32 weights
    for (int b = lid; b < K / 32; b += GEMV_WG) {
      float wq[32];
      for (int j = 0; j < 32; ++j) {
        if (WT == WT_Q8_0) {
          wq[j] = (float)((__global const char*)w)[(ulong)n * K + b * 32 + j];
        } else {
          const uchar byte = ((__global const uchar*)w)[(ulong)n * (K / 2) + b * 16 + (j & 15)];
          wq[j] = (float)((j < 16 ? (byte & 15) : (byte >> 4)) - 8);
        }
      }
      const float d = wscale(w, N, K, n, b, WT);
      for (int m = 0; m < M; ++m) {
        float s = 0.0f;
        for (int j = 0; j < 32; ++j) s += x[(ulong)m * x_stride + b * 32 + j] * wq[j];
        acc[m] += s * d;
      }
    }
  }
#else
  for (int k = lid; k < K; k += GEMV_WG) {
    const float wv = wval(w, N, K, n, k, WT);
    for (int m = 0; m < M; ++m) acc[m] += x[(ulong)m * x_stride + k] * wv;
  }
#endif
  for (int m = 0; m < M; ++m) red[m][lid] = acc[m];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = GEMV_WG / 2; s > 0; s >>= 1) {
    if (lid < s)
      for (int m = 0; m < M; ++m) red[m][lid] += red[m][lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    const float bias = has_bias ? GPTR(const float, bb, bo)[n] : 0.0f;
    for (int m = 0; m < M; ++m) GPTR(float, yb, yo)[(ulong)m * y_stride + n] = red[m][0] + bias;
  }
}

#define TS 16

__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void matmul_gemm(__global const char* xb, ulong xo, int x_stride, __global const char* wb, ulong wo,
                 __global const char* bb, ulong bo, int has_bias, __global char* yb, ulong yo, int y_stride,
                 int M, int N, int K) {
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int n0 = get_group_id(0) * TS, m0 = get_group_id(1) * TS;
  __global const float* x = GPTR(const float, xb, xo);
  __global const char* w = wb + wo;
  __local float xs[TS][TS + 1];  // [m][k], +1: no bank conflicts on the transposed reads
  __local float ws[TS][TS + 1];  // [n][k]
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TS) {
    const int k = k0 + lx;
    xs[ly][lx] = (m0 + ly < M && k < K) ? x[(ulong)(m0 + ly) * x_stride + k] : 0.0f;
    ws[ly][lx] = (n0 + ly < N && k < K) ? wval(w, N, K, n0 + ly, k, WT) : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < TS; ++i) acc += xs[ly][i] * ws[lx][i];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const int m = m0 + ly, n = n0 + lx;
  if (m < M && n < N)
    GPTR(float, yb, yo)[(ulong)m * y_stride + n] = acc + (has_bias ? GPTR(const float, bb, bo)[n] : 0.0f);
}
