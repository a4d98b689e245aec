// Panel matmuls (q4_0x16, q8_0x16, mxfp4x16: 16-row interleaved weights, core/dtype.h) of every ISA level against
// ref's plain q4_0 / q8_0 / mxfp4 matmul on the same weights before packing. As in matmul_quant_test.cpp: with every
// scale 1.0 the sums are exact integers and must match bit for bit; with random scales, |y - y_ref| <= 1e-5 sum_b
// |d_w d_a| sum_i |w_i a_i|. Also: packing round-trips, and a row's result is bit-identical whatever M is (batch
// invariance).
#include <cmath>

#include "backends/cpu/ref/ref.h"
#include "core/panels.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

struct PanelProblem {
  DType plain;
  int64_t M, K, N;
  std::vector<uint8_t> w, wp;  // plain rows, packed panels
  std::vector<BlockQ8Act> x;
  std::vector<float> y, yr;
  PanelProblem(DType t, int64_t M_, int64_t K_, int64_t N_)
      : plain(t), M(M_), K(K_), N(N_), w(size_t(N_ * dtype_row_bytes(t, K_))), wp(w.size()),
        x(size_t(M_ * K_ / kQBlock)), y(size_t(M_ * (N_ + 1)), -1.0f), yr(y) {}
  int64_t nb() const { return K / kQBlock; }
  int64_t row_bytes() const { return dtype_row_bytes(plain, K); }
  uint8_t* wrow(int64_t n) { return w.data() + n * row_bytes(); }
  BlockQ8Act& xb(int64_t m, int64_t b) { return x[size_t(m * nb() + b)]; }
  float dw(int64_t n, int64_t b) {
    if (plain == DType::MXFP4) return e8m0_half_to_f32(reinterpret_cast<BlockMXFP4*>(wrow(n))[b].e);
    return f16_to_f32(plain == DType::Q8_0 ? reinterpret_cast<BlockQ8_0*>(wrow(n))[b].d
                                           : reinterpret_cast<BlockQ4_0*>(wrow(n))[b].d);
  }
  int64_t abs_dot(int64_t m, int64_t n, int64_t b) {
    int64_t s = 0;
    for (int i = 0; i < kQBlock; ++i) {
      int wi;
      if (plain == DType::Q8_0) {
        wi = reinterpret_cast<BlockQ8_0*>(wrow(n))[b].qs[i];
      } else if (plain == DType::MXFP4) {
        const uint8_t byte = reinterpret_cast<BlockMXFP4*>(wrow(n))[b].qs[i % 16];
        wi = kMxfp4Int8[i < 16 ? byte & 0x0f : byte >> 4];
      } else {
        const uint8_t byte = reinterpret_cast<BlockQ4_0*>(wrow(n))[b].qs[i % 16];
        wi = int(i < 16 ? byte & 0x0f : byte >> 4) - 8;
      }
      s += std::abs(wi * int(xb(m, b).qs[i]));
    }
    return s;
  }
  void fill(Rng& rng, bool unit_scales) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t b = 0; b < nb(); ++b) {
        BlockQ8Act& blk = xb(m, b);
        blk.sum = 0;
        for (int i = 0; i < kQBlock; ++i) blk.sum += (blk.qs[i] = int8_t(rng.integer(-127, 127)));
        blk.d = unit_scales ? 1.0f : rng.uniform(1e-3f, 2e-2f);
      }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t b = 0; b < nb(); ++b) {
        const uint16_t d = unit_scales ? 0x3c00 : f32_to_f16(rng.uniform(-3e-2f, 3e-2f));
        if (plain == DType::Q8_0) {
          auto& blk = reinterpret_cast<BlockQ8_0*>(wrow(n))[b];
          blk.d = d;
          for (int i = 0; i < kQBlock; ++i) blk.qs[i] = int8_t(rng.integer(-128, 127));
        } else if (plain == DType::MXFP4) {  // 2^(e - 128): 1 at e = 128; random ones include the subnormal e < 2
          auto& blk = reinterpret_cast<BlockMXFP4*>(wrow(n))[b];
          blk.e = uint8_t(unit_scales ? 128 : (rng.integer(0, 9) == 0 ? rng.integer(0, 3) : rng.integer(115, 124)));
          for (int i = 0; i < kQBlock / 2; ++i) blk.qs[i] = uint8_t(rng.integer(0, 255));
        } else {
          auto& blk = reinterpret_cast<BlockQ4_0*>(wrow(n))[b];
          blk.d = d;
          for (int i = 0; i < kQBlock / 2; ++i) blk.qs[i] = uint8_t(rng.integer(0, 255));
        }
      }
    pack();
  }
  void pack() { pack_panels(plain, w.data(), row_bytes(), N, K, wp.data()); }
  // y (panel kernel of `k`) and yr (ref, plain weights) for rows [n0, n1).
  void run(const Kernels& k, int64_t n0, int64_t n1) {
    const int64_t xs = nb() * int64_t(sizeof(BlockQ8Act)), ys = (N + 1) * 4;
    MatmulArgs a{x.data(), xs, wp.data(), row_bytes(), y.data(), ys, M, K};
    k.matmul[int(dtype_panel_of(plain))](a, n0, n1);
    MatmulArgs r{x.data(), xs, w.data(), row_bytes(), yr.data(), ys, M, K};
    ref_kernels().matmul[int(plain)](r, n0, n1);
  }
  float out(int64_t m, int64_t n) const { return y[size_t(m * (N + 1) + n)]; }
  float ref(int64_t m, int64_t n) const { return yr[size_t(m * (N + 1) + n)]; }
};

