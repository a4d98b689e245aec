// Image input: PIL-exact resampling and RGB conversion (fixtures made by tests/data/make_resize_fixtures.py with
// Debian's Pillow 9.4), EXIF orientation, data URLs, Qwen2-VL smart_resize, and bad input (truncated, empty,
// huge, not an image) giving errors, never crashes.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/storage.h"
#include "models/vision/image.h"
#include "models/vision/image_processor.h"
#include "models/vision/jpeg_decode.h"
#include "models/vision/resample.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

std::string fixture(const std::string& name) { return std::string(PIPIT_SOURCE_DIR) + "/tests/data/resize/" + name; }

std::vector<uint8_t> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

Image load(const std::string& name) {
  auto r = load_image(fixture(name));
  EXPECT_TRUE(r.is_ok()) << name << ": " << r.status().message();
  return r.is_ok() ? *r : Image();
}

nlohmann::json manifest() {
  auto text = read_file(fixture("manifest.json"));
  EXPECT_TRUE(text.is_ok());
  return nlohmann::json::parse(*text);
}

int max_diff(const Image& a, const Image& b) {
  int d = 0;
  for (size_t i = 0; i < a.rgb.size() && i < b.rgb.size(); ++i) d = std::max(d, std::abs(int(a.rgb[i]) - int(b.rgb[i])));
  return d;
}

TEST(Resample, EqualsPillowOnEveryFixture) {
  const auto m = manifest();
  ASSERT_GE(m["resize"].size(), 10u);
  for (const auto& c : m["resize"]) {
    const std::string name = c["name"];
    Image in = load(name + ".in.png"), want = load(name + ".out.png");
    auto f = resample_filter_from_pil(c["filter"].get<int>());
    ASSERT_TRUE(f.is_ok());
    Image got = resize_image(in, c["width"].get<int>(), c["height"].get<int>(), *f);
    ASSERT_EQ(got.width, want.width) << name;
    ASSERT_EQ(got.height, want.height) << name;
    EXPECT_EQ(got.rgb, want.rgb) << name << ": max difference " << max_diff(got, want);
  }
}

TEST(Resample, NearestIsRefused) {
  EXPECT_FALSE(resample_filter_from_pil(0).is_ok());
  EXPECT_FALSE(resample_filter_from_pil(6).is_ok());
}

TEST(ImageDecode, ConvertsToRgbAsPil) {
  const auto fixtures = manifest();  // kept alive: the loop walks into it
  for (const auto& mode : fixtures["convert"]) {
    const std::string m = mode;
    Image got = load("conv_" + m + ".png"), want = load("conv_" + m + ".rgb.png");
    ASSERT_EQ(got.width, want.width) << m;
    ASSERT_EQ(got.height, want.height) << m;
    EXPECT_EQ(got.rgb, want.rgb) << m << ": max difference " << max_diff(got, want);
  }
}

TEST(ImageDecode, JpegExifOrientation) {
  const auto fixtures = manifest();
  for (const auto& n : fixtures["exif"]) {
    const std::string name = "exif_" + std::to_string(n.get<int>());
    EXPECT_EQ(jpeg_exif_orientation(bytes_of(fixture(name + ".jpg"))), n.get<int>());
    Image got = load(name + ".jpg"), want = load(name + ".rgb.png");
    ASSERT_EQ(got.width, want.width) << name;
    ASSERT_EQ(got.height, want.height) << name;
    // exact with libjpeg (PIL's decoder; tests/unit/jpeg_test.cpp has more); stb, the fallback of builds without
    // it, stays within a few levels on these flat quadrants. A wrong orientation would move whole quadrants (> 150).
    EXPECT_LE(max_diff(got, want), jpeg_decoder_available() ? 0 : 4) << name;
  }
}

