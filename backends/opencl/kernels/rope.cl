// RoPE, rotate_half convention, in place on x [n_tokens, n_head, head_dim]: pair (i, i + half) of every head turns
// by the angle whose cos / sin are cs[t][i] / cs[t][half + i]. The host computes the table (f32, as HF: angle =
// float(pos) * inv_freq) once per forward pass, for plain RoPE and for M-RoPE (each frequency reads the position
// of its stream), so one kernel serves both. Dims past 2 * half stay as they are (partial rotary).
__kernel void rope(__global char* xb, ulong xo, __global const char* cb, ulong co, int n_head, int head_dim,
                   int half_dim) {
  const int i = get_global_id(0), row = get_global_id(1);  // row = t * n_head + h
  if (i >= half_dim) return;
  const int t = row / n_head;
  __global float* v = GPTR(float, xb, xo) + (ulong)row * head_dim;
  __global const float* c = GPTR(const float, cb, co) + (ulong)t * 2 * half_dim;
  const float x1 = v[i], x2 = v[i + half_dim], cs = c[i], sn = c[half_dim + i];
  v[i] = x1 * cs - x2 * sn;
  v[i + half_dim] = x2 * cs + x1 * sn;
}
