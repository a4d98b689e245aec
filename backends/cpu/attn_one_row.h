// attn_row as attn_rows of one query: the SIMD levels with a grouped-rows kernel (AVX2, AVX-512, NEON) implement
// attn_row through it, so a lone row and the same row inside a group agree by construction.
#pragma once

#include "backends/cpu/kernels.h"

namespace pipit {

inline AttnRowsArgs attn_one_row(const AttnRowArgs& a) {
  AttnRowsArgs r;
  r.n_q = 1;
  r.q[0] = a.q;
  r.out[0] = a.out;
  r.k1[0] = a.k1;
  r.k = a.k;
  r.v = a.v;
  r.kv_stride = a.kv_stride;
  r.scratch = a.scratch;
  r.head_dim = a.head_dim;
  r.k0 = a.k0;
  r.scale = a.scale;
  r.softcap = a.softcap;
  r.ring = a.ring;
  r.has_sink = a.has_sink;
  r.sink[0] = a.sink;
  return r;
}

}  // namespace pipit
