// Row kernels of every ISA level against ref at n in {1, 31, 32, 33, 64, 4095}, rows starting at odd offsets.
// Tolerances (stated per op):
//   add, scale: bit-identical (one rounding per element, as ref).
//   rms_norm:   |y - y_ref| <= 2e-6 |y_ref| + 1e-7 |x r w'| (only the sum of squares is reordered).
//   swiglu:     |y - y_ref| <= 1e-6 |y_ref| + 1e-30          (vector exp: <= 2 ulp).
//   geglu:      |y - y_ref| <= 1e-6 |y_ref| + 2e-7 |g u|     (vector tanh: <= 2e-7 absolute, which 1 + tanh
//                                                            turns into a large relative error where tanh ~ -1, as in ref).
//   softmax:    |y - y_ref| <= 2e-6 |y_ref| + 1e-12.
//   quick_gelu: |y - y_ref| <= 1e-6 |y_ref| + 1e-30          (vector exp).
//   gelu_tanh:  |y - y_ref| <= 1e-6 |y_ref| + 2e-7 |x|       (as geglu).
//   gelu (erf): |y - y_ref| <= 1e-6 |y_ref| + 1e-7 |x|       (erfc by Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7,
//                                                            times 0.5 x).
//   layer_norm: |y - y_ref| <= 2e-6 (|w| + |b|)              (f32 lanes against ref's double sums; the normalised
//                                                            x has RMS 1, so 2e-6 is ~30 float ulps of it).
#include <cmath>

#include "tests/kernels/kernel_test_util.h"

