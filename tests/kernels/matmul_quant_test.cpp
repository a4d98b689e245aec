// Quantized matmuls (q8_0, q4_0 weights x BlockQ8Act activations) of every ISA level against ref.
// Integer exactness is checked two ways: (1) with every scale 1.0 the result is a sum of exact integers below 2^24,
// so any order of f32 additions gives the same float and y must equal ref bit for bit, for K up to 4096;
// (2) with one block (K = 32) and random scales, y / (d_w d_a) rounds to the exact integer dot of ref.
// With random scales the f32 accumulation may differ: |y - y_ref| <= 1e-5 sum_b |d_w d_a| sum_i |w_i a_i| (partial
// sums of a block's lanes may be larger than the block's total, so the bound is on absolute products).
#include <cmath>

#include "backends/cpu/ref/ref.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;
using test::Rows;

constexpr uint16_t kF16One = 0x3c00;

enum class Scales { kOne, kRandom };

struct Problem {
  DType wt;
  int64_t M, K, N;
  Rows x, w, y, yr;
  Problem(DType t, int64_t M_, int64_t K_, int64_t N_)
      : wt(t), M(M_), K(K_), N(N_),
        x(M_, K_ / kQBlock * int64_t(sizeof(BlockQ8Act)) + 8),  // padded: rows are not contiguous
        w(N_, dtype_row_bytes(t, K_) + 2),
        y(M_, (N_ + 3) * 4),
        yr(M_, (N_ + 3) * 4) {}
  int64_t nb() const { return K / kQBlock; }
  BlockQ8Act* xb(int64_t m) { return x.row_as<BlockQ8Act>(m); }
  MatmulArgs args(float* out) { return {x.bytes.data(), x.stride, w.bytes.data(), w.stride, out, y.stride, M, K}; }

  // Random int8 activations in [-127, 127] (what quantize_act produces) and random weight bytes.
  void fill(Rng& rng, Scales s) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t b = 0; b < nb(); ++b) {
        BlockQ8Act& blk = xb(m)[b];
        blk.sum = 0;
        for (int i = 0; i < kQBlock; ++i) {
          blk.qs[i] = int8_t(rng.integer(-127, 127));
          blk.sum += blk.qs[i];
        }
        blk.d = s == Scales::kOne ? 1.0f : rng.uniform(1e-3f, 2e-2f);
      }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t b = 0; b < nb(); ++b) {
        const uint16_t d = s == Scales::kOne ? kF16One : f32_to_f16(rng.uniform(-3e-2f, 3e-2f));
        if (wt == DType::Q8_0) {
          auto& blk = reinterpret_cast<BlockQ8_0*>(w.row(n))[b];
          blk.d = d;
          for (int i = 0; i < kQBlock; ++i) blk.qs[i] = int8_t(rng.integer(-128, 127));
        } else {
          auto& blk = reinterpret_cast<BlockQ4_0*>(w.row(n))[b];
          blk.d = d;
          for (int i = 0; i < kQBlock / 2; ++i) blk.qs[i] = uint8_t(rng.integer(0, 255));
        }
      }
  }
  int32_t isum(int64_t m, int64_t n, int64_t b) {
    if (wt == DType::Q8_0) return ref::dot_q8_0_block(reinterpret_cast<const BlockQ8_0*>(w.row(n))[b], xb(m)[b]);
    return ref::dot_q4_0_block(reinterpret_cast<const BlockQ4_0*>(w.row(n))[b], xb(m)[b]);
  }
  int64_t abs_dot(int64_t m, int64_t n, int64_t b) {
    int64_t s = 0;
    for (int i = 0; i < kQBlock; ++i) {
      int wi;
      if (wt == DType::Q8_0) {
        wi = reinterpret_cast<const BlockQ8_0*>(w.row(n))[b].qs[i];
      } else {
        const uint8_t byte = reinterpret_cast<const BlockQ4_0*>(w.row(n))[b].qs[i % 16];
        wi = int(i < 16 ? byte & 0x0f : byte >> 4) - 8;
      }
      s += std::abs(wi * int(xb(m)[b].qs[i]));
    }
    return s;
  }
  float dw(int64_t n, int64_t b) {
    return f16_to_f32(wt == DType::Q8_0 ? reinterpret_cast<const BlockQ8_0*>(w.row(n))[b].d
                                        : reinterpret_cast<const BlockQ4_0*>(w.row(n))[b].d);
  }
};

class MatmulQuant : public IsaTest {
 protected:
  void run(Problem& p, int64_t n0, int64_t n1) {
    MatmulArgs a = p.args(p.y.row_as<float>(0));
    k().matmul[int(p.wt)](a, n0, n1);
    a.y = p.yr.row_as<float>(0);
    r().matmul[int(p.wt)](a, n0, n1);
  }
  // Outside [n0, n1) the guard bytes must be intact.
  void check_untouched(Problem& p, int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t n = 0; n < p.N + 3; ++n)
        if (n < n0 || n >= n1) {
          ASSERT_EQ(test::bits(p.y.row_as<float>(m)[n]), test::bits(p.yr.row_as<float>(m)[n])) << "m " << m << " n " << n;
        }
  }
};

