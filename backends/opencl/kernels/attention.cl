// Causal attention over the device KV cache ([n_rows, n_head_kv, head_dim], f32 or f16: built with -DKV_F16=0/1),
// in three steps so that no work-item holds a head_dim-long accumulator: scores S[row, j] = scale * q . k (tanh
// soft-cap optional; -inf outside the query's window), softmax_rows (norm.cl) over each row, then
// out = sum_j S[row, j] v_j. Column j of S is key position base + j; query t sees positions [k0, pos[t]] with
// k0 = max(0, pos[t] - window + 1) (window 0: from 0). A ring cache (sliding window) keeps position p at row
// p % n_rows. GQA: query head h reads kv head h / group. Also store_kv: new K/V rows written at their positions.
#if KV_F16
#define KV_LOAD(p, i) vload_half((i), (__global const half*)(p))
#else
#define KV_LOAD(p, i) ((__global const float*)(p))[i]
#endif

inline int key_row(int p, int n_rows_ring) { return n_rows_ring > 0 ? p % n_rows_ring : p; }

__kernel void attn_scores(__global const char* qb, ulong qo, __global const char* kb, ulong ko,
                          __global const char* posb, ulong poso, __global char* sb, ulong so, int n_head, int group, int head_dim,
                          int kv_row, int base, int L, int window, int ring, float scale, float softcap) {
  __global const int* pos = GPTR(const int, posb, poso);
  const int j = get_global_id(0), r = get_global_id(1);
  if (j >= L) return;
  const int t = r / n_head, h = r % n_head, kvh = h / group;
  const int p = base + j, k1 = pos[t] + 1, k0 = window > 0 ? max(0, k1 - window) : 0;
  float s = -INFINITY;
  if (p >= k0 && p < k1) {
    __global const float* q = GPTR(const float, qb, qo) + (ulong)r * head_dim;
    const ulong e0 = (ulong)key_row(p, ring) * kv_row + (ulong)kvh * head_dim;
    __global const char* k = kb + ko;
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += q[d] * KV_LOAD(k, e0 + d);
    s = dot * scale;
    if (softcap > 0.0f) s = softcap * tanh(s / softcap);
  }
  GPTR(float, sb, so)[(ulong)r * L + j] = s;
}

__kernel void attn_values(__global const char* sb, ulong so, __global const char* vb, ulong vo,
                          __global const char* posb, ulong poso, __global char* ob, ulong oo, int n_head, int group, int head_dim,
                          int kv_row, int base, int L, int window, int ring) {
  __global const int* pos = GPTR(const int, posb, poso);
  const int d = get_global_id(0), r = get_global_id(1);
  if (d >= head_dim) return;
  const int t = r / n_head, h = r % n_head, kvh = h / group;
  const int k1 = pos[t] + 1, k0 = window > 0 ? max(0, k1 - window) : 0;
  __global const float* s = GPTR(const float, sb, so) + (ulong)r * L;
  __global const char* v = vb + vo;
  float acc = 0.0f;
  for (int p = k0; p < k1; ++p)
    acc += s[p - base] * KV_LOAD(v, (ulong)key_row(p, ring) * kv_row + (ulong)kvh * head_dim + d);
  GPTR(float, ob, oo)[(ulong)r * head_dim + d] = acc;
}

// dst row (pos[t] % n_rows) = src row t, converted to the cache dtype (f16: round to nearest even).
__kernel void store_kv(__global const char* sb, ulong so, __global char* db, ulong dof, __global const char* posb, ulong poso,
                       int row, int n_rows) {
  __global const int* pos = GPTR(const int, posb, poso);
  const int i = get_global_id(0), t = get_global_id(1);
  if (i >= row) return;
  const float v = GPTR(const float, sb, so)[(ulong)t * row + i];
  const ulong e = (ulong)(pos[t] % n_rows) * row + i;
#if KV_F16
  vstore_half_rte(v, e, GPTR(half, db, dof));
#else
  GPTR(float, db, dof)[e] = v;
#endif
}