TEST(ImageDecode, DataUrl) {
  const auto raw = bytes_of(fixture("up_7x5_23x17.in.png"));
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;
  for (size_t i = 0; i < raw.size(); i += 3) {  // 3 bytes -> 4 characters, '=' for the missing ones
    const size_t n = std::min<size_t>(3, raw.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? raw[i + k] : 0);
    for (size_t k = 0; k < 4; ++k) b64 += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  auto img = load_image("data:image/png;base64," + b64);
  ASSERT_TRUE(img.is_ok()) << img.status().message();
  EXPECT_EQ(img->rgb, load("up_7x5_23x17.in.png").rgb);
  EXPECT_FALSE(load_image("data:image/png;base64,@@@").is_ok());
  EXPECT_FALSE(load_image("data:image/png," + b64).is_ok());  // not base64
}

// A PNG that is only a signature and an IHDR chunk (stb reads sizes from it without decoding).
std::vector<uint8_t> png_header(uint32_t w, uint32_t h) {
  std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (uint32_t v : {w, h})
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
  for (uint8_t v : {8, 2, 0, 0, 0}) b.push_back(v);  // 8-bit RGB
  uint32_t crc = 0xFFFFFFFFu;  // over type + data
  for (size_t i = 12; i < b.size(); ++i) {
    crc ^= b[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xFFFFFFFFu;
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(crc >> s));
  return b;
}

TEST(ImageDecode, BadInputGivesErrors) {
  const auto png = bytes_of(fixture("down_100x75_37x29.in.png"));
  ASSERT_GT(png.size(), 200u);
  for (size_t cut : {size_t(8), size_t(30), png.size() / 2, png.size() - 13}) {  // truncated PNG
    auto r = decode_image(std::span<const uint8_t>(png.data(), cut), "cut.png");
    EXPECT_FALSE(r.is_ok()) << "cut at " << cut;
  }
  auto zero = decode_image(png_header(0, 0), "zero.png");  // 0x0
  ASSERT_FALSE(zero.is_ok());
  EXPECT_NE(zero.status().message().find("zero.png"), std::string::npos) << zero.status().message();
  auto huge = decode_image(png_header(20000, 20000), "huge.png");  // refused before decoding
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.status().message().find("20000x20000"), std::string::npos) << huge.status().message();
  const std::string text = "this is not an image\n";
  auto not_image = decode_image(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
                                "notes.txt");
  ASSERT_FALSE(not_image.is_ok());
  EXPECT_NE(not_image.status().message().find("not a PNG or JPEG"), std::string::npos);
  EXPECT_FALSE(decode_image({}, "empty").is_ok());
  const auto jpg = bytes_of(fixture("exif_6.jpg"));  // truncated JPEG: no end marker
  EXPECT_FALSE(decode_image(std::span<const uint8_t>(jpg.data(), jpg.size() * 2 / 3), "cut.jpg").is_ok());
  EXPECT_EQ(load_image(fixture("missing.png")).status().code(), Code::kNotFound);
  EXPECT_FALSE(load_image(fixture("")).is_ok());  // a directory
  EXPECT_FALSE(load_image(fixture("manifest.json")).is_ok());
}

// Inputs that trip stb 2.27 (found by tests/fuzz/fuzz_image.cpp) are handled before stb sees them.
TEST(ImageDecode, StbPitfalls) {
  // a zero-length IDAT chunk (stb would memcpy from null): same pixels without it
  auto png = bytes_of(fixture("up_7x5_23x17.in.png"));
  const size_t idat = std::string(png.begin(), png.end()).find("IDAT") - 4;
  const uint8_t empty_idat[12] = {0, 0, 0, 0, 'I', 'D', 'A', 'T', 0x35, 0xAF, 0x06, 0x1E};
  png.insert(png.begin() + long(idat), empty_idat, empty_idat + 12);
  auto img = decode_image(png, "empty-idat.png");
  ASSERT_TRUE(img.is_ok()) << img.status().message();
  EXPECT_EQ(img->rgb, load("up_7x5_23x17.in.png").rgb);
  // a Huffman table claiming more than 256 symbols (stb would write past its table)
  auto jpg = bytes_of(fixture("exif_1.jpg"));
  size_t dht = 0;
  for (size_t i = 2; i + 1 < jpg.size() && !dht; ++i)
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xC4) dht = i;
  ASSERT_GT(dht, 0u);
  jpg[dht + 5 + 15] = 0xF0;  // the last of the 16 code counts of the first table
  auto bad = decode_image(jpg, "bad-dht.jpg");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("Huffman"), std::string::npos) << bad.status().message();
  // sides near 2^32 in the header: refused without overflowing the pixel count
  EXPECT_FALSE(decode_image(png_header(0xE0E0E0E0u, 0xE0E0E0E0u), "wide.png").is_ok());
  // a file cut inside a zero-length IDAT (no CRC): dropped too (fuzz_image found stb's null memcpy there)
  auto cut = decode_base64("iVBORw0KGgoAAAANSUhEUgAAABAAAAAgCAIAAAADAAAAAAAAAElEQVR4gg==");
  ASSERT_TRUE(cut.is_ok());
  EXPECT_FALSE(decode_image(*cut, "cut-idat.png").is_ok());
}

