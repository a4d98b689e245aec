// attn_row for f32, f16 and q8_0 KV caches, every ISA level against ref: head_dim in {1, 31, 32, 33, 64, 128}, visible
// key ranges [k0, k1) of 1 to 600 keys (up to 3 chunks of the chunked levels) that do not start at 0 (sliding
// window), keys wrapping around a ring buffer
// (AttnRowArgs::ring), with and without soft-cap, with and without a sink logit (GPT-OSS), and a KV row stride that is not head_dim (heads interleaved, padded).
// Tolerance: |out - out_ref| <= 1e-5 max|v| (a softmax-weighted average of v: score order and exp differ by ulps).
#include <cmath>
#include <tuple>

#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

class Attention : public IsaTest {};

TEST_P(Attention, AllShapes) {
  Rng rng(6);
  for (DType kv : {DType::F32, DType::F16, DType::Q8_0})
    for (int64_t hd : {1, 31, 32, 33, 64, 128})
      for (auto [k0, k1, ring] : {std::tuple<int64_t, int64_t, int64_t>{0, 1, 0}, {2, 7, 0}, {0, 33, 0}, {5, 305, 0},
                                  {5, 11, 8}, {9, 45, 40}, {39, 41, 40},
                                  {3, 3 + 2 * kAttnChunk + 37, 0}, {100, 700, 620}})
        for (float softcap : {0.0f, 20.0f})
        for (bool sink : {false, true}) {
          if (kv == DType::Q8_0 && hd % kQBlock) continue;  // a q8_0 cache needs whole blocks per head
          const int64_t rows = ring > 0 ? ring : k1;  // rows in the cache
          const int64_t n_head_kv = 2, head_bytes = dtype_row_bytes(kv, hd);
          const int64_t stride = n_head_kv * head_bytes + 8;  // bytes between positions (padded)
          std::vector<uint8_t> kbuf(size_t(rows * stride + 64)), vbuf(size_t(rows * stride + 64));
          float vmax = 0;
          for (int64_t p = 0; p < rows; ++p) {
            auto kr = rng.floats(size_t(hd), -1, 1), vr = rng.floats(size_t(hd), -2, 2);
            r().from_f32[int(kv)](kr.data(), kbuf.data() + p * stride + head_bytes, hd);  // head 1 of 2
            r().from_f32[int(kv)](vr.data(), vbuf.data() + p * stride + head_bytes, hd);
            for (float x : vr) vmax = std::max(vmax, std::fabs(x));
          }
          auto q = rng.floats(size_t(hd), -3, 3);
          const size_t nk = size_t(k1 - k0), nd = size_t(hd + 1);
          const size_t ns = size_t(attn_scratch_floats(1, int64_t(nk), hd));
          std::vector<float> out(nd, 9.0f), out_ref(nd, 9.0f), scratch(ns), scratch_ref(ns);
          AttnRowArgs a{q.data(), kbuf.data() + head_bytes, vbuf.data() + head_bytes, stride, out.data(), scratch.data(),
                        hd, k0, k1, 1.0f / std::sqrt(float(hd)), softcap, ring};
          a.has_sink = sink;
          a.sink = rng.uniform(-1.0f, 3.0f);  // comparable to the scores: it takes a real share of the mass
          k().attn_row[int(kv)](a);
          a.out = out_ref.data();
          a.scratch = scratch_ref.data();
          r().attn_row[int(kv)](a);
          for (int64_t d = 0; d < hd; ++d)
            ASSERT_NEAR(out[size_t(d)], out_ref[size_t(d)], 1e-5 * vmax)
                << dtype_name(kv) << " head_dim " << hd << " keys [" << k0 << ", " << k1 << ") softcap " << softcap << " d " << d;
          ASSERT_EQ(out[size_t(hd)], 9.0f) << "wrote past head_dim";
        }
}

PIPIT_INSTANTIATE_ISA(Attention);

}  // namespace
}  // namespace pipit
