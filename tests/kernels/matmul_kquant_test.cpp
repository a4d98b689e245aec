// Matmuls of llama.cpp's block formats (q4_K, q5_K, q6_K, iq4_xs with SIMD kernels; q2_K, q3_K, iq4_nl, q4_1, q5_0
// and q5_1 as panels only; q8_K on the reference's generic path) against BlockQ8Act activations:
//  - ref against a double-precision sum over the dequantized weights (to_f32, bit-identical to ggml) times the
//    dequantized activations: |y - y64| <= 1e-5 sum |w_k a_k| (f32 rounding of the partial sums, nothing more);
//  - every ISA level equals ref bit for bit (the kernels do ref's per-group fused multiply-adds in ref's order, one
//    f32 lane per output);
//  - batch invariance: row m of an M-row matmul is bit-identical to the row computed alone, for every ISA level;
//  - output rows outside [n0, n1) are untouched;
//  - panels (q2_kx16 .. q6_kx16, iq4_xsx16, iq4_nlx16, q4_1x16, q5_0x16, q5_1x16, as the loader packs them):
//    packing round-trips byte for byte, and every ISA level's panel kernel equals ref's plain kernel on the unpacked
//    weights bit for bit, batch-invariantly.
#include <cmath>

#include "backends/cpu/ref/ref.h"
#include "core/panels.h"
#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

const DType kTypes[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::IQ4_NL, DType::Q2_K,
                        DType::Q3_K, DType::Q4_1, DType::Q5_0, DType::Q5_1,   DType::Q8_K};

// Byte offsets of the f16 scales inside each block (random bytes there could be inf / NaN).
std::vector<int> f16_offsets(DType t) {
  switch (t) {
    case DType::Q4_K: case DType::Q5_K: case DType::Q4_1: case DType::Q5_1: return {0, 2};
    case DType::Q6_K: return {208};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q5_0: case DType::IQ4_NL: case DType::IQ4_XS: return {0};
    default: return {};
  }
}

// N rows of K random weights of type t: random bytes, scales replaced by finite values of either sign.
std::vector<uint8_t> random_weights(DType t, int64_t N, int64_t K, Rng& rng) {
  const int64_t rb = dtype_row_bytes(t, K), bb = dtype_info(t).block_bytes;
  std::vector<uint8_t> w(size_t(N * rb));
  for (auto& b : w) b = uint8_t(rng.integer(0, 255));
  for (int64_t off = 0; off < N * rb; off += bb) {
    for (int o : f16_offsets(t)) {
      const f16_t h = f32_to_f16(rng.uniform(-1.0f, 1.0f) * 0.01f);
      std::memcpy(&w[size_t(off + o)], &h, 2);
    }
    if (t == DType::Q8_K) {
      const float d = rng.uniform(-1.0f, 1.0f) * 0.01f;
      std::memcpy(&w[size_t(off)], &d, 4);
    }
  }
  return w;
}

std::vector<BlockQ8Act> random_act(int64_t M, int64_t K, Rng& rng) {
  std::vector<BlockQ8Act> x(size_t(M * K / kQBlock));
  for (auto& b : x) {
    b.sum = 0;
    for (auto& q : b.qs) {
      q = int8_t(rng.integer(-127, 127));
      b.sum += q;
    }
    b.d = rng.uniform(1e-3f, 2e-2f);
  }
  return x;
}

