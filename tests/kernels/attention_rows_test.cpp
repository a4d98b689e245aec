// attn_rows (several query rows over shared K/V and first key) of every ISA level that has it: each row must equal
// that level's attn_row for the row alone, bit for bit, so that grouping queries (prefill blocks, GQA heads, batch
// composition) never changes a result. Rows see different key counts (causal), K/V f32 and f16, head_dim tails,
// soft-cap, a ring, sink logits (GPT-OSS, one per row), a padded KV row stride, and key ranges over several chunks.
// At AVX-512 this is also in-place against converted K/V: calls of up to 4 rows read the cache rows in place, calls of
// more convert blocks of keys to f32 (backends/cpu/attn_chunked.h), and attn_row is a call of one row.
#include <cmath>
#include <cstring>
#include <tuple>

#include "backends/ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

class AttentionRows : public IsaTest {
 protected:
  // `rows` random K and V rows of dtype kv (values in [-1, 1] and [-2, 2]), `stride` bytes apart.
  void fill_kv(Rng& rng, DType kv, int64_t hd, int64_t rows, int64_t stride, std::vector<uint8_t>& kbuf,
               std::vector<uint8_t>& vbuf) const {
    kbuf.assign(size_t(rows * stride + 64), 0);
    vbuf.assign(size_t(rows * stride + 64), 0);
    for (int64_t p = 0; p < rows; ++p) {
      auto kr = rng.floats(size_t(hd), -1, 1), vr = rng.floats(size_t(hd), -2, 2);
      r().from_f32[int(kv)](kr.data(), kbuf.data() + p * stride, hd);
      r().from_f32[int(kv)](vr.data(), vbuf.data() + p * stride, hd);
    }
  }
};

