// .pipit format: writer/reader round trip, zero-copy views, alignment, and rejection of every kind of broken file
// (truncated at every length, bad magic/version, lying sizes, offsets past the end, overlaps) with a clear error.
#include <gtest/gtest.h>

#include <cstring>

#include "core/storage.h"
#include "format/pipit_format.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

using nlohmann::json;

// A small file: an f32 [3, 5], a q8_0 [2, 64] and an i32 [4] tensor.
std::string write_small(const test::ScratchDir& d) {
  const std::string path = d.path("small.pipit");
  auto w = PipitWriter::create(path, {{"config", {{"model_type", "llama"}}}, {"tokenizer", "{\"x\": 1}"}},
                               {{"a", DType::F32, {3, 5}}, {"b", DType::Q8_0, {2, 64}}, {"c", DType::I32, {4}}});
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  std::vector<float> a(15);
  for (int i = 0; i < 15; ++i) a[size_t(i)] = float(i) * 0.5f;
  std::vector<uint8_t> b(2 * 2 * sizeof(BlockQ8_0), 7);
  int32_t c[4] = {1, -2, 3, -4};
  EXPECT_TRUE((*w)->append(0, a.data(), 8 * 4).is_ok());  // in two pieces
  EXPECT_TRUE((*w)->append(0, a.data() + 8, 7 * 4).is_ok());
  EXPECT_TRUE((*w)->append(1, b.data(), b.size()).is_ok());
  EXPECT_TRUE((*w)->append(2, c, sizeof c).is_ok());
  EXPECT_TRUE((*w)->finish().is_ok());
  return path;
}

TEST(PipitFormat, RoundTripIsZeroCopyAndAligned) {
  test::ScratchDir d("fmt");
  const std::string path = write_small(d);
  EXPECT_FALSE(file_exists(path + ".tmp"));
  auto f = PipitFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->version(), kPipitVersion);
  EXPECT_EQ(f->config()["model_type"], "llama");
  EXPECT_EQ(f->text("tokenizer").value_or(""), "{\"x\": 1}");
  EXPECT_FALSE(f->text("tokenizer_config").has_value());
  ASSERT_EQ(f->tensors().size(), 3u);
  const Tensor& a = f->tensors().at("a");
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(a.ptr<float>()[14], 7.0f);
  EXPECT_EQ(f->tensors().at("c").ptr<int32_t>()[3], -4);
  EXPECT_EQ(f->tensors().at("b").dtype(), DType::Q8_0);
  for (auto& [n, t] : f->tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % kAlign, 0u) << n;
    // zero-copy: the tensor's storage is the file mapping itself
    EXPECT_NE(dynamic_cast<MmapStorage*>(t.storage().get()), nullptr) << n;
  }
  EXPECT_TRUE(is_pipit_file(path));
}

// Every truncation of a valid file is rejected with an error, never a crash.
TEST(PipitFormat, EveryTruncationIsAnError) {
  test::ScratchDir d("fmt");
  const std::string bytes = test::read_bytes(write_small(d));
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto f = PipitFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), n, nullptr, "cut");
    ASSERT_FALSE(f.is_ok()) << "accepted a file cut to " << n << " of " << bytes.size() << " bytes";
    EXPECT_FALSE(f.status().message().empty());
  }
  auto ok = PipitFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, "whole");
  EXPECT_TRUE(ok.is_ok()) << ok.status().message();
}

// Rewrites the JSON header of a valid file (keeping the data offset) and parses it.
Result<PipitFile> parse_with_header(std::string bytes, const std::function<void(json&)>& edit) {
  uint64_t hb, data_offset;
  std::memcpy(&hb, bytes.data() + 16, 8);
  std::memcpy(&data_offset, bytes.data() + 24, 8);
  json h = json::parse(bytes.substr(kPipitPreambleBytes, hb));
  edit(h);
  std::string text = h.dump();
  EXPECT_LE(text.size() + kPipitPreambleBytes, data_offset) << "edited header no longer fits";
  text.resize(data_offset - kPipitPreambleBytes, ' ');
  const uint64_t nhb = text.size();
  std::memcpy(bytes.data() + 16, &nhb, 8);
  bytes.replace(kPipitPreambleBytes, text.size(), text);
  static std::string keep;
  keep = bytes;
  return PipitFile::parse(reinterpret_cast<const uint8_t*>(keep.data()), keep.size(), nullptr, "edited");
}

