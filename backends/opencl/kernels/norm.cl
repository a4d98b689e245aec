// RMSNorm of one row per work-group: y = x / sqrt(mean(x^2) + eps) * (w_offset + w) (HF LlamaRMSNorm; Gemma's
// (1 + w) with w_offset 1). x and y may be the same rows (in place: each element is read and written by one
// work-item, after the reduction). Softmax of one row per work-group, in place (masked entries are -inf -> 0);
// with has_sink, row r's softmax has one more logit sinks[r % n_head] whose probability is dropped (GPT-OSS
// attention sinks: the rows are the (token, head) score rows of attention.cl).
#define NORM_WG 64

__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1)))
void rms_norm(__global const char* xb, ulong xo, int x_stride, __global const char* wb, ulong wo,
              __global char* yb, ulong yo, int y_stride, int n, float eps, float w_offset) {
  const int r = get_group_id(0), lid = get_local_id(0);
  __global const float* x = GPTR(const float, xb, xo) + (ulong)r * x_stride;
  __global float* y = GPTR(float, yb, yo) + (ulong)r * y_stride;
  __global const float* w = GPTR(const float, wb, wo);
  __local float red[NORM_WG];
  float ss = 0.0f;
  for (int i = lid; i < n; i += NORM_WG) ss += x[i] * x[i];
  red[lid] = ss;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = NORM_WG / 2; s > 0; s >>= 1) {
    if (lid < s) red[lid] += red[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float rs = 1.0f / sqrt(red[0] / (float)n + eps);
  for (int i = lid; i < n; i += NORM_WG) y[i] = (x[i] * rs) * (w_offset + w[i]);
}

__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1)))
void softmax_rows(__global char* xb, ulong xo, int stride, int n, __global const char* sb, ulong so, int has_sink,
                  int n_head) {
  const int r = get_group_id(0), lid = get_local_id(0);
  __global float* x = GPTR(float, xb, xo) + (ulong)r * stride;
  __local float red[NORM_WG];
  const float sink = has_sink ? GPTR(const float, sb, so)[r % n_head] : -INFINITY;
  float mx = lid == 0 ? sink : -INFINITY;
  for (int i = lid; i < n; i += NORM_WG) mx = fmax(mx, x[i]);
  red[lid] = mx;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = NORM_WG / 2; s > 0; s >>= 1) {
    if (lid < s) red[lid] = fmax(red[lid], red[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  mx = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  float sum = lid == 0 && has_sink ? exp(sink - mx) : 0.0f;
  for (int i = lid; i < n; i += NORM_WG) {
    const float e = exp(x[i] - mx);
    x[i] = e;
    sum += e;
  }
  red[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = NORM_WG / 2; s > 0; s >>= 1) {
    if (lid < s) red[lid] += red[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float inv = 1.0f / red[0];
  for (int i = lid; i < n; i += NORM_WG) x[i] *= inv;
}