struct Case {
  DType t;
  int64_t M, K, N;
  std::vector<uint8_t> w;
  std::vector<BlockQ8Act> x;
  std::vector<float> wf;  // dequantized weights
  Case(DType t_, int64_t M_, int64_t K_, int64_t N_, uint32_t seed) : t(t_), M(M_), K(K_), N(N_) {
    Rng rng(seed);
    w = random_weights(t, N, K, rng);
    x = random_act(M, K, rng);
    wf.resize(size_t(N * K));
    for (int64_t n = 0; n < N; ++n) ref_kernels().to_f32[int(t)](w.data() + n * rb(), wf.data() + n * K, K);
  }
  int64_t rb() const { return dtype_row_bytes(t, K); }
  int64_t xs() const { return K / kQBlock * int64_t(sizeof(BlockQ8Act)); }
  float act(int64_t m, int64_t k) const {
    const BlockQ8Act& b = x[size_t(m * (K / kQBlock) + k / kQBlock)];
    return b.d * float(b.qs[k % kQBlock]);
  }
  // y[m, n] for n in [n0, n1) by `fn`; other entries keep the guard value
  std::vector<float> run(MatmulFn fn, int64_t n0, int64_t n1, int64_t m0 = 0, int64_t m1 = -1) const {
    if (m1 < 0) m1 = M;
    std::vector<float> y(size_t(M * N), -7.0f);
    MatmulArgs a{reinterpret_cast<const uint8_t*>(x.data()) + m0 * xs(), xs(), w.data(), rb(), y.data() + m0 * N,
                 N * 4, m1 - m0, K};
    fn(a, n0, n1);
    return y;
  }
  void bound(int64_t m, int64_t n, double* y64, double* absum) const {
    *y64 = 0, *absum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double p = double(wf[size_t(n * K + k)]) * double(act(m, k));
      *y64 += p, *absum += std::fabs(p);
    }
  }
};

TEST(MatmulKQuantRef, MatchesDequantizedDoubleSum) {
  uint32_t seed = 1;
  for (DType t : kTypes)
    for (int64_t K : {256, 768}) {
      Case c(t, 3, K, 9, seed++);
      const auto y = c.run(ref_kernels().matmul[int(t)], 0, c.N);
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = 0; n < c.N; ++n) {
          double y64, absum;
          c.bound(m, n, &y64, &absum);
          ASSERT_NEAR(y[size_t(m * c.N + n)], y64, 1e-5 * absum + 1e-30)
              << dtype_name(t) << " K " << K << " m " << m << " n " << n;
        }
    }
}

class MatmulKQuant : public IsaTest {};

TEST_P(MatmulKQuant, MatchesRefAndLeavesOtherRows) {
  uint32_t seed = 100;
  for (DType t : kTypes) {
    if (inherited([t](const Kernels& k) { return k.matmul[int(t)]; })) continue;
    for (int64_t M : {1, 2, 5, 9})
      for (int64_t K : {256, 1024}) {
        Case c(t, M, K, 37, seed++);
        const auto yr = c.run(r().matmul[int(t)], 3, 35);
        const auto y = c.run(k().matmul[int(t)], 3, 35);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < c.N; ++n) {
            const size_t i = size_t(m * c.N + n);
            if (n < 3 || n >= 35) {
              ASSERT_EQ(y[i], -7.0f) << dtype_name(t) << " wrote outside [n0, n1) at m " << m << " n " << n;
              continue;
            }
            ASSERT_EQ(test::bits(y[i]), test::bits(yr[i]))
                << dtype_name(t) << " M " << M << " K " << K << " m " << m << " n " << n << ": " << y[i] << " vs "
                << yr[i];
          }
      }
  }
}

TEST_P(MatmulKQuant, RowsEqualSoloRows) {
  uint32_t seed = 500;
  for (DType t : kTypes) {
    if (inherited([t](const Kernels& k) { return k.matmul[int(t)]; })) continue;
    Case c(t, 11, 512, 45, seed++);
    std::vector<float> all(size_t(c.M * c.N));
    for (int64_t n0 = 0; n0 < c.N; n0 += 16) {  // as ops.cpp splits: 16-row chunks and a tail
      const auto part = c.run(k().matmul[int(t)], n0, std::min(c.N, n0 + 16));
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = n0; n < std::min(c.N, n0 + 16); ++n) all[size_t(m * c.N + n)] = part[size_t(m * c.N + n)];
    }
    for (int64_t m = 0; m < c.M; ++m) {
      const auto solo = c.run(k().matmul[int(t)], 0, c.N, m, m + 1);
      for (int64_t n = 0; n < c.N; ++n)
        ASSERT_EQ(test::bits(all[size_t(m * c.N + n)]), test::bits(solo[size_t(m * c.N + n)]))
            << dtype_name(t) << " m " << m << " n " << n;
    }
  }
}