void expect_error(const Result<PipitFile>& f, const std::string& fragment) {
  ASSERT_FALSE(f.is_ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_NE(f.status().message().find(fragment), std::string::npos) << f.status().message();
}

TEST(PipitFormat, BadInputsGiveClearErrors) {
  test::ScratchDir d("fmt");
  const std::string good = test::read_bytes(write_small(d));
  auto parse_bytes = [](const std::string& b) {
    static std::string keep;
    keep = b;
    return PipitFile::parse(reinterpret_cast<const uint8_t*>(keep.data()), keep.size(), nullptr, "bad");
  };
  std::string b = good;
  b[0] = 'X';
  expect_error(parse_bytes(b), "bad magic");
  b = good;
  b[8] = 3;
  expect_error(parse_bytes(b), "version 3");
  b = good;
  b[8] = 0;
  expect_error(parse_bytes(b), "version 0");
  b = good;
  b[12] = 1;
  expect_error(parse_bytes(b), "flags");
  b = good;
  const uint64_t huge = uint64_t(1) << 40;
  std::memcpy(b.data() + 16, &huge, 8);
  expect_error(parse_bytes(b), "does not fit");
  b = good;
  std::memcpy(b.data() + 32, &huge, 8);  // data section longer than the file
  expect_error(parse_bytes(b), "past the end");
  b = good;
  const uint64_t odd = 65;
  std::memcpy(b.data() + 24, &odd, 8);
  expect_error(parse_bytes(b), "multiple of 64");

  expect_error(parse_with_header(good, [](json& h) { h["tensors"][0]["nbytes"] = 64; }), "lies about sizes");
  expect_error(parse_with_header(good, [](json& h) { h["tensors"][1]["offset"] = 1u << 20; }), "outside the data");
  expect_error(parse_with_header(good, [](json& h) { h["tensors"][1]["offset"] = 1; }), "multiple of 64");
  expect_error(parse_with_header(good, [](json& h) { h["tensors"][1]["offset"] = 0; }), "overlap");
  expect_error(parse_with_header(good, [](json& h) { h["tensors"][0]["dtype"] = "iq2_xxs"; }), "unknown dtype");
  expect_error(parse_with_header(good, [](json& h) { h["tensors"][0]["shape"] = json::array(); }), "shape");
  expect_error(parse_with_header(good, [](json& h) { h["tensors"][0]["shape"] = {1, 2, 3, 4, 5}; }), "shape");
  expect_error(parse_with_header(good, [](json& h) { h["tensors"][0]["shape"] = {-3, 5}; }), "shape");
  expect_error(parse_with_header(good, [](json& h) {
                 h["tensors"][1]["shape"] = {4, 33};
               }),
               "multiple of 32");
  expect_error(parse_with_header(good, [](json& h) { h["tensors"][2]["name"] = "a"; }), "twice");
  expect_error(parse_with_header(good, [](json& h) { h.erase("config"); }), "config");
  expect_error(parse_with_header(good, [](json& h) { h["tokenizer"] = "{}"; }), "belongs under 'texts'");
  expect_error(parse_with_header(good, [](json& h) { h["texts"] = 5; }), "'texts' must be an object");
  expect_error(parse_with_header(good, [](json& h) { h["texts"]["vocab"] = 1; }), "unknown text 'vocab'");
  expect_error(parse_with_header(good, [](json& h) { h["texts"]["tokenizer"] = "{}"; }), "offset and nbytes");
  expect_error(parse_with_header(good, [](json& h) { h["texts"]["tokenizer"]["nbytes"] = -1; }), "offset and nbytes");
  expect_error(parse_with_header(good, [](json& h) { h["texts"]["tokenizer"]["offset"] = 1u << 20; }),
               "outside the data");
  expect_error(parse_with_header(good, [](json& h) { h["texts"]["tokenizer"]["offset"] = 0; }), "overlap");
  expect_error(parse_with_header(good, [](json& h) { h["version"] = 7; }), "disagrees");
  expect_error(parse_with_header(good, [](json& h) { h["tensors"] = "none"; }), "tensors");
  b = good;
  b[kPipitPreambleBytes] = '[';
  expect_error(parse_bytes(b), "not a JSON object");
}

// Version 2 keeps the texts as raw bytes after the tensors; they are checked like tensors, and for UTF-8.
TEST(PipitFormat, TextsAreRawBytesAfterTheTensors) {
  test::ScratchDir d("fmt");
  const std::string good = test::read_bytes(write_small(d));
  uint64_t hb, data_offset, data_bytes;
  std::memcpy(&hb, good.data() + 16, 8);
  std::memcpy(&data_offset, good.data() + 24, 8);
  std::memcpy(&data_bytes, good.data() + 32, 8);
  const json h = json::parse(good.substr(kPipitPreambleBytes, hb));
  EXPECT_FALSE(h.contains("tokenizer"));
  const uint64_t at = h["texts"]["tokenizer"]["offset"], n = h["texts"]["tokenizer"]["nbytes"];
  EXPECT_EQ(at % kAlign, 0u);
  EXPECT_GE(at, h["tensors"][2]["offset"].get<uint64_t>() + h["tensors"][2]["nbytes"].get<uint64_t>());
  EXPECT_EQ(at + n, data_bytes);
  EXPECT_EQ(good.substr(data_offset + at, n), "{\"x\": 1}");
  std::string b = good;
  b[data_offset + at + 2] = char(0xC3);  // a lead byte followed by ASCII
  auto f = PipitFile::parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), nullptr, "bad");
  expect_error(f, "text 'tokenizer' is not valid UTF-8 (byte 2 of 8)");
}