const int64_t kMs[] = {1, 2, 3, 5, 8, 17};
struct Range { int64_t N, n0, n1; };
const Range kRanges[] = {{37, 0, 37}, {37, 3, 29}, {40, 16, 32}, {9, 5, 6}};

TEST_P(MatmulQuant, UnitScalesExact) {
  uint32_t seed = 1;
  for (DType wt : {DType::Q8_0, DType::Q4_0})
    for (int64_t K : {32, 64, 96, 4096})
      for (int64_t M : kMs)
        for (const Range& rg : kRanges) {
          Problem p(wt, M, K, rg.N);
          Rng rng(seed++);
          p.fill(rng, Scales::kOne);
          run(p, rg.n0, rg.n1);
          check_untouched(p, rg.n0, rg.n1);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = rg.n0; n < rg.n1; ++n)
              ASSERT_EQ(p.y.row_as<float>(m)[n], p.yr.row_as<float>(m)[n])
                  << dtype_name(wt) << " M " << M << " K " << K << " at m " << m << " n " << n;
        }
}

TEST_P(MatmulQuant, SingleBlockIntegerDot) {
  uint32_t seed = 1000;
  for (DType wt : {DType::Q8_0, DType::Q4_0})
    for (int64_t M : kMs)
      for (const Range& rg : kRanges) {
        Problem p(wt, M, kQBlock, rg.N);
        Rng rng(seed++);
        p.fill(rng, Scales::kRandom);
        run(p, rg.n0, rg.n1);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = rg.n0; n < rg.n1; ++n) {
            const double s = double(p.dw(n, 0)) * double(p.xb(m)[0].d);
            ASSERT_EQ(std::llround(p.y.row_as<float>(m)[n] / s), p.isum(m, n, 0))
                << dtype_name(wt) << " M " << M << " at m " << m << " n " << n;
          }
      }
}

TEST_P(MatmulQuant, ExtremeValuesExact) {  // saturation corners: q8 weights -128 / 127, q4 nibbles 0 / 15, a = +-127
  for (DType wt : {DType::Q8_0, DType::Q4_0})
    for (int pattern = 0; pattern < 4; ++pattern) {
      Problem p(wt, 3, 128, 9);
      Rng rng(7);
      p.fill(rng, Scales::kOne);
      for (int64_t m = 0; m < p.M; ++m)
        for (int64_t b = 0; b < p.nb(); ++b) {
          BlockQ8Act& blk = p.xb(m)[b];
          blk.sum = 0;
          for (int i = 0; i < kQBlock; ++i) {
            blk.qs[i] = int8_t((pattern & 1) ? 127 : ((i + m) % 2 ? 127 : -127));
            blk.sum += blk.qs[i];
          }
        }
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t b = 0; b < p.nb(); ++b) {
          if (wt == DType::Q8_0) {
            auto& blk = reinterpret_cast<BlockQ8_0*>(p.w.row(n))[b];
            for (int i = 0; i < kQBlock; ++i) blk.qs[i] = int8_t((pattern & 2) ? -128 : ((i + n) % 3 ? 127 : -128));
          } else {
            auto& blk = reinterpret_cast<BlockQ4_0*>(p.w.row(n))[b];
            for (int i = 0; i < kQBlock / 2; ++i) blk.qs[i] = uint8_t((pattern & 2) ? 0x00 : ((i + n) % 2 ? 0xf0 : 0x0f));
          }
        }
      run(p, 0, p.N);
      for (int64_t m = 0; m < p.M; ++m)
        for (int64_t n = 0; n < p.N; ++n)
          ASSERT_EQ(p.y.row_as<float>(m)[n], p.yr.row_as<float>(m)[n])
              << dtype_name(wt) << " pattern " << pattern << " at m " << m << " n " << n;
    }
}

TEST_P(MatmulQuant, RandomScalesLongK) {
  uint32_t seed = 2000;
  for (DType wt : {DType::Q8_0, DType::Q4_0})
    for (int64_t K : {32, 96, 4096})
      for (int64_t M : kMs) {
        Problem p(wt, M, K, 37);
        Rng rng(seed++);
        p.fill(rng, Scales::kRandom);
        run(p, 2, 35);
        check_untouched(p, 2, 35);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 2; n < 35; ++n) {
            double bound = 0;
            for (int64_t b = 0; b < p.nb(); ++b)
              bound += std::fabs(double(p.dw(n, b)) * p.xb(m)[b].d) * double(p.abs_dot(m, n, b));
            ASSERT_NEAR(p.y.row_as<float>(m)[n], p.yr.row_as<float>(m)[n], 1e-5 * bound + 1e-30)
                << dtype_name(wt) << " M " << M << " K " << K << " at m " << m << " n " << n;
          }
      }
}

PIPIT_INSTANTIATE_ISA(MatmulQuant);

}  // namespace
}  // namespace pipit