const DType kPanelTypes[] = {DType::Q4_K,   DType::Q5_K,   DType::Q6_K, DType::Q2_K, DType::Q3_K,
                             DType::IQ4_XS, DType::IQ4_NL, DType::Q5_0, DType::Q4_1, DType::Q5_1};

// c's weights packed into panels (c.N % 16 == 0), and y = fn on them over [n0, n1), like Case::run.
struct Packed {
  const Case& c;
  std::vector<uint8_t> wp;
  explicit Packed(const Case& c_) : c(c_), wp(size_t(c_.N * dtype_row_bytes(panel_dtype_for(c_.t), c_.K))) {
    pack_panels(c.t, c.w.data(), c.rb(), c.N, c.K, wp.data());
  }
  std::vector<float> run(MatmulFn fn, int64_t n0, int64_t n1, int64_t m0 = 0, int64_t m1 = -1) const {
    if (m1 < 0) m1 = c.M;
    std::vector<float> y(size_t(c.M * c.N), -7.0f);
    MatmulArgs a{reinterpret_cast<const uint8_t*>(c.x.data()) + m0 * c.xs(), c.xs(), wp.data(), c.rb(),
                 y.data() + m0 * c.N, c.N * 4, m1 - m0, c.K};
    fn(a, n0, n1);
    return y;
  }
};

TEST(KQuantPanelPack, RoundTrip) {
  uint32_t seed = 900;
  for (DType t : kPanelTypes) {
    Case c(t, 1, 768, 48, seed++);
    Packed p(c);
    EXPECT_EQ(p.wp.size(), size_t(c.N * dtype_row_bytes(dtype_panel_of(t), c.K))) << dtype_name(t);
    std::vector<uint8_t> back(c.w.size());
    unpack_panel_rows(dtype_panel_of(t), p.wp.data(), c.K, 0, c.N, back.data());
    EXPECT_EQ(back, c.w) << dtype_name(t);
    std::vector<uint8_t> one(size_t(c.rb()));  // one row from the middle of a panel
    unpack_panel_rows(dtype_panel_of(t), p.wp.data(), c.K, 21, 22, one.data());
    EXPECT_EQ(0, std::memcmp(one.data(), c.w.data() + 21 * c.rb(), one.size())) << dtype_name(t);
  }
}

TEST_P(MatmulKQuant, PanelsEqualPlainRef) {
  uint32_t seed = 700;
  for (DType t : kPanelTypes) {
    const DType pt = panel_dtype_for(t);
    if (inherited([pt](const Kernels& k) { return k.matmul[int(pt)]; })) continue;
    // kernels may take several panels and rows per tile (AVX-512 q4_K / q5_K: 2 panels x 5 rows): 1 to 4 panels,
    // M with tails
    for (auto [n0, n1] : {std::pair<int64_t, int64_t>{16, 48}, {0, 64}, {16, 64}})
    for (int64_t M : {1, 2, 3, 4, 5, 7, 8, 9, 11})
      for (int64_t K : {256, 1024}) {
        Case c(t, M, K, 64, seed++);
        Packed p(c);
        const auto yr = c.run(r().matmul[int(t)], n0, n1);
        const auto y = p.run(k().matmul[int(pt)], n0, n1);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < c.N; ++n) {
            const size_t i = size_t(m * c.N + n);
            if (n < n0 || n >= n1) {
              ASSERT_EQ(y[i], -7.0f) << dtype_name(pt) << " wrote outside [n0, n1) at m " << m << " n " << n;
              continue;
            }
            ASSERT_EQ(test::bits(y[i]), test::bits(yr[i]))
                << dtype_name(pt) << " M " << M << " K " << K << " m " << m << " n " << n << ": " << y[i] << " vs "
                << yr[i];
          }
      }
  }
}

