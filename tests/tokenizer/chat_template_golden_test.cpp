// Chat templates against references: (1) every chat.jsonl of testdata/tokenizers (rendered by transformers.js, which
// agrees with Python Jinja2 there; see its README), text and ids; (2) tests/data/chat_templates/expected.jsonl,
// rendered by Python Jinja2 configured as transformers does (make_expected.py): real templates of the supported
// families with tools, thinking, images, multi-turn and error cases, plus one small template per construct.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tokenizer/tok_test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_builtins.h"

namespace pipit {
namespace {

using ojson = nlohmann::ordered_json;

std::vector<ojson> read_jsonl(const std::string& path) {
  std::vector<ojson> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    rows.push_back(ojson::parse(line, nullptr, false));
  }
  return rows;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// ---- testdata/tokenizers/*/chat.jsonl ----

class ChatGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatGolden, TextAndIds) {
  std::string dir = test::tokenizers_dir() + "/" + GetParam();
  std::shared_ptr<Tokenizer> tok = test::cached_tokenizer(dir);
  ASSERT_TRUE(tok);
  std::string chat_path = dir + "/chat.jsonl";
  bool has_template = !tok->config().chat_template.empty() || !tok->config().chat_templates.empty();
  if (!has_template) {
    // No template (mistral/): no chat.jsonl either, and apply_chat_template must say so.
    EXPECT_FALSE(std::ifstream(chat_path).good()) << GetParam() << " has chat.jsonl but no chat_template";
    Result<std::string> r = apply_chat_template(*tok, ojson::array({{{"role", "user"}, {"content", "hi"}}}), true);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), Code::kNotFound) << r.status().message();
    return;
  }
  std::vector<ojson> rows = read_jsonl(chat_path);
  ASSERT_FALSE(rows.empty()) << chat_path << " is missing or empty";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ojson& row = rows[i];
    ASSERT_FALSE(row.is_discarded()) << chat_path << ":" << i + 1 << " is not JSON";
    Result<std::string> text = apply_chat_template(*tok, row["messages"], row["add_generation_prompt"].get<bool>());
    ASSERT_TRUE(text.is_ok()) << chat_path << ":" << i + 1 << ": " << text.status().message();
    EXPECT_EQ(text.value(), row["text"].get<std::string>()) << chat_path << ":" << i + 1;
    Result<std::vector<int32_t>> ids = tok->encode(text.value(), false);
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    EXPECT_EQ(ids.value(), row["ids"].get<std::vector<int32_t>>()) << chat_path << ":" << i + 1;
  }
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Tokenizers, ChatGolden, ::testing::ValuesIn(test::golden_folders()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ChatGolden);  // TokenizerGolden.TestdataPresent reports a missing folder

// ---- tests/data/chat_templates/expected.jsonl (Python Jinja2) ----

std::string fixtures_dir() { return std::string(PIPIT_SOURCE_DIR) + "/tests/data/chat_templates"; }

struct Case {
  std::string name;
  ojson row;
};

std::vector<Case> load_cases() {
  std::vector<Case> cases;
  for (ojson& row : read_jsonl(fixtures_dir() + "/expected.jsonl")) {
    if (row.is_discarded() || row.contains("meta")) continue;
    cases.push_back({row["name"].get<std::string>(), std::move(row)});
  }
  return cases;
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = load_cases();
  return cases;
}

std::vector<size_t> case_indices() {
  std::vector<size_t> idx(all_cases().size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  return idx;
}

class JinjaReference : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override { jinja::set_clock_for_testing(1721986200); }  // make_expected.py's FIXED_NOW, UTC
  void TearDown() override { jinja::set_clock_for_testing(-1); }
};

TEST(JinjaReferenceFile, Present) {
  EXPECT_GT(all_cases().size(), 100u) << fixtures_dir() << "/expected.jsonl missing or short (run make_expected.py)";
}

TEST_P(JinjaReference, Matches) {
  const Case& c = all_cases()[GetParam()];
  const ojson& row = c.row;
  Result<std::string> out = Status(Code::kInternal, "not rendered");
  if (row["kind"] == "chat") {
    TokenizerConfig cfg;
    cfg.chat_template = read_text(fixtures_dir() + "/" + row["template"].get<std::string>());
    ASSERT_FALSE(cfg.chat_template.empty()) << row["template"];
    cfg.raw = nlohmann::json::parse(row["special_tokens"].dump());
    out = apply_chat_template(cfg, row["messages"], row["add_generation_prompt"].get<bool>(), row["kwargs"]);
  } else {
    Result<ChatTemplate> t = ChatTemplate::parse(row["source"].get<std::string>());
    out = t.is_ok() ? t.value().render(row["context"]) : Result<std::string>(t.status());
  }
  if (row.contains("error")) {
    ASSERT_FALSE(out.is_ok()) << "Jinja2 fails with \"" << row["error"].get<std::string>() << "\" but we render "
                              << ojson(out.value()).dump();
    // Errors raised by the template itself (raise_exception) must carry its message.
    if (row.value("error_type", "") == "TemplateError")
      EXPECT_NE(out.status().message().find(row["error"].get<std::string>()), std::string::npos) << out.status().message();
    EXPECT_NE(out.status().message().find("line "), std::string::npos) << out.status().message();
    return;
  }
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out.value(), row["text"].get<std::string>());
}

std::string case_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string n = all_cases()[info.param].name;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Cases, JinjaReference, ::testing::ValuesIn(case_indices()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(JinjaReference);  // JinjaReferenceFile.Present reports a missing file

}  // namespace
}  // namespace pipit