TEST_P(AttentionRows, EachRowEqualsAttnRow) {
  if (!k().attn_rows[int(DType::F16)]) GTEST_SKIP() << "no attn_rows at this level (ops runs attn_row per row)";
  Rng rng(11);
  for (DType kv : {DType::F32, DType::F16, DType::Q8_0})
    for (int64_t hd : {31, 64, 128})
      for (int n_q : {1, 2, 3, 7, 16})
        for (auto [k0, k1_first, ring] : {std::tuple<int64_t, int64_t, int64_t>{0, 1, 0}, {0, 9, 0}, {0, 130, 0},
                                          {30, 40, 32}, {0, kAttnChunk - 3, 0}, {0, 2 * kAttnChunk + 5, 0}})
          for (float softcap : {0.0f, 30.0f})
          for (bool sink : {false, true}) {
            if (kv == DType::Q8_0 && (hd % kQBlock || !k().attn_rows[int(kv)])) continue;
            const int64_t k1_last = k1_first + (n_q - 1) / 2;  // two heads per token, consecutive tokens
            const int64_t rows = ring > 0 ? ring : k1_last;
            const int64_t stride = 2 * dtype_row_bytes(kv, hd) + 8;
            std::vector<uint8_t> kbuf, vbuf;
            fill_kv(rng, kv, hd, rows, stride, kbuf, vbuf);
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
            std::vector<float> scratch(size_t(attn_scratch_floats(n_q, k1_last - k0, hd)));
            a.scratch = scratch.data();
            k().attn_rows[int(kv)](a);
            for (int i = 0; i < n_q; ++i) {
              std::vector<float> s1(size_t(attn_scratch_floats(1, a.k1[i] - k0, hd)));
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

// Split decode (levels with attn_merge): the rows' keys cut into chunks of kAttnChunk, one attn_rows call per chunk
// writing chunk states (rows whose keys end before a chunk sit it out, as in ops), then attn_merge per row, equal
// bit for bit to attn_rows over the whole range; sinks and soft-cap included.
TEST_P(AttentionRows, SplitEqualsWhole) {
  if (!k().attn_merge) GTEST_SKIP() << "no attn_merge at this level (ops never splits)";
  Rng rng(12);
  for (DType kv : {DType::F32, DType::F16, DType::Q8_0})
    for (int64_t hd : {32, 64, 128})
      for (int n_q : {1, 2, 5, 16})
        for (int64_t k1_first : {int64_t(1), kAttnChunk, kAttnChunk + 1, 3 * kAttnChunk + 17})
          for (bool sink : {false, true}) {
            const int64_t k1_last = k1_first + (n_q - 1) / 2;
            const int64_t stride = 2 * dtype_row_bytes(kv, hd) + 8;
            std::vector<uint8_t> kbuf, vbuf;
            fill_kv(rng, kv, hd, k1_last, stride, kbuf, vbuf);
            std::vector<std::vector<float>> q(static_cast<size_t>(n_q)), whole(q), split(q);
            AttnRowsArgs a;
            a.n_q = n_q;
            a.k = kbuf.data();
            a.v = vbuf.data();
            a.kv_stride = stride;
            a.head_dim = hd;
            a.k0 = 0;
            a.scale = 1.0f / std::sqrt(float(hd));
            a.softcap = sink ? 0.0f : 25.0f;
            a.has_sink = sink;
            for (int i = 0; i < n_q; ++i) {
              q[size_t(i)] = rng.floats(size_t(hd), -3, 3);
              whole[size_t(i)].assign(size_t(hd + 1), 9.0f);
              split[size_t(i)].assign(size_t(hd + 1), 9.0f);
              a.q[i] = q[size_t(i)].data();
              a.out[i] = whole[size_t(i)].data();
              a.k1[i] = k1_first + i / 2;
              a.sink[i] = rng.uniform(-1.0f, 3.0f);
            }
            std::vector<float> scratch(size_t(attn_scratch_floats(n_q, k1_last, hd)));
            a.scratch = scratch.data();
            k().attn_rows[int(kv)](a);
            const int64_t n_chunks = (k1_last + kAttnChunk - 1) / kAttnChunk;
            std::vector<float> states(size_t(n_q * n_chunks * (hd + 2)), 7.0f);
            for (int64_t c = 0; c < n_chunks; ++c) {
              AttnRowsArgs b = a;
              b.n_q = 0;
              b.k0 = c * kAttnChunk;
              for (int i = 0; i < n_q; ++i) {
                if (a.k1[i] <= b.k0) continue;
                b.q[b.n_q] = a.q[i];
                b.out[b.n_q] = nullptr;
                b.k1[b.n_q] = std::min(a.k1[i], b.k0 + kAttnChunk);
                b.sink[b.n_q] = a.sink[i];
                b.state[b.n_q] = states.data() + (i * n_chunks + c) * (hd + 2);
                ++b.n_q;
              }
              k().attn_rows[int(kv)](b);
            }
            for (int i = 0; i < n_q; ++i) {
              k().attn_merge(states.data() + i * n_chunks * (hd + 2), (a.k1[i] + kAttnChunk - 1) / kAttnChunk, hd,
                             sink, a.sink[i], scratch.data(), split[size_t(i)].data());
              for (int64_t d = 0; d <= hd; ++d)
                ASSERT_EQ(test::bits(split[size_t(i)][size_t(d)]), test::bits(whole[size_t(i)][size_t(d)]))
                    << dtype_name(kv) << " head_dim " << hd << " n_q " << n_q << " row " << i << " keys " << a.k1[i]
                    << " sink " << sink << " d " << d;
            }
          }
}

// The attention op (backends/cpu/ops.cpp) over a long context: with few kv heads per thread it splits a decode
// step's keys into chunks, one job per (kv head, chunk), and folds the chunk states afterwards; with enough heads it
// does not. The same query rows over the same cache (16 kv heads, GQA 2, 700 keys, f32 and f16) on a pool of 1 (no
// split: 16 jobs >= 8) and of 4 threads (split: 16 < 32) must give the same bits, and both the row alone
// (attn_row): whatever the jobs' order and the threads, each row is the same arithmetic.
TEST_P(AttentionRows, OpSplitDecodeEqualsUnsplit) {
  if (!k().attn_merge) GTEST_SKIP() << "no attn_merge at this level (ops never splits)";
  Rng rng(31);
  const int64_t n_head_kv = 16, group = 2, hd = 64, keys = 700;
  for (DType kv : {DType::F32, DType::F16}) {
    Tensor kc = Tensor::empty(kv, {keys, n_head_kv, hd}), vc = Tensor::empty(kv, {keys, n_head_kv, hd});
    for (int64_t p = 0; p < keys; ++p) {
      auto kr = rng.floats(size_t(n_head_kv * hd), -1, 1), vr = rng.floats(size_t(n_head_kv * hd), -2, 2);
      r().from_f32[int(kv)](kr.data(), kc.data() + p * kc.stride(0), n_head_kv * hd);
      r().from_f32[int(kv)](vr.data(), vc.data() + p * vc.stride(0), n_head_kv * hd);
    }
    Tensor q = Tensor::empty(DType::F32, {1, n_head_kv * group, hd});
    const auto qv = rng.floats(size_t(q.numel()), -3, 3);
    std::copy(qv.begin(), qv.end(), q.ptr<float>());
    const std::vector<int32_t> pos = {int32_t(keys - 1)};
    auto run = [&](int threads) {
      Arena arena(size_t(1) << 22);
      ThreadPool pool(threads);
      Ctx ctx{&arena, &pool, &k(), nullptr};
      Tensor out = Tensor::empty(DType::F32, q.shape());
      attention(ctx, q, kc, vc, pos, AttnParams{0.125f}, out);
      return std::vector<float>(out.ptr<float>(), out.ptr<float>() + out.numel());
    };
    const auto unsplit = run(1), split = run(4);
    EXPECT_EQ(0, std::memcmp(unsplit.data(), split.data(), unsplit.size() * 4)) << dtype_name(kv);
    for (int64_t h = 0; h < n_head_kv * group; h += 7) {  // a few rows alone through attn_row
      AttnRowArgs a;
      std::vector<float> out(static_cast<size_t>(hd)), scratch(static_cast<size_t>(attn_scratch_floats(1, keys, hd)));
      a.q = q.ptr<float>() + h * hd;
      a.k = kc.data() + (h / group) * dtype_row_bytes(kv, hd);
      a.v = vc.data() + (h / group) * dtype_row_bytes(kv, hd);
      a.kv_stride = kc.stride(0);
      a.out = out.data();
      a.scratch = scratch.data();
      a.head_dim = hd;
      a.k0 = 0;
      a.k1 = keys;
      a.scale = 0.125f;
      a.softcap = 0.0f;
      k().attn_row[int(kv)](a);
      EXPECT_EQ(0, std::memcmp(out.data(), split.data() + h * hd, size_t(hd) * 4)) << dtype_name(kv) << " row " << h;
    }
  }
}

PIPIT_INSTANTIATE_ISA(AttentionRows);

}  // namespace
}  // namespace pipit