constexpr DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::MXFP4};

class MatmulPanel : public IsaTest {
 protected:
  // Levels without a panel kernel of a type keep ref's (the loader does not pack it there): not tested again.
  std::vector<DType> types() const {
    std::vector<DType> out;
    for (DType t : kTypes)
      if (k().matmul[int(dtype_panel_of(t))] != r().matmul[int(dtype_panel_of(t))]) out.push_back(t);
    return out;
  }
};

TEST(PanelPack, RoundTrip) {
  for (DType t : kTypes) {
    PanelProblem p(t, 1, 96, 48);
    Rng rng(3);
    p.fill(rng, false);
    std::vector<uint8_t> back(p.w.size());
    unpack_panel_rows(dtype_panel_of(t), p.wp.data(), p.K, 0, p.N, back.data());
    EXPECT_EQ(back, p.w) << dtype_name(t);
    std::vector<uint8_t> one(size_t(p.row_bytes()));  // a single row from the middle of a panel
    unpack_panel_rows(dtype_panel_of(t), p.wp.data(), p.K, 21, 22, one.data());
    EXPECT_EQ(0, std::memcmp(one.data(), p.wrow(21), one.size())) << dtype_name(t);
  }
}

// 1..16: the batched-decode path (one panel at a time, tiles of 8 rows), 17: the GEMM tiles
const int64_t kMs[] = {1, 2, 3, 7, 8, 9, 16, 17};
struct Range { int64_t N, n0, n1; };
// kernels may take several panels per tile (AVX-512: 3): ranges of 1 to 5 panels, whole and offset
const Range kRanges[] = {{16, 0, 16}, {48, 0, 48}, {48, 16, 32}, {64, 32, 64}, {64, 0, 64}, {96, 16, 96}};

TEST_P(MatmulPanel, UnitScalesExact) {
  uint32_t seed = 1;
  for (DType t : types())
    for (int64_t K : {32, 64, 96, 4096})
      for (int64_t M : kMs)
        for (const Range& rg : kRanges) {
          PanelProblem p(t, M, K, rg.N);
          Rng rng(seed++);
          p.fill(rng, true);
          p.run(k(), rg.n0, rg.n1);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n <= rg.N; ++n) {
              if (n < rg.n0 || n >= rg.n1) {  // untouched outside the range
                ASSERT_EQ(p.out(m, n), -1.0f) << dtype_name(t) << " M " << M << " m " << m << " n " << n;
              } else {
                ASSERT_EQ(p.out(m, n), p.ref(m, n)) << dtype_name(t) << " M " << M << " K " << K << " m " << m << " n " << n;
              }
            }
        }
}

