// attn_rows (several query rows over shared K/V and first key) of every ISA level that has it: each row must equal
// that level's attn_row for the row alone, bit for bit, so that grouping queries (prefill blocks, GQA heads, batch
// composition) never changes a result. Rows see different key counts (causal), K/V f32 and f16, head_dim tails,
// soft-cap, a ring, sink logits (GPT-OSS, one per row), and a padded KV row stride.
#include <cmath>
#include <tuple>

#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

class AttentionRows : public IsaTest {};

TEST_P(AttentionRows, EachRowEqualsAttnRow) {
  if (!k().attn_rows[int(DType::F16)]) GTEST_SKIP() << "no attn_rows at this level (ops runs attn_row per row)";
  Rng rng(11);
  for (DType kv : {DType::F32, DType::F16, DType::Q8_0})
    for (int64_t hd : {31, 64, 128})
      for (int n_q : {1, 2, 3, 7, 16})
        for (auto [k0, k1_first, ring] : {std::tuple<int64_t, int64_t, int64_t>{0, 1, 0}, {0, 9, 0}, {0, 130, 0},
                                          {30, 40, 32}})
          for (float softcap : {0.0f, 30.0f})
          for (bool sink : {false, true}) {
            if (kv == DType::Q8_0 && (hd % kQBlock || !k().attn_rows[int(kv)])) continue;
            const int64_t k1_last = k1_first + (n_q - 1) / 2;  // two heads per token, consecutive tokens
            const int64_t rows = ring > 0 ? ring : k1_last;
            const int64_t stride = 2 * dtype_row_bytes(kv, hd) + 8;
            std::vector<uint8_t> kbuf(size_t(rows * stride + 64)), vbuf(size_t(rows * stride + 64));
            for (int64_t p = 0; p < rows; ++p) {
              auto kr = rng.floats(size_t(hd), -1, 1), vr = rng.floats(size_t(hd), -2, 2);
              r().from_f32[int(kv)](kr.data(), kbuf.data() + p * stride, hd);
              r().from_f32[int(kv)](vr.data(), vbuf.data() + p * stride, hd);
            }
            std::vector<std::vector<float>> q(static_cast<size_t>(n_q)), out(q), alone(q);
            AttnRowsArgs a;
            a.n_q = n_q;
            a.k = kbuf.data();
            a.v = vbuf.data();
            a.kv_stride = stride;
            a.head_dim = hd;
            a.k0 = k0;
            a.scale = 1.0f / std::sqrt(float(hd));
            a.softcap = softcap;
            a.ring = ring;  // rows that end before the ring wraps never reach it
            a.has_sink = sink;
            for (int i = 0; i < n_q; ++i) {
              q[size_t(i)] = rng.floats(size_t(hd), -3, 3);
              out[size_t(i)].assign(size_t(hd + 1), 9.0f);
              alone[size_t(i)].assign(size_t(hd + 1), 9.0f);
              a.q[i] = q[size_t(i)].data();
              a.out[i] = out[size_t(i)].data();
              a.k1[i] = k1_first + i / 2;
              a.sink[i] = rng.uniform(-1.0f, 3.0f);
            }
            std::vector<float> scratch(size_t(n_q * (k1_last - k0 + 1) + 4 * hd));
            a.scratch = scratch.data();
            k().attn_rows[int(kv)](a);
            for (int i = 0; i < n_q; ++i) {
              std::vector<float> s1(size_t(a.k1[i] - k0 + 1));
              AttnRowArgs one{q[size_t(i)].data(), kbuf.data(), vbuf.data(), stride, alone[size_t(i)].data(), s1.data(),
                              hd, k0, a.k1[i], a.scale, softcap, a.k1[i] > ring && ring > 0 ? ring : 0, sink, a.sink[i]};
              k().attn_row[int(kv)](one);
              for (int64_t d = 0; d <= hd; ++d)
                ASSERT_EQ(test::bits(out[size_t(i)][size_t(d)]), test::bits(alone[size_t(i)][size_t(d)]))
                    << dtype_name(kv) << " head_dim " << hd << " n_q " << n_q << " row " << i << " keys [" << k0 << ", "
                    << a.k1[i] << ") ring " << ring << " softcap " << softcap << " sink " << sink << " d " << d;
            }
          }
}

PIPIT_INSTANTIATE_ISA(AttentionRows);

}  // namespace
}  // namespace pipit
