// Float-weight matmuls (f32, f16, bf16 weights with f32 activations; bf16dot: bf16 weights and activations) of every
// ISA level against ref, for
// K in {1, 31, 32, 33, 64, 4095}, M in {1, 2, 3, 5, 8, 17}, weight-row ranges [n0, n1) with tails, and padded
// (odd) strides. Tolerance: |y - y_ref| <= 1e-5 * sum_k |x_k w_k| — both sums are f32 in a different order, and for
// K <= 4096 that rounding stays far below 1e-5 of the absolute sum. Outputs outside [n0, n1) must stay untouched.
#include <cmath>

#include "backends/cpu/ref/ref.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;
using test::Rows;

constexpr double kRtol = 1e-5;

class MatmulFloat : public IsaTest {
 protected:
  void check(DType wt, int64_t M, int64_t K, int64_t N, int64_t n0, int64_t n1, uint32_t seed) {
    Rng rng(seed);
    const int64_t esz = wt == DType::F32 ? 4 : 2;
    const bool bf16_x = wt == DType::BF16DOT;  // bf16dot: x comes as bf16 rows, the weights are bf16's bytes
    const DType wfmt = bf16_x ? DType::BF16 : wt;
    Rows x(M, K * 4 + 12), w(N, K * esz + 8), y(M, (N + 3) * 4), yr(M, (N + 3) * 4);  // padded, aligned rows
    std::vector<float> wf(size_t(N * K)), xf(size_t(M * K));  // as f32, for the error bound
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        const float v = rng.uniform(-1, 1);
        if (bf16_x) reinterpret_cast<bf16_t*>(x.row(m))[k] = f32_to_bf16(v);
        else x.row_as<float>(m)[k] = v;
        xf[m * K + k] = bf16_x ? bf16_to_f32(f32_to_bf16(v)) : v;
      }
    for (int64_t n = 0; n < N; ++n) {
      auto v = rng.floats(size_t(K));
      r().from_f32[int(wfmt)](v.data(), w.row(n), K);
      r().to_f32[int(wfmt)](w.row(n), &wf[n * K], K);
    }
    MatmulArgs a{x.bytes.data(), x.stride, w.bytes.data(), w.stride, y.row_as<float>(0), y.stride, M, K};
    k().matmul[int(wt)](a, n0, n1);
    a.y = yr.row_as<float>(0);
    r().matmul[int(wt)](a, n0, n1);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N + 3; ++n) {
        const float got = y.row_as<float>(m)[n], want = yr.row_as<float>(m)[n];
        if (n < n0 || n >= n1) {  // untouched: still the guard pattern
          ASSERT_EQ(test::bits(got), test::bits(want)) << "wrote outside [n0, n1) at m " << m << " n " << n;
          continue;
        }
        double bound = 0;
        for (int64_t kk = 0; kk < K; ++kk) bound += std::fabs(double(xf[m * K + kk]) * wf[n * K + kk]);
        ASSERT_NEAR(got, want, kRtol * bound + 1e-30)
            << dtype_name(wt) << " M " << M << " K " << K << " [" << n0 << ", " << n1 << ") at m " << m << " n " << n;
      }
    }
  }
};

TEST_P(MatmulFloat, AllShapes) {
  uint32_t seed = 1;
  for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::BF16DOT}) {
    if (inherited([&](const Kernels& t) { return t.matmul[int(wt)]; })) continue;
    for (int64_t K : {1, 31, 32, 33, 64, 4095})
      for (int64_t M : {1, 2, 3, 5, 8, 17}) {
        check(wt, M, K, 37, 0, 37, seed++);  // all rows: full tiles and a tail of 5
        check(wt, M, K, 37, 3, 29, seed++);  // a range starting and ending mid-tile
        check(wt, M, K, 40, 16, 32, seed++);  // one aligned 16-row chunk, as ops.cpp splits work
        check(wt, M, K, 9, 5, 6, seed++);    // a single row
      }
  }
}

TEST_P(MatmulFloat, DecodeSizes) {  // the GEMV shapes of a real layer, M = 1 and a short prompt
  for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::BF16DOT}) {
    check(wt, 1, 1024, 48, 0, 48, 101);
    check(wt, 4, 896, 35, 0, 35, 102);
  }
}

PIPIT_INSTANTIATE_ISA(MatmulFloat);

}  // namespace
}  // namespace pipit
