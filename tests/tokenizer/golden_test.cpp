// Golden tests: every line of testdata/tokenizers/<folder>/{cases,decode,chat}.jsonl must be reproduced exactly
// (ids made by HF `tokenizers` 0.22.2, see testdata/tokenizers/README.md). A failure names the folder, the line
// and the first differing position; every line is counted so none can be skipped silently.
#include <gtest/gtest.h>

#include "tests/tokenizer/tok_test_util.h"
#include "tokenizer/unicode.h"

namespace pipit::test {
namespace {

constexpr int kMaxReports = 15;  // per folder and file, so one systematic bug does not flood the log

class Reporter {
 public:
  Reporter(std::string file) : file_(std::move(file)) {}
  void check(int line, const std::string& what, const std::string& diff) {
    if (diff.empty()) return;
    if (++failures_ <= kMaxReports) ADD_FAILURE() << file_ << ":" << line << ": " << what << ": " << diff;
  }
  ~Reporter() { EXPECT_EQ(failures_, 0) << file_ << ": " << failures_ << " mismatches in total"; }

 private:
  std::string file_;
  int failures_ = 0;
};

TEST(TokenizerGolden, TestdataPresent) {
  auto folders = golden_folders();
  ASSERT_FALSE(folders.empty()) << "no tokenizer folders under " << tokenizers_dir()
                                << " (set PIPIT_TESTDATA to the testdata folder)";
  for (const char* want : {"gemma3", "llama3", "llama3_initial", "mistral", "qwen3"})
    EXPECT_NE(std::find(folders.begin(), folders.end(), want), folders.end()) << want << " missing";
  for (auto& f : folders) {
    EXPECT_TRUE(std::filesystem::exists(tokenizers_dir() + "/" + f + "/cases.jsonl")) << f;
    EXPECT_TRUE(std::filesystem::exists(tokenizers_dir() + "/" + f + "/decode.jsonl")) << f;
  }
}

// Each folder twice: the tokenizer loaded from its tokenizer.json, and compiled (Tokenizer::compile, what a .pipit
// stores beside the text) then loaded from that.
struct GoldenParam {
  std::string folder;
  bool compiled;
};

class GoldenFolder : public ::testing::TestWithParam<GoldenParam> {
 protected:
  const std::string& folder() const { return GetParam().folder; }
  std::string path(const char* file) const { return tokenizers_dir() + "/" + folder() + "/" + file; }
  std::shared_ptr<Tokenizer> tokenizer() const {
    return GetParam().compiled ? compiled_golden_tokenizer(folder()) : golden_tokenizer(folder());
  }
  std::string name() const { return folder() + (GetParam().compiled ? " (compiled)" : ""); }
};

TEST_P(GoldenFolder, Cases) {
  auto tok = tokenizer();
  ASSERT_TRUE(tok);
  auto lines = read_jsonl(path("cases.jsonl"));
  ASSERT_FALSE(lines.empty());
  Reporter rep(name() + " cases.jsonl");
  size_t checked = 0;
  for (auto& [n, j] : lines) {
    std::string text = j.at("text");
    auto want_ids = ids_of(j.at("ids")), want_special = ids_of(j.at("ids_special"));
    auto ids = tok->encode(text, false);
    auto ids_sp = tok->encode(text, true);
    rep.check(n, "encode", ids ? diff_ids(want_ids, *ids) : ids.status().message());
    rep.check(n, "encode(add_special_tokens)", ids_sp ? diff_ids(want_special, *ids_sp) : ids_sp.status().message());
    rep.check(n, "decode(ids)", diff_text(j.at("decoded"), tok->decode(want_ids, false)));
    rep.check(n, "decode(ids_special)", diff_text(j.at("decoded_special"), tok->decode(want_special, false)));
    ++checked;
  }
  EXPECT_EQ(checked, lines.size());
}

TEST_P(GoldenFolder, Decode) {
  auto tok = tokenizer();
  ASSERT_TRUE(tok);
  auto lines = read_jsonl(path("decode.jsonl"));
  ASSERT_FALSE(lines.empty());
  Reporter rep(name() + " decode.jsonl");
  for (auto& [n, j] : lines) {
    auto ids = ids_of(j.at("ids"));
    bool skip = j.at("skip_special_tokens");
    rep.check(n, skip ? "decode(skip_special_tokens)" : "decode", diff_text(j.at("decoded"), tok->decode(ids, skip)));
  }
}

TEST_P(GoldenFolder, ChatIds) {
  if (!std::filesystem::exists(path("chat.jsonl"))) {
    EXPECT_EQ(folder(), "mistral") << "only mistral ships without chat.jsonl (it has no chat template)";
    return;
  }
  auto tok = tokenizer();
  ASSERT_TRUE(tok);
  auto lines = read_jsonl(path("chat.jsonl"));
  ASSERT_FALSE(lines.empty());
  Reporter rep(name() + " chat.jsonl");
  for (auto& [n, j] : lines) {
    auto ids = tok->encode(j.at("text").get<std::string>(), false);
    rep.check(n, "encode(text)", ids ? diff_ids(ids_of(j.at("ids")), *ids) : ids.status().message());
  }
}

// Streaming each golden id sequence one id at a time gives exactly the golden decode, in valid UTF-8 pieces.
TEST_P(GoldenFolder, StreamDecoderMatchesDecode) {
  auto tok = tokenizer();
  ASSERT_TRUE(tok);
  struct Seq { int line; std::string file; std::vector<int32_t> ids; bool skip; std::string want; };
  std::vector<Seq> seqs;
  for (auto& [n, j] : read_jsonl(path("cases.jsonl"))) {
    seqs.push_back({n, "cases.jsonl", ids_of(j.at("ids")), false, j.at("decoded")});
    seqs.push_back({n, "cases.jsonl", ids_of(j.at("ids_special")), false, j.at("decoded_special")});
    seqs.push_back({n, "cases.jsonl", ids_of(j.at("ids_special")), true, ""});
  }
  for (auto& [n, j] : read_jsonl(path("decode.jsonl")))
    seqs.push_back({n, "decode.jsonl", ids_of(j.at("ids")), j.at("skip_special_tokens"), j.at("decoded")});
  ASSERT_FALSE(seqs.empty());
  Reporter rep(name() + " stream");
  StreamDecoder sd(*tok, false), sd_skip(*tok, true);
  for (auto& s : seqs) {
    StreamDecoder& d = s.skip ? sd_skip : sd;
    std::string want = s.want.empty() && s.skip ? tok->decode(s.ids, true) : s.want;
    std::string got;
    bool pieces_valid = true;
    for (int32_t id : s.ids) {
      std::string piece = d.push(id);
      pieces_valid = pieces_valid && tok::utf8_valid(piece);
      got += piece;
    }
    got += d.flush();
    rep.check(s.line, s.file + (s.skip ? " stream(skip_special_tokens)" : " stream"), diff_text(want, got));
    rep.check(s.line, s.file + " stream", pieces_valid ? "" : "a piece is not valid UTF-8");
  }
}

std::vector<GoldenParam> golden_params() {
  std::vector<GoldenParam> r;
  for (const std::string& f : golden_folders())
    for (bool compiled : {false, true}) r.push_back({f, compiled});
  return r;
}

std::string param_name(const ::testing::TestParamInfo<GoldenParam>& info) {
  return info.param.folder + (info.param.compiled ? "_compiled" : "");
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GoldenFolder, ::testing::ValuesIn(golden_params()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GoldenFolder);  // TestdataPresent reports a missing folder

TEST(TokenizerGolden, Stories260k) {
  auto tok = cached_tokenizer(testdata_dir() + "/models/stories260k");
  ASSERT_TRUE(tok);
  auto ids = tok->encode("Once upon a time", true);
  ASSERT_TRUE(ids) << ids.status().message();
  EXPECT_EQ(*ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->decode(*ids, true), "Once upon a time");
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->config().bos_token, "<s>");
}

}  // namespace
}  // namespace pipit::test