TEST(ImageProcessor, SmartResizeAsHf) {
  auto sr = [](int64_t h, int64_t w, int64_t mn = 3136, int64_t mx = 50176) {
    auto r = smart_resize(h, w, 28, mn, mx);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? *r : std::pair<int64_t, int64_t>{0, 0};
  };
  EXPECT_EQ(sr(75, 100), std::make_pair(int64_t(84), int64_t(112)));    // the golden cases
  EXPECT_EQ(sr(200, 300), std::make_pair(int64_t(168), int64_t(252)));  // max_pixels branch
  EXPECT_EQ(sr(42, 70, 1, 1 << 30), std::make_pair(int64_t(56), int64_t(56)));  // 1.5 and 2.5 round half to even
  EXPECT_EQ(sr(1, 1), std::make_pair(int64_t(56), int64_t(56)));        // min_pixels branch
  EXPECT_EQ(sr(20000, 20000, 3136, 12845056), std::make_pair(int64_t(3556), int64_t(3556)));
  EXPECT_FALSE(smart_resize(1, 201, 28, 3136, 50176).is_ok());          // aspect ratio above 200
  auto thin = sr(10, 2000);  // HF's older floor could give 0 here; never below one factor
  EXPECT_GE(thin.first, 28);
}

TEST(ImageProcessor, QwenPatchOrderAndClipCrop) {
  // a 56x56 image whose pixel value encodes its position: check the (h/2, w/2, 2, 2) row order and (c, t, y, x) cols
  Image img;
  img.width = img.height = 56;
  img.rgb.resize(56 * 56 * 3);
  for (int y = 0; y < 56; ++y)
    for (int x = 0; x < 56; ++x)
      for (int c = 0; c < 3; ++c) img.px(x, y)[c] = uint8_t((y * 4 + x + c * 7) & 255);
  ImageProcessorConfig q;
  q.do_normalize = q.do_rescale = false;
  q.min_pixels = 56 * 56;
  auto r = preprocess_image(img, q);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->grid_thw, (std::array<int32_t, 3>{1, 4, 4}));
  ASSERT_EQ(r->pixel_values.shape(), (std::vector<int64_t>{16, 3 * 2 * 14 * 14}));
  auto at = [&](int row, int c, int t, int py, int px) {
    return r->pixel_values.ptr<float>()[row * 1176 + ((c * 2 + t) * 14 + py) * 14 + px];
  };
  // row 5 = block (0, 1), in-block (0, 1): patch row 0, patch column 3
  EXPECT_EQ(at(5, 2, 1, 3, 4), float(uint8_t((3 * 4 + 3 * 14 + 4 + 14) & 255)));
  // row 6 = block (0, 1), in-block (1, 0): patch row 1, column 2
  EXPECT_EQ(at(6, 0, 0, 0, 0), float(uint8_t((14 * 4 + 28) & 255)));
  EXPECT_EQ(at(6, 1, 0, 0, 0), at(6, 1, 1, 0, 0));  // the still image is repeated over the temporal patch

  ImageProcessorConfig c;
  c.kind = "clip";
  c.shortest_edge = 56;
  c.crop_height = c.crop_width = 60;  // larger than the short side: zero padding, as HF's center_crop
  c.do_rescale = c.do_normalize = false;
  Image wide;
  wide.width = 112;
  wide.height = 56;
  wide.rgb.assign(112 * 56 * 3, 200);
  auto cr = preprocess_image(wide, c);
  ASSERT_TRUE(cr.is_ok()) << cr.status().message();
  ASSERT_EQ(cr->pixel_values.shape(), (std::vector<int64_t>{3, 60, 60}));
  EXPECT_EQ(cr->pixel_values.ptr<float>()[0], 0.0f);           // padded top row
  EXPECT_EQ(cr->pixel_values.ptr<float>()[2 * 60 + 5], 200.0f);  // image from row 2
}

TEST(ImageProcessor, ConfigErrors) {
  ImageProcessorConfig base;
  EXPECT_FALSE(parse_image_processor(nlohmann::json::parse(R"({"min_pixels": 100, "max_pixels": 10})"), base).is_ok());
  EXPECT_FALSE(parse_image_processor(nlohmann::json::parse(R"({"image_std": [1, 0, 1]})"), base).is_ok());
  EXPECT_FALSE(parse_image_processor(nlohmann::json::parse(R"({"resample": 0})"), base).is_ok());
  EXPECT_FALSE(parse_image_processor(nlohmann::json::parse(R"({"patch_size": "14"})"), base).is_ok());
  auto ok = parse_image_processor(nlohmann::json::parse(R"({"size": {"shortest_edge": 10, "longest_edge": 9000}})"), base);
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(ok->min_pixels, 10);
  EXPECT_EQ(ok->max_pixels, 9000);
}

}  // namespace
}  // namespace pipit