// The int16 partial sums' worst cases (see matmul_kpanel_avx2.h, matmul_kpanel_lowbit_avx2.h): every quant byte 0xff
// or 0x00 (q4_K / q5_K nibbles 15 / 31 or 0, q6_K q - 32 = 31 or -32, q2_K q 3 or 0, q3_K q - 4 !hbit = 3 or -4,
// iq4_xs / iq4_nl 113 or -127: AVX2's |value| x sign pair sums at 2 * 127 * 127), scale bytes kept random,
// activations all +127 or all -127.
TEST_P(MatmulKQuant, PanelsExtremeValuesExact) {
  uint32_t seed = 950;
  for (DType t : kPanelTypes) {
    const DType pt = panel_dtype_for(t);
    if (inherited([pt](const Kernels& k) { return k.matmul[int(pt)]; })) continue;
    for (int pattern = 0; pattern < 4; ++pattern) {
      Case c(t, 3, 512, 32, seed++);
      const uint8_t fill = (pattern & 1) ? 0xff : 0x00;
      const int8_t av = (pattern & 2) ? 127 : -127;
      // quant bytes: everything but the f16 / scale bytes (q4_K / q5_K, iq4_xs, iq4_nl: at the front; q6_K, q3_K:
      // at the back; q2_K: 16 scale bytes, 64 quant bytes, d and dmin)
      const int64_t bb = dtype_info(t).block_bytes;
      int64_t q0 = 16, q1 = bb;
      if (t == DType::Q6_K) q0 = 0, q1 = 192;
      if (t == DType::Q3_K) q0 = 0, q1 = 96;
      if (t == DType::Q2_K) q0 = 16, q1 = 80;
      if (t == DType::IQ4_XS) q0 = 8;
      if (t == DType::IQ4_NL || t == DType::Q5_0) q0 = 2;  // q5_0: qh and qs, q - 16 = 15 or -16
      if (t == DType::Q4_1 || t == DType::Q5_1) q0 = 4;    // q 15 / 31 (AVX2: 8 / 4 steps per int16 partial) or 0
      for (int64_t off = 0; off < int64_t(c.w.size()); off += bb)
        std::memset(&c.w[size_t(off + q0)], fill, size_t(q1 - q0));
      for (auto& b : c.x) {
        std::memset(b.qs, uint8_t(av), sizeof(b.qs));
        b.sum = int32_t(av) * kQBlock;
      }
      Packed p(c);
      const auto yr = c.run(r().matmul[int(t)], 0, c.N);
      const auto y = p.run(k().matmul[int(pt)], 0, c.N);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(test::bits(y[i]), test::bits(yr[i])) << dtype_name(pt) << " pattern " << pattern << " at " << i;
    }
  }
}

TEST_P(MatmulKQuant, PanelRowsEqualSoloRows) {
  uint32_t seed = 800;
  for (DType t : kPanelTypes) {
    const DType pt = panel_dtype_for(t);
    if (inherited([pt](const Kernels& k) { return k.matmul[int(pt)]; })) continue;
    Case c(t, 7, 512, 32, seed++);
    Packed p(c);
    std::vector<float> all(size_t(c.M * c.N));
    for (int64_t n0 = 0; n0 < c.N; n0 += 16) {  // as ops.cpp splits: 16-row chunks
      const auto part = p.run(k().matmul[int(pt)], n0, n0 + 16);
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = n0; n < n0 + 16; ++n) all[size_t(m * c.N + n)] = part[size_t(m * c.N + n)];
    }
    for (int64_t m = 0; m < c.M; ++m) {
      const auto solo = p.run(k().matmul[int(pt)], 0, c.N, m, m + 1);
      for (int64_t n = 0; n < c.N; ++n)
        ASSERT_EQ(test::bits(all[size_t(m * c.N + n)]), test::bits(solo[size_t(m * c.N + n)]))
            << dtype_name(pt) << " m " << m << " n " << n;
    }
  }
}

PIPIT_INSTANTIATE_ISA(MatmulKQuant);

}  // namespace
}  // namespace pipit
