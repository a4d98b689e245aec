// JPEG decoding bit-identical with PIL (fixtures made by tests/data/make_jpeg_fixtures.py with Debian's Pillow 9.4
// on libjpeg-turbo 2.1): baseline and progressive, 4:2:0 / 4:2:2 / 4:4:4, greyscale, CMYK, EXIF orientation, sizes
// that end mid-block, garbage in the scan data; and broken JPEGs giving errors that name the input.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/storage.h"
#include "models/vision/image.h"
#include "models/vision/jpeg_decode.h"

namespace pipit {
namespace {

std::string fixture(const std::string& name) { return std::string(PIPIT_SOURCE_DIR) + "/tests/data/jpeg/" + name; }

std::vector<uint8_t> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

int max_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(int(a[i]) - int(b[i])));
  return d;
}

TEST(JpegDecode, BitIdenticalWithPil) {
  if (!jpeg_decoder_available()) GTEST_SKIP() << "built without libjpeg: JPEG goes through stb";
  auto text = read_file(fixture("manifest.json"));
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  const auto manifest = nlohmann::json::parse(*text);
  ASSERT_GE(manifest["cases"].size(), 10u);
  for (const auto& c : manifest["cases"]) {
    const std::string name = c["name"];
    auto img = load_image(fixture(name + ".jpg"));
    ASSERT_TRUE(img.is_ok()) << name << ": " << img.status().message();
    const auto want = bytes_of(fixture(name + ".rgb"));
    ASSERT_EQ(img->width, c["width"].get<int>()) << name;
    ASSERT_EQ(img->height, c["height"].get<int>()) << name;
    ASSERT_EQ(want.size(), img->rgb.size()) << name;
    EXPECT_EQ(img->rgb, want) << name << ": max difference " << max_diff(img->rgb, want);
  }
}

// Replaces the byte at `at` of a fixture and decodes it.
Result<Image> decode_patched(const std::string& name, size_t at, uint8_t value) {
  auto b = bytes_of(fixture(name));
  EXPECT_LT(at, b.size());
  if (at < b.size()) b[at] = value;
  return decode_image(b, "patched " + name);
}

// Offset of the first `marker` (FF xx) in a file.
size_t find_marker(const std::vector<uint8_t>& b, uint8_t marker) {
  for (size_t i = 2; i + 1 < b.size(); ++i)
    if (b[i] == 0xFF && b[i + 1] == marker) return i;
  return 0;
}

TEST(JpegDecode, CorruptFilesGiveErrors) {
  const auto jpg = bytes_of(fixture("progressive_420.jpg"));
  ASSERT_GT(jpg.size(), 200u);
  for (size_t cut : {size_t(3), size_t(20), size_t(160), jpg.size() / 2, jpg.size() - 2}) {  // truncated
    auto r = decode_image(std::span<const uint8_t>(jpg.data(), cut), "cut.jpg");
    ASSERT_FALSE(r.is_ok()) << "cut at " << cut;
    EXPECT_NE(r.status().message().find("cut.jpg"), std::string::npos) << r.status().message();
  }
  const size_t sof = find_marker(bytes_of(fixture("baseline_420.jpg")), 0xC0);
  ASSERT_GT(sof, 0u);
  // SOF: FF C0, length (2), precision, height (2), width (2), components: 12 bits, 2 components, no height, no width
  for (auto [at, value] : {std::pair<size_t, uint8_t>{sof + 4, 12}, {sof + 9, 2}, {sof + 6, 0}, {sof + 8, 0}}) {
    auto r = decode_patched("baseline_420.jpg", at, value);
    EXPECT_FALSE(r.is_ok()) << "byte " << at << " = " << int(value);
  }
  auto r = decode_patched("baseline_420.jpg", sof + 9, 2);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("patched baseline_420.jpg"), std::string::npos) << r.status().message();
  // a quantization table id that was never defined: libjpeg's error_exit, which must come back as a Status
  const size_t sof_q = sof + 10 + 2;  // first component's table selector
  auto q = decode_patched("baseline_420.jpg", sof_q, 3);
  ASSERT_FALSE(q.is_ok());
  EXPECT_NE(q.status().message().find("cannot decode JPEG"), std::string::npos) << q.status().message();
}

}  // namespace
}  // namespace pipit