namespace pipit {
namespace {

using test::IsaTest;
using test::Rng;

class Elementwise : public IsaTest {};

const int64_t kSizes[] = {1, 31, 32, 33, 64, 4095};

// n floats starting 1 float past an aligned boundary, so no kernel sees aligned rows
struct Buf {
  std::vector<float> v;
  explicit Buf(int64_t n) : v(size_t(n + 9), 12345.0f) {}
  float* p() { return v.data() + 1; }
};

TEST_P(Elementwise, AddScaleExact) {
  Rng rng(1);
  for (int64_t n : kSizes) {
    Buf a(n), b(n), y(n), yr(n);
    for (int64_t i = 0; i < n; ++i) a.p()[i] = rng.uniform(-10, 10), b.p()[i] = rng.uniform(-10, 10);
    k().add(a.p(), b.p(), y.p(), n);
    r().add(a.p(), b.p(), yr.p(), n);
    for (size_t i = 0; i < y.v.size(); ++i) ASSERT_EQ(test::bits(y.v[i]), test::bits(yr.v[i])) << "add n " << n << " i " << i;
    Buf s(n), sr(n);
    s.v = a.v;
    sr.v = a.v;
    k().scale(s.p(), 0.37f, n);
    r().scale(sr.p(), 0.37f, n);
    for (size_t i = 0; i < s.v.size(); ++i) ASSERT_EQ(test::bits(s.v[i]), test::bits(sr.v[i])) << "scale n " << n << " i " << i;
  }
}

TEST_P(Elementwise, RmsNorm) {
  Rng rng(2);
  for (int64_t n : kSizes)
    for (float w_offset : {0.0f, 1.0f}) {
      Buf x(n), w(n), y(n), yr(n);
      for (int64_t i = 0; i < n; ++i) x.p()[i] = rng.uniform(-3, 3), w.p()[i] = rng.uniform(-2, 2);
      k().rms_norm(x.p(), w.p(), y.p(), n, 1e-6f, w_offset);
      r().rms_norm(x.p(), w.p(), yr.p(), n, 1e-6f, w_offset);
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(x.p()[i]) * x.p()[i];
      const double rr = 1.0 / std::sqrt(ss / n + 1e-6);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(y.p()[i], yr.p()[i], 2e-6 * std::fabs(yr.p()[i]) + 1e-7 * std::fabs(x.p()[i] * rr * (w_offset + w.p()[i])))
            << "n " << n << " i " << i;
      ASSERT_EQ(y.v[0], 12345.0f);
      ASSERT_EQ(y.p()[n], 12345.0f) << "wrote past the row";
    }
}

TEST_P(Elementwise, GatedActivations) {
  Rng rng(3);
  for (int64_t n : kSizes)
    for (float range : {1.0f, 8.0f, 100.0f}) {  // 100: exp and tanh saturate
      Buf g(n), u(n), y(n), yr(n), z(n), zr(n);
      for (int64_t i = 0; i < n; ++i) g.p()[i] = rng.uniform(-range, range), u.p()[i] = rng.uniform(-2, 2);
      k().swiglu(g.p(), u.p(), y.p(), n);
      r().swiglu(g.p(), u.p(), yr.p(), n);
      k().geglu(g.p(), u.p(), z.p(), n);
      r().geglu(g.p(), u.p(), zr.p(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double gu = std::fabs(double(g.p()[i]) * u.p()[i]);
        ASSERT_NEAR(y.p()[i], yr.p()[i], 1e-6 * std::fabs(yr.p()[i]) + 1e-30) << "swiglu n " << n << " g " << g.p()[i];
        ASSERT_NEAR(z.p()[i], zr.p()[i], 1e-6 * std::fabs(zr.p()[i]) + 2e-7 * gu) << "geglu n " << n << " g " << g.p()[i];
      }
      ASSERT_EQ(y.p()[n], 12345.0f);
      ASSERT_EQ(z.p()[n], 12345.0f);
    }
}

TEST_P(Elementwise, Softmax) {
  Rng rng(4);
  for (int64_t n : kSizes)
    for (float range : {1.0f, 30.0f, 200.0f}) {  // 200: most terms underflow to 0
      Buf x(n), xr(n);
      for (int64_t i = 0; i < n; ++i) x.p()[i] = xr.p()[i] = rng.uniform(-range, range);
      k().softmax(x.p(), n);
      r().softmax(xr.p(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(x.p()[i], xr.p()[i], 2e-6 * xr.p()[i] + 1e-12) << "n " << n << " i " << i;
      ASSERT_EQ(x.p()[n], 12345.0f);
    }
}

TEST_P(Elementwise, VisionActivations) {
  Rng rng(5);
  for (int64_t n : kSizes)
    for (float range : {1.0f, 8.0f, 100.0f}) {  // 100: exp, tanh and erf saturate
      Buf x(n);
      for (int64_t i = 0; i < n; ++i) x.p()[i] = rng.uniform(-range, range);
      Buf q = x, qr = x, t = x, tr = x, g = x, gr = x;
      k().quick_gelu(q.p(), n);
      r().quick_gelu(qr.p(), n);
      k().gelu_tanh(t.p(), n);
      r().gelu_tanh(tr.p(), n);
      k().gelu(g.p(), n);
      r().gelu(gr.p(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double ax = std::fabs(x.p()[i]);
        ASSERT_NEAR(q.p()[i], qr.p()[i], 1e-6 * std::fabs(qr.p()[i]) + 1e-30) << "quick_gelu n " << n << " x " << x.p()[i];
        ASSERT_NEAR(t.p()[i], tr.p()[i], 1e-6 * std::fabs(tr.p()[i]) + 2e-7 * ax) << "gelu_tanh n " << n << " x " << x.p()[i];
        ASSERT_NEAR(g.p()[i], gr.p()[i], 1e-6 * std::fabs(gr.p()[i]) + 1e-7 * ax) << "gelu n " << n << " x " << x.p()[i];
      }
      ASSERT_EQ(q.p()[n], 12345.0f);
      ASSERT_EQ(t.p()[n], 12345.0f);
      ASSERT_EQ(g.p()[n], 12345.0f);
    }
}

TEST_P(Elementwise, LayerNorm) {
  Rng rng(6);
  for (int64_t n : kSizes)
    for (float offset : {0.0f, 5.0f, -40.0f}) {  // a mean far from 0: the variance is taken around it
      Buf x(n), w(n), b(n), y(n), yr(n);
      for (int64_t i = 0; i < n; ++i)
        x.p()[i] = offset + rng.uniform(-3, 3), w.p()[i] = rng.uniform(-2, 2), b.p()[i] = rng.uniform(-1, 1);
      k().layer_norm(x.p(), w.p(), b.p(), y.p(), n, 1e-6f);
      r().layer_norm(x.p(), w.p(), b.p(), yr.p(), n, 1e-6f);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(y.p()[i], yr.p()[i], 2e-6 * (std::fabs(w.p()[i]) + std::fabs(b.p()[i]))) << "n " << n << " i " << i;
      ASSERT_EQ(y.v[0], 12345.0f);
      ASSERT_EQ(y.p()[n], 12345.0f) << "wrote past the row";
    }
}

PIPIT_INSTANTIATE_ISA(Elementwise);

}  // namespace
}  // namespace pipit
