// Batch invariance of every matmul kernel of every ISA level: row m of an M-row matmul must be bit-identical to the
// same row computed alone (M = 1, the decode path), so continuous batching gives each sequence exactly the results
// of a solo run. Weight row ranges are whole 16-row chunks plus a tail, as ops.cpp splits them.
#include "core/panels.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

class MatmulInvariance : public IsaTest {};

TEST_P(MatmulInvariance, RowsEqualSoloRows) {
  const int64_t M = 11;
  // K = 2592: longer than the k chunks of the tiled float / bf16dot GEMMs (backends/cpu/matmul_tiles.h)
  for (int64_t K : {160, 2592})
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q8_0X16, DType::Q4_0X16,
                  DType::MXFP4, DType::BF16DOT}) {
    const bool panel = dtype_is_panel(t), quant = dtype_is_quantized(t);
    const int64_t N = panel ? 48 : 45;  // panels need N % 16 == 0
    const DType plain = dtype_unpanel(t);
    Rng rng(5);
    std::vector<uint8_t> w(size_t(N * dtype_row_bytes(plain, K)));
    for (int64_t n = 0; n < N; ++n) {
      auto wf = rng.floats(size_t(K), -1, 1);
      r().from_f32[int(plain == DType::BF16DOT ? DType::BF16 : plain)](wf.data(), w.data() + n * dtype_row_bytes(plain, K), K);
    }
    if (panel) {
      std::vector<uint8_t> packed(w.size());
      pack_panels(plain, w.data(), dtype_row_bytes(plain, K), N, K, packed.data());
      w.swap(packed);
    }
    auto xf = rng.floats(size_t(M * K), -2, 2);
    std::vector<BlockQ8Act> xq(size_t(M * K / kQBlock));
    r().quantize_act(xf.data(), K * 4, xq.data(), M, K);
    std::vector<bf16_t> xb(size_t(M * K));  // bf16dot takes x as bf16 rows
    for (size_t i = 0; i < xb.size(); ++i) xb[i] = f32_to_bf16(xf[i]);
    const bool bf = t == DType::BF16DOT;
    const void* x = quant ? static_cast<const void*>(xq.data()) : bf ? static_cast<const void*>(xb.data()) : xf.data();
    const int64_t xs = quant ? K / kQBlock * int64_t(sizeof(BlockQ8Act)) : bf ? K * 2 : K * 4;
    std::vector<float> all(static_cast<size_t>(M * N)), one(static_cast<size_t>(N));
    MatmulArgs a{x, xs, w.data(), dtype_row_bytes(plain, K), all.data(), N * 4, M, K};
    for (int64_t n0 = 0; n0 < N; n0 += 16) k().matmul[int(t)](a, n0, std::min(N, n0 + 16));
    for (int64_t m = 0; m < M; ++m) {
      MatmulArgs b{static_cast<const uint8_t*>(x) + m * xs, xs, w.data(), a.w_stride, one.data(), N * 4, 1, K};
      for (int64_t n0 = 0; n0 < N; n0 += 16) k().matmul[int(t)](b, n0, std::min(N, n0 + 16));
      for (int64_t n = 0; n < N; ++n)
        ASSERT_EQ(test::bits(one[size_t(n)]), test::bits(all[size_t(m * N + n)]))
            << dtype_name(t) << " K " << K << " row " << m << " of " << M << ", output " << n;
    }
  }
}

PIPIT_INSTANTIATE_ISA(MatmulInvariance);

}  // namespace
}  // namespace pipit
