// The small checks that keep file-controlled input from crashing or replacing what it should not (issue 35):
// JSON nesting depth, UTF-8 validity, and output paths (core/json_depth.h, core/utf8_check.h, core/output_file.h).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "core/json_depth.h"
#include "core/output_file.h"
#include "core/utf8_check.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

TEST(InputBounds, JsonDepth) {
  EXPECT_EQ(json_depth("{}"), 1);
  EXPECT_EQ(json_depth("{\"a\": [1, {\"b\": []}]}"), 4);
  EXPECT_EQ(json_depth("\"[[[[\""), 0);                  // brackets inside strings do not count
  EXPECT_EQ(json_depth("[\"\\\"[[[\", [1]]"), 2);         // nor after an escaped quote
  EXPECT_EQ(json_depth(std::string(100000, '[')), kMaxJsonDepth + 1);  // stops once past the limit
  EXPECT_EQ(json_depth(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')), kMaxJsonDepth);
}

TEST(InputBounds, Utf8ErrorOffset) {
  EXPECT_EQ(utf8_error_offset("plain ascii"), std::string_view::npos);
  EXPECT_EQ(utf8_error_offset("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::string_view::npos);
  EXPECT_EQ(utf8_error_offset("ab\xff"), 2u);
  EXPECT_EQ(utf8_error_offset("a\xc0\x80"), 1u);            // overlong NUL
  EXPECT_EQ(utf8_error_offset("a\xed\xa0\x80"), 1u);        // surrogate
  EXPECT_EQ(utf8_error_offset("a\xf4\x90\x80\x80"), 1u);    // above U+10FFFF
  EXPECT_EQ(utf8_error_offset("abc\xe2\x82"), 3u);          // cut short
  EXPECT_EQ(utf8_error_offset("\x80"), 0u);                 // a lone continuation byte
}

TEST(InputBounds, ReplaceableOutput) {
  test::ScratchDir d("outputs");
  EXPECT_EQ(*replaceable_output(d.path("new.pipit"), "[t]"), d.path("new.pipit"));
  const std::string file = d.path("file");
  ASSERT_EQ(std::system(("echo x > " + file).c_str()), 0);
  EXPECT_EQ(*replaceable_output(file, "[t]"), file);
  ASSERT_EQ(::symlink(file.c_str(), d.path("link").c_str()), 0);
  EXPECT_EQ(*replaceable_output(d.path("link"), "[t]"), file);  // a link to a file: its target
  ASSERT_EQ(::mkfifo(d.path("fifo").c_str(), 0600), 0);
  ASSERT_EQ(::symlink(d.path("fifo").c_str(), d.path("link_fifo").c_str()), 0);
  ASSERT_EQ(::symlink(d.path("none/x").c_str(), d.path("dangling").c_str()), 0);
  for (const char* bad : {"fifo", "link_fifo", "dangling", ""}) {
    auto r = replaceable_output(bad[0] ? d.path(bad) : d.path(""), "[t]");
    EXPECT_FALSE(r.is_ok()) << bad;
  }
  EXPECT_FALSE(replaceable_output("/dev/null", "[t]").is_ok());
  EXPECT_NE(replaceable_output("/dev/null", "[t]").status().message().find("character device"), std::string::npos);
  // a streaming writer takes /dev/null, refuses a FIFO nobody reads at once (instead of blocking) and a directory
  auto f = open_output_stream("/dev/null", "[t]");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_TRUE(close_output(*f, "/dev/null", "[t]").is_ok());
  EXPECT_NE(open_output_stream(d.path("fifo"), "[t]").status().message().find("no reader"), std::string::npos);
  EXPECT_FALSE(open_output_stream(d.path(""), "[t]").is_ok());
  // a full device: the error comes at the latest when the buffer is flushed
  auto full = open_output_stream("/dev/full", "[t]");
  ASSERT_TRUE(full.is_ok());
  std::fputs("x", *full);
  EXPECT_FALSE(close_output(*full, "/dev/full", "[t]").is_ok());
}

}  // namespace
}  // namespace pipit