// q8 weights -128 / 127, q4 nibbles 0 / 15, mxfp4 +-6 (doubled +-12: unsigned 24 / 0; all +6 fills AVX2's int16
// partial sums to their bound), activations +-127
TEST_P(MatmulPanel, ExtremeValuesExact) {
  for (DType t : types())
    for (int pattern = 0; pattern < 4; ++pattern) {
      PanelProblem p(t, 3, 128, 32);
      Rng rng(7);
      p.fill(rng, true);
      for (int64_t m = 0; m < p.M; ++m)
        for (int64_t b = 0; b < p.nb(); ++b) {
          BlockQ8Act& blk = p.xb(m, b);
          blk.sum = 0;
          for (int i = 0; i < kQBlock; ++i) blk.sum += (blk.qs[i] = int8_t((pattern & 1) ? 127 : ((i + m) % 2 ? 127 : -127)));
        }
      for (int64_t n = 0; n < p.N; ++n)
        for (int64_t b = 0; b < p.nb(); ++b) {
          if (t == DType::Q8_0) {
            auto& blk = reinterpret_cast<BlockQ8_0*>(p.wrow(n))[b];
            for (int i = 0; i < kQBlock; ++i) blk.qs[i] = int8_t((pattern & 2) ? -128 : ((i + n) % 3 ? 127 : -128));
          } else if (t == DType::MXFP4) {
            auto& blk = reinterpret_cast<BlockMXFP4*>(p.wrow(n))[b];
            for (int i = 0; i < kQBlock / 2; ++i)
              blk.qs[i] = uint8_t((pattern & 2) ? 0x77 : ((i + n) % 2 ? 0x7f : 0xf7));
          } else {
            auto& blk = reinterpret_cast<BlockQ4_0*>(p.wrow(n))[b];
            for (int i = 0; i < kQBlock / 2; ++i) blk.qs[i] = uint8_t((pattern & 2) ? 0x00 : ((i + n) % 2 ? 0xf0 : 0x0f));
          }
        }
      p.pack();
      p.run(k(), 0, p.N);
      for (int64_t m = 0; m < p.M; ++m)
        for (int64_t n = 0; n < p.N; ++n)
          ASSERT_EQ(p.out(m, n), p.ref(m, n)) << dtype_name(t) << " pattern " << pattern << " m " << m << " n " << n;
    }
}

TEST_P(MatmulPanel, RandomScalesBound) {
  uint32_t seed = 2000;
  for (DType t : types())
    for (int64_t K : {32, 96, 1024})
      for (int64_t M : kMs) {
        PanelProblem p(t, M, K, 48);
        Rng rng(seed++);
        p.fill(rng, false);
        p.run(k(), 0, 48);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < 48; ++n) {
            double bound = 0;
            for (int64_t b = 0; b < p.nb(); ++b)
              bound += std::fabs(double(p.dw(n, b)) * p.xb(m, b).d) * double(p.abs_dot(m, n, b));
            ASSERT_NEAR(p.out(m, n), p.ref(m, n), 1e-5 * bound + 1e-30)
                << dtype_name(t) << " M " << M << " K " << K << " m " << m << " n " << n;
          }
      }
}

TEST_P(MatmulPanel, RowsIndependentOfM) {  // engine batching: a row's result must not depend on the batch size
  for (DType t : types()) {
    PanelProblem big(t, 17, 256, 64);
    Rng rng(99);
    big.fill(rng, false);
    big.run(k(), 0, 64);
    for (int64_t m = 0; m < big.M; ++m) {
      PanelProblem one(t, 1, 256, 64);
      one.w = big.w;
      one.wp = big.wp;
      for (int64_t b = 0; b < big.nb(); ++b) one.xb(0, b) = big.xb(m, b);
      one.run(k(), 0, 64);
      for (int64_t n = 0; n < 64; ++n)
        ASSERT_EQ(test::bits(one.out(0, n)), test::bits(big.out(m, n))) << dtype_name(t) << " m " << m << " n " << n;
    }
  }
}

// AVX-VNNI replaces AVX2's vpmaddubsw + vpmaddwd with vpdpbusd: the same int32 sums, so the same output bits
// (decode and prefill tiles, every M tail).
TEST(MatmulPanelLevels, AvxVnniEqualsAvx2Bits) {
  const std::vector<std::string> levels = test::isa_levels();
  if (std::find(levels.begin(), levels.end(), "avxvnni") == levels.end()) GTEST_SKIP() << "no AVX-VNNI on this CPU";
  for (DType t : kTypes)
    for (int64_t M : {1, 2, 3, 4, 5, 7, 9}) {
      PanelProblem a(t, M, 512, 48), b(t, M, 512, 48);
      Rng rng(uint32_t(7 + M));
      a.fill(rng, false);
      b.w = a.w;
      b.wp = a.wp;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < a.nb(); ++i) b.xb(m, i) = a.xb(m, i);
      a.run(test::kernels_for("avx2"), 0, 48);
      b.run(test::kernels_for("avxvnni"), 0, 48);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < 48; ++n)
          ASSERT_EQ(test::bits(a.out(m, n)), test::bits(b.out(m, n))) << dtype_name(t) << " M " << M << " m " << m
                                                                      << " n " << n;
    }
}

PIPIT_INSTANTIATE_ISA(MatmulPanel);

}  // namespace
}  // namespace pipit
