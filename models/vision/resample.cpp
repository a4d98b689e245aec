// PIL's resampling filters, coefficient tables and the two fixed-point passes.
#include "models/vision/resample.h"

#include <algorithm>
#include <cmath>

namespace pipit {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL: fractional bits of the fixed-point coefficients
constexpr double kPi = 3.14159265358979323846;

struct Filter {
  double (*fn)(double x);
  double support;
};

double box_filter(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
double bilinear_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming_filter(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x *= kPi;
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));  // PIL's float constants
}
double bicubic_filter(double x) {
  // Keys' cubic convolution with a = -0.5 (PIL's choice)
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= kPi;
  return std::sin(x) / x;
}
double lanczos_filter(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0; }

Filter filter_of(ResampleFilter f) {
  switch (f) {
    case ResampleFilter::kBox: return {box_filter, 0.5};
    case ResampleFilter::kBilinear: return {bilinear_filter, 1.0};
    case ResampleFilter::kHamming: return {hamming_filter, 1.0};
    case ResampleFilter::kBicubic: return {bicubic_filter, 2.0};
    case ResampleFilter::kLanczos: return {lanczos_filter, 3.0};
  }
  return {bicubic_filter, 2.0};
}

// For each output index: the first input index and how many inputs contribute, and their fixed-point weights
// (ksize slots per output, unused ones zero).
struct Coeffs {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> k;
};

Coeffs precompute(int in_size, int out_size, const Filter& f) {
  // PIL: the box is (0, in_size) given as floats; scale = (in1 - in0) / out_size
  const double scale = double(float(in_size)) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = f.support * filterscale;
  Coeffs c;
  c.ksize = int(std::ceil(support)) * 2 + 1;
  c.first.resize(size_t(out_size));
  c.count.resize(size_t(out_size));
  c.k.assign(size_t(out_size) * size_t(c.ksize), 0);
  std::vector<double> w(size_t(c.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = int(center - support + 0.5);  // C truncation, as PIL
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[size_t(x)] = f.fn((x + xmin - center + 0.5) * ss);
      ww += w[size_t(x)];
    }
    int32_t* k = c.k.data() + size_t(xx) * size_t(c.ksize);
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? w[size_t(x)] / ww : w[size_t(x)];
      // PIL normalize_coeffs_8bpc: round half away from zero into fixed point
      k[x] = v < 0 ? int32_t(-0.5 + v * (1 << kPrecisionBits)) : int32_t(0.5 + v * (1 << kPrecisionBits));
    }
    c.first[size_t(xx)] = xmin;
    c.count[size_t(xx)] = xmax;
  }
  return c;
}

uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return uint8_t(v >> kPrecisionBits);
}

// out row y = sum over k of in rows; `step` walks the contributing pixels (3 bytes horizontally, a row vertically).
Image horizontal_pass(const Image& in, int out_w, int y0, int rows, const Coeffs& c) {
  Image out;
  out.width = out_w;
  out.height = rows;
  out.rgb.resize(size_t(out_w) * size_t(rows) * 3);
  for (int y = 0; y < rows; ++y)
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = c.k.data() + size_t(xx) * size_t(c.ksize);
      const uint8_t* src = in.px(c.first[size_t(xx)], y0 + y);
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < c.count[size_t(xx)]; ++x) {
        s0 += src[3 * x + 0] * k[x];
        s1 += src[3 * x + 1] * k[x];
        s2 += src[3 * x + 2] * k[x];
      }
      uint8_t* d = out.px(xx, y);
      d[0] = clip8(s0), d[1] = clip8(s1), d[2] = clip8(s2);
    }
  return out;
}

Image vertical_pass(const Image& in, int out_h, int row_offset, const Coeffs& c) {
  Image out;
  out.width = in.width;
  out.height = out_h;
  out.rgb.resize(size_t(in.width) * size_t(out_h) * 3);
  const size_t stride = size_t(in.width) * 3;
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = c.k.data() + size_t(yy) * size_t(c.ksize);
    const int ymin = c.first[size_t(yy)] - row_offset, n = c.count[size_t(yy)];
    for (int x = 0; x < in.width; ++x) {
      const uint8_t* src = in.px(x, ymin);
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int y = 0; y < n; ++y) {
        const uint8_t* p = src + size_t(y) * stride;
        s0 += p[0] * k[y];
        s1 += p[1] * k[y];
        s2 += p[2] * k[y];
      }
      uint8_t* d = out.px(x, yy);
      d[0] = clip8(s0), d[1] = clip8(s1), d[2] = clip8(s2);
    }
  }
  return out;
}

}  // namespace

Result<ResampleFilter> resample_filter_from_pil(int code) {
  if (code >= 1 && code <= 5) return ResampleFilter(code);
  return Error::unsupported("[image] resample {} is not supported (1 lanczos, 2 bilinear, 3 bicubic, 4 box, "
                            "5 hamming; 0 nearest is not)", code);
}

Image resize_image(const Image& in, int out_w, int out_h, ResampleFilter filter) {
  PIPIT_ASSERT(out_w >= 1 && out_h >= 1 && in.width >= 1 && in.height >= 1);
  const Filter f = filter_of(filter);
  const bool need_h = out_w != in.width, need_v = out_h != in.height;
  const Coeffs ch = precompute(in.width, out_w, f), cv = precompute(in.height, out_h, f);
  if (!need_h && !need_v) return in;
  if (!need_h) return vertical_pass(in, out_h, 0, cv);
  // the horizontal pass only covers the source rows the vertical pass reads
  const int y_first = cv.first.front();
  const int y_last = cv.first.back() + cv.count.back();
  Image tmp = horizontal_pass(in, out_w, need_v ? y_first : 0, need_v ? y_last - y_first : in.height, ch);
  if (!need_v) return tmp;
  return vertical_pass(tmp, out_h, y_first, cv);
}

}  // namespace pipit