// Binary sections ("blobs") come after the texts, any bytes, checked like the texts for bounds and overlaps; a blob
// key this reader does not know is skipped (a newer writer's), and a file without blobs reads as before.
TEST(PipitFormat, BlobsAreBytesAfterTheTexts) {
  test::ScratchDir d("fmt");
  const std::string path = d.path("blob.pipit");
  const std::string bytes("\x00\xff\xc3 not text\x01", 13);
  auto w = PipitWriter::create(path, {{"config", {{"model_type", "llama"}}}, {"tokenizer", "{\"x\": 1}"},
                                      {"tokenizer_compiled", bytes}},
                               {{"c", DType::I32, {4}}});
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  int32_t c[4] = {1, -2, 3, -4};
  ASSERT_TRUE((*w)->append(0, c, sizeof c).is_ok());
  ASSERT_TRUE((*w)->finish().is_ok());
  auto f = PipitFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->blob("tokenizer_compiled").value_or(""), bytes);
  EXPECT_EQ(f->text("tokenizer").value_or(""), "{\"x\": 1}");
  EXPECT_FALSE(f->blob("other").has_value());
  const json& h = f->header();
  EXPECT_FALSE(h.contains("tokenizer_compiled"));
  EXPECT_GE(h["blobs"]["tokenizer_compiled"]["offset"].get<uint64_t>(),
            h["texts"]["tokenizer"]["offset"].get<uint64_t>() + h["texts"]["tokenizer"]["nbytes"].get<uint64_t>());
  EXPECT_EQ(h["blobs"]["tokenizer_compiled"]["offset"].get<uint64_t>() % kAlign, 0u);

  const std::string good = test::read_bytes(path);
  auto later = parse_with_header(good, [](json& h) {  // renamed, the same length (the header must still fit)
    h["blobs"]["tokenizer_newform1"] = h["blobs"]["tokenizer_compiled"];
    h["blobs"]["tokenizer_newform1"]["offset"] = 1u << 30;  // not even checked: nothing reads it
    h["blobs"].erase("tokenizer_compiled");
  });
  ASSERT_TRUE(later.is_ok()) << later.status().message();
  EXPECT_FALSE(later->blob("tokenizer_compiled").has_value());
  auto none = parse_with_header(good, [](json& h) { h.erase("blobs"); });
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->blob("tokenizer_compiled").has_value());
  expect_error(parse_with_header(good, [](json& h) { h["blobs"] = 5; }), "'blobs' must be an object");
  expect_error(parse_with_header(good, [](json& h) { h["blobs"]["tokenizer_compiled"] = "x"; }), "offset and nbytes");
  expect_error(parse_with_header(good, [](json& h) { h["blobs"]["tokenizer_compiled"]["offset"] = 1u << 20; }),
               "outside the data");
  expect_error(parse_with_header(good, [](json& h) { h["blobs"]["tokenizer_compiled"]["offset"] = 0; }), "overlap");
}

// Files written before version 2 (texts as JSON strings in the header) still read.
TEST(PipitFormat, ReadsVersionOne) {
  test::ScratchDir d("fmt");
  std::string b = test::read_bytes(write_small(d));
  b[8] = 1;
  auto f = parse_with_header(b, [](json& h) {
    h["version"] = 1;
    h.erase("texts");
    h["tokenizer"] = "{\"y\": \"\u00e9\"}";
  });
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->version(), 1u);
  EXPECT_EQ(f->text("tokenizer").value_or(""), "{\"y\": \"\u00e9\"}");
  EXPECT_FALSE(f->text("chat_template").has_value());
  EXPECT_EQ(f->tensors().at("c").ptr<int32_t>()[3], -4);
  expect_error(parse_with_header(b, [](json& h) {
                 h["version"] = 1;
                 h["tokenizer"] = 5;
               }),
               "'tokenizer' must be a string");
}

TEST(PipitFormat, TensorBytes) {
  EXPECT_EQ(*pipit_tensor_bytes(DType::Q4_0, {10, 64}), 10u * 2 * 18);
  EXPECT_EQ(*pipit_tensor_bytes(DType::BF16, {3}), 6u);
  EXPECT_FALSE(pipit_tensor_bytes(DType::Q8_0, {2, 48}).is_ok());
  EXPECT_FALSE(pipit_tensor_bytes(DType::F32, {int64_t(1) << 40, int64_t(1) << 40}).is_ok());
  // an empty tensor is legal in a file; its size is 0 (fuzz find: Tensor::nbytes() divided by the zero last dim)
  EXPECT_EQ(*pipit_tensor_bytes(DType::F32, {3, 0}), 0u);
  EXPECT_EQ(Tensor::from_data(DType::F32, {3, 0}, nullptr, nullptr).nbytes(), 0u);
}

}  // namespace
}  // namespace pipit
