// Component goldens: normalizers, pre-tokenizers and decoders one at a time, and small whole tokenizers (BPE
// options, added-token flags, post-processors, truncation, padding), each expected output computed by HF
// tokenizers 0.22.2 (tests/tokenizer/make_component_goldens.js -> data/components.jsonl).
#include <gtest/gtest.h>

#include "tests/tokenizer/tok_test_util.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

#ifndef PIPIT_SOURCE_DIR
#define PIPIT_SOURCE_DIR "."
#endif

namespace pipit::test {
namespace {

std::vector<JsonLine> component_lines(const std::string& kind) {
  std::vector<JsonLine> r;
  for (auto& l : read_jsonl(std::string(PIPIT_SOURCE_DIR) + "/tests/tokenizer/data/components.jsonl"))
    if (l.value.at("kind") == kind) r.push_back(std::move(l));
  return r;
}

std::string where(const JsonLine& l) {
  return "components.jsonl:" + std::to_string(l.line) + " " + l.value.at("name").get<std::string>() + " input " +
         l.value.at("input").dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(TokenizerComponents, Normalizers) {
  auto lines = component_lines("normalizer");
  ASSERT_GT(lines.size(), 50u);
  for (auto& l : lines) {
    auto n = tok::parse_normalizer(l.value.at("config"), "normalizer");
    ASSERT_TRUE(n) << where(l) << ": " << n.status().message();
    std::string s = l.value.at("input");
    ASSERT_TRUE((*n)->normalize(s).is_ok()) << where(l);
    EXPECT_EQ(diff_text(l.value.at("expected"), s), "") << where(l);
  }
}

TEST(TokenizerComponents, PreTokenizers) {
  auto lines = component_lines("pre_tokenizer");
  ASSERT_GT(lines.size(), 100u);
  for (auto& l : lines) {
    auto p = tok::parse_pre_tokenizer(l.value.at("config"), "pre_tokenizer");
    ASSERT_TRUE(p) << where(l) << ": " << p.status().message();
    // As in HF, an empty string has no splits at all (so nothing is prepended to it).
    std::string input = l.value.at("input");
    std::vector<tok::Piece> pieces;
    if (!input.empty()) pieces.push_back({input, true});
    ASSERT_TRUE((*p)->pre_tokenize(pieces).is_ok()) << where(l);
    std::vector<std::string> got;
    for (auto& piece : pieces) got.push_back(piece.text);
    EXPECT_EQ(nlohmann::json(got), l.value.at("expected")) << where(l);
  }
}

TEST(TokenizerComponents, Decoders) {
  auto lines = component_lines("decoder");
  ASSERT_GT(lines.size(), 30u);
  for (auto& l : lines) {
    auto d = tok::parse_decoder(l.value.at("config"), "decoder");
    ASSERT_TRUE(d) << where(l) << ": " << d.status().message();
    std::vector<std::string> tokens = l.value.at("input");
    (*d)->decode_chain(tokens);
    std::string got;
    for (auto& t : tokens) got += t;
    EXPECT_EQ(diff_text(l.value.at("expected"), got), "") << where(l);
  }
}

TEST(TokenizerComponents, WholeTokenizers) {
  auto lines = component_lines("tokenizer");
  ASSERT_GT(lines.size(), 50u);
  std::shared_ptr<Tokenizer> tok;
  std::string current;
  for (auto& l : lines) {
    std::string name = l.value.at("name");
    if (!l.value.at("config").is_null()) {
      auto r = Tokenizer::load(l.value.at("config").dump(), "");
      ASSERT_TRUE(r) << where(l) << ": " << r.status().message();
      tok = r.value();
      current = name;
    }
    ASSERT_EQ(current, name) << where(l) << ": the first line of each tokenizer must carry its config";
    std::string text = l.value.at("input");
    auto ids = tok->encode(text, false), ids_sp = tok->encode(text, true);
    ASSERT_TRUE(ids && ids_sp) << where(l);
    EXPECT_EQ(diff_ids(ids_of(l.value.at("ids")), *ids), "") << where(l);
    EXPECT_EQ(diff_ids(ids_of(l.value.at("ids_special")), *ids_sp), "") << where(l);
    auto want_sp = ids_of(l.value.at("ids_special"));
    EXPECT_EQ(diff_text(l.value.at("decoded"), tok->decode(want_sp, false)), "") << where(l);
    EXPECT_EQ(diff_text(l.value.at("decoded_skip"), tok->decode(want_sp, true)), "") << where(l);
  }
}

}  // namespace
}  // namespace pipit::test
