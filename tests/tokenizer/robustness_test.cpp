// Bad input and edge cases: malformed tokenizer.json (each error names the component and field), invalid UTF-8
// text, empty strings, 1 MB inputs, long streams, tokenizer_config.json forms, and the lookup API.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "tests/tokenizer/tok_test_util.h"
#include "tokenizer/unicode.h"

namespace pipit::test {
namespace {

using nlohmann::json;

// A small valid tokenizer.json: byte-level pre-tokenizer, a vocab of single letters and one merge.
json base_json() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 4, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
                      "normalized": false, "special": true}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
       {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": false},
       {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
       {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
       "special_tokens": {"<s>": {"id": "<s>", "ids": [4], "tokens": ["<s>"]}}},
    "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3}, "merges": ["a b"]}
  })");
}

std::string load_error(const json& j) {
  auto r = Tokenizer::load(j.dump(), "");
  return r ? std::string("(loaded)") : r.status().message();
}

TEST(TokenizerRobustness, BaseJsonLoads) {
  auto r = Tokenizer::load(base_json().dump(), "");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->encode("ab ab", true).value(), (std::vector<int32_t>{4, 2, 3, 2}));
}

TEST(TokenizerRobustness, MalformedTokenizerJsonNamesTheProblem) {
  struct Case { std::function<void(json&)> mutate; std::vector<std::string> want; };
  std::vector<Case> cases = {
      {[](json& j) { j.erase("model"); }, {"missing field 'model'"}},
      {[](json& j) { j["extra_field"] = 1; }, {"unknown field 'extra_field'"}},
      {[](json& j) { j["version"] = "2.0"; }, {"version", "2.0"}},
      {[](json& j) { j["normalizer"] = {{"type", "Foo"}}; }, {"normalizer", "unknown normalizer type 'Foo'"}},
      {[](json& j) { j["normalizer"] = {{"kind", "NFC"}}; }, {"normalizer", "missing field 'type'"}},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0].erase("behavior"); },
       {"pre_tokenizer.pretokenizers[0] (Split)", "missing field 'behavior'"}},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Bogus"}}; },
       {"pre_tokenizer.pretokenizers[1]", "Bogus"}},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; }, {"Sideways"}},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(unclosed"}}; },
       {"pre_tokenizer.pretokenizers[0]", "(unclosed"}},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = "\\s+"; }, {"'pattern'"}},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = "yes"; },
       {"add_prefix_space", "true or false"}},
      {[](json& j) { j["decoder"] = {{"type", "Fuse"}, {"extra", 1}}; }, {"decoder (Fuse)", "unknown field 'extra'"}},
      {[](json& j) { j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", 1}}; }, {"missing field 'stop'"}},
      {[](json& j) { j["decoder"] = {{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}}; },
       {"single character"}},
      {[](json& j) { j["model"]["type"] = "WordPiece"; }, {"WordPiece", "not supported"}},
      {[](json& j) { j["model"]["type"] = "Quantum"; }, {"unknown model type 'Quantum'"}},
      {[](json& j) { j["model"].erase("vocab"); }, {"model (BPE)", "missing field 'vocab'"}},
      {[](json& j) { j["model"]["vocab"]["c"] = -3; }, {"vocab entry 'c'"}},
      {[](json& j) { j["model"]["merges"] = {"a c"}; }, {"merges[0]", "'c' is not in the vocab"}},
      {[](json& j) { j["model"]["merges"] = {"a b c"}; }, {"merges[0]"}},
      {[](json& j) { j["model"]["merges"] = {"b a"}; }, {"merged token 'ba'"}},
      // merges are looked up a group at a time (Bpe::parse): the first bad one is still the one named, also when a
      // later one in its group is malformed, and in a later group
      {[](json& j) { j["model"]["merges"] = {"a b", "a c", "a b c"}; }, {"merges[1]", "'c' is not in the vocab"}},
      {[](json& j) {
         j["model"]["merges"] = json::array();
         for (int i = 0; i < 17; ++i) j["model"]["merges"].push_back("a b");
         j["model"]["merges"].push_back("b a");
         j["model"]["merges"].push_back("x");
       },
       {"merges[17]", "merged token 'ba'"}},
      // every shape a merge or a vocab entry can take in JSON (tokenizer.json is read as SAX events: these are the
      // paths beside the usual "a b" / ["a", "b"] / "token": id)
      {[](json& j) { j["model"]["merges"] = json::parse(R"([["a"]])"); }, {"merges[0] must be"}},
      {[](json& j) { j["model"]["merges"] = json::parse(R"([["a", "b"], ["a", "b", "ab"]])"); }, {"merges[1] must be"}},
      {[](json& j) { j["model"]["merges"] = json::parse(R"([["a", 5]])"); }, {"merges[0] must be"}},
      {[](json& j) { j["model"]["merges"] = json::parse(R"([[["a"], "b"]])"); }, {"merges[0] must be"}},
      {[](json& j) { j["model"]["merges"] = json::parse(R"(["a b", {"a": "b"}])"); }, {"merges[1] must be"}},
      {[](json& j) { j["model"]["merges"] = json::parse(R"([null])"); }, {"merges[0] must be"}},
      {[](json& j) { j["model"]["merges"] = json::parse(R"([7.5])"); }, {"merges[0] must be"}},
      {[](json& j) { j["model"]["merges"] = "a b"; }, {"merges"}},
      {[](json& j) { j["model"]["vocab"]["c"] = json::parse(R"({"id": [5]})"); },
       {"vocab entry 'c' has id {\"id\":[5]}"}},
      {[](json& j) { j["model"]["vocab"]["c"] = 2.5; }, {"vocab entry 'c' has id 2.5"}},
      {[](json& j) { j["model"]["vocab"]["c"] = "3"; }, {"vocab entry 'c' has id \"3\""}},
      {[](json& j) { j["model"]["vocab"] = json::array({"a"}); }, {"'vocab' must be an object"}},
      {[](json& j) { j["model"] = json::array({json::object({{"vocab", 1}})}); }, {"model"}},
      {[](json& j) { j["model"]["surprise"] = true; }, {"model (BPE)", "unknown field 'surprise'"}},
      {[](json& j) { j["added_tokens"][0].erase("content"); }, {"added_tokens[0]", "missing field 'content'"}},
      {[](json& j) { j["added_tokens"] = 5; }, {"added_tokens"}},
      {[](json& j) { j["post_processor"]["single"][0]["SpecialToken"]["id"] = "<x>"; },
       {"post_processor (TemplateProcessing)", "'<x>'"}},
      {[](json& j) { j["post_processor"] = {{"type", "Nope"}}; }, {"unknown post-processor type 'Nope'"}},
      {[](json& j) { j["truncation"] = {{"max_length", "long"}}; }, {"truncation", "max_length"}},
      {[](json& j) { j = json::array(); }, {"top level"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    json j = base_json();
    cases[i].mutate(j);
    std::string err = load_error(j);
    for (auto& w : cases[i].want) EXPECT_NE(err.find(w), std::string::npos) << "case " << i << ": '" << err << "'";
  }
  EXPECT_NE(Tokenizer::load("{\"model\": ", "").status().message().find("not valid JSON"), std::string::npos);
  EXPECT_NE(Tokenizer::load("", "").status().message().find("not valid JSON"), std::string::npos);
  EXPECT_NE(Tokenizer::load(base_json().dump(), "[").status().message().find("tokenizer_config.json"),
            std::string::npos);
  EXPECT_NE(Tokenizer::load_dir("/nonexistent/dir").status().message().find("tokenizer.json"), std::string::npos);
}

// Both forms of merges, mixed, with a vocab whose entries sit beside objects and floats elsewhere in the file: the
// same ids as the tree-built tables gave.
TEST(TokenizerRobustness, MergeFormsAndTheRestOfTheFile) {
  json j = base_json();
  j["model"]["vocab"]["abb"] = 5;
  j["model"]["merges"] = json::parse(R"(["a b", ["ab", "b"]])");
  j["model"]["dropout"] = 0.25;
  auto r = Tokenizer::load(j.dump(), "");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ((*r)->encode("abb ab", false).value(), (std::vector<int32_t>{5, 3, 2}));
}

TEST(TokenizerRobustness, TokenizerConfigForms) {
  std::string tj = base_json().dump();
  auto a = Tokenizer::load(tj, R"({"chat_template": "{{ x }}", "bos_token": {"content": "<s>", "lstrip": false},
                                   "eos_token": "</s>", "pad_token": null})");
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_EQ((*a)->config().chat_template, "{{ x }}");
  EXPECT_EQ((*a)->config().bos_token, "<s>");
  EXPECT_EQ((*a)->config().eos_token, "</s>");
  EXPECT_EQ((*a)->config().pad_token, "");
  EXPECT_EQ((*a)->config().raw["eos_token"], "</s>");
  auto b = Tokenizer::load(tj, R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                                    {"name": "default", "template": "D"}]})");
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_EQ((*b)->config().chat_template, "D");
  EXPECT_EQ((*b)->config().chat_templates.at("tool_use"), "T");
  EXPECT_FALSE(Tokenizer::load(tj, R"({"chat_template": 3})"));
  EXPECT_FALSE(Tokenizer::load(tj, R"({"chat_template": [{"name": "x"}]})"));
  EXPECT_FALSE(Tokenizer::load(tj, R"({"bos_token": 7})"));
  auto c = Tokenizer::load(tj, "");
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)->config().chat_template, "");
}

TEST(TokenizerRobustness, LookupApi) {
  auto tok = golden_tokenizer("qwen3");
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok->token_to_id("Hello"), 9707);
  EXPECT_FALSE(tok->token_to_id("no such token"));
  EXPECT_EQ(tok->id_to_token(9707), "Hello");
  EXPECT_EQ(tok->id_to_token(151645), "<|im_end|>");
  EXPECT_EQ(tok->id_to_token(-1), "");
  EXPECT_EQ(tok->id_to_token(1 << 30), "");
  EXPECT_TRUE(tok->is_special(151645));
  EXPECT_FALSE(tok->is_special(151665));  // <tool_response> is an added but not special token
  EXPECT_FALSE(tok->is_special(9707));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{9707, -5, 1 << 30, 1879}, false), "Hello world");  // unknown ids dropped
  EXPECT_EQ(tok->config().eos_token, "<|im_end|>");
  auto gemma = golden_tokenizer("gemma3");
  ASSERT_TRUE(gemma);
  EXPECT_EQ(gemma->vocab_size(), 262145);
  EXPECT_EQ(gemma->token_to_id("<image_soft_token>"), 262144);
}

// Rule: invalid UTF-8 in encode's input is first replaced like Rust's String::from_utf8_lossy (one U+FFFD per
// maximal invalid subpart), what HF receives when a binding converts bytes to a string; encode never fails on it.
TEST(TokenizerRobustness, InvalidUtf8InputIsReplaced) {
  for (const auto& folder : golden_folders()) {
    auto tok = golden_tokenizer(folder);
    ASSERT_TRUE(tok);
    for (std::string bad : {std::string("a\xFF" "b"), std::string("\xE4\xB8"), std::string("x\xC0\x80y"),
                            std::string("\xED\xA0\x80"), std::string("ok \xF0\x9F\x98")}) {
      auto got = tok->encode(bad, true);
      auto want = tok->encode(tok::utf8_lossy(bad), true);
      ASSERT_TRUE(got && want) << folder;
      EXPECT_EQ(*got, *want) << folder;
    }
    std::mt19937 rng(3);
    for (int i = 0; i < 300; ++i) {
      std::string s(rng() % 40, '\0');
      for (auto& ch : s) ch = static_cast<char>(rng());
      auto ids = tok->encode(s, true);
      ASSERT_TRUE(ids) << folder << ": " << ids.status().message();
      EXPECT_TRUE(tok::utf8_valid(tok->decode(*ids, false))) << folder;
    }
  }
}

TEST(TokenizerRobustness, EmptyStrings) {
  struct Want { const char* folder; std::vector<int32_t> with_special; };
  for (const Want& w : {Want{"qwen3", {}}, Want{"llama3", {128000}}, Want{"llama3_initial", {}},
                        Want{"mistral", {1}}, Want{"gemma3", {2}}}) {
    auto tok = golden_tokenizer(w.folder);
    ASSERT_TRUE(tok);
    EXPECT_TRUE(tok->encode("", false).value().empty()) << w.folder;
    EXPECT_EQ(tok->encode("", true).value(), w.with_special) << w.folder;
    EXPECT_EQ(tok->decode(std::vector<int32_t>{}, false), "") << w.folder;
    StreamDecoder sd(*tok, false);
    EXPECT_EQ(sd.flush(), "") << w.folder;
  }
}

std::string corpus_text(size_t min_bytes) {
  std::string once;
  for (auto& l : read_jsonl(tokenizers_dir() + "/qwen3/cases.jsonl")) once += l.value.at("text").get<std::string>() + "\n";
  std::string s;
  while (s.size() < min_bytes) s += once;
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// 1 MB inputs, including one-word worst cases for the BPE loop: no failure, no quadratic blow-up, and byte-level
// tokenizers round-trip (up to Qwen's NFC normalizer).
TEST(TokenizerRobustness, OneMegabyteInputs) {
  const std::string mixed = corpus_text(1 << 20);
  const std::vector<std::string> inputs = {mixed, std::string(1 << 20, 'a'), std::string(1 << 20, ' '),
                                           std::string(1 << 20, '7'), [] {
                                             std::string s;
                                             while (s.size() < (1 << 20)) s += "\xE4\xB8\xAD";
                                             return s;
                                           }()};
  for (const auto& folder : golden_folders()) {
    auto tok = golden_tokenizer(folder);
    ASSERT_TRUE(tok);
    for (size_t k = 0; k < inputs.size(); ++k) {
      auto t0 = std::chrono::steady_clock::now();
      auto ids = tok->encode(inputs[k], false);
      double dt = seconds_since(t0);
      ASSERT_TRUE(ids) << folder << " input " << k << ": " << ids.status().message();
      EXPECT_FALSE(ids->empty());
      EXPECT_LT(dt, 20.0) << folder << " input " << k << " took " << dt << " s";
      if (folder == "qwen3" || folder.rfind("llama3", 0) == 0) {
        std::string want = folder == "qwen3" ? tok::normalize_form(inputs[k], tok::NormForm::kNFC).value() : inputs[k];
        EXPECT_TRUE(tok->decode(*ids, false) == want) << folder << " input " << k << " does not round-trip";
      }
    }
  }
}

// Random id streams (byte tokens, specials, unknown ids) through StreamDecoder equal decode of the whole list.
TEST(TokenizerRobustness, StreamDecoderRandomIds) {
  for (const auto& folder : golden_folders()) {
    auto tok = golden_tokenizer(folder);
    ASSERT_TRUE(tok);
    std::mt19937 rng(11);
    int32_t n = tok->vocab_size();
    for (int iter = 0; iter < 400; ++iter) {
      std::vector<int32_t> ids;
      int len = rng() % 60;
      for (int k = 0; k < len; ++k) {
        int r = rng() % 10;
        ids.push_back(r < 4 ? static_cast<int32_t>(rng() % 300) : r < 5 ? n - 1 - static_cast<int32_t>(rng() % 300)
                      : r < 6 ? n + 5 : static_cast<int32_t>(rng() % n));
      }
      for (bool skip : {false, true}) {
        StreamDecoder sd(*tok, skip);
        std::string got;
        for (int32_t id : ids) {
          std::string piece = sd.push(id);
          ASSERT_TRUE(tok::utf8_valid(piece)) << folder;
          got += piece;
        }
        got += sd.flush();
        ASSERT_EQ(got, tok->decode(ids, skip)) << folder << " iteration " << iter;
      }
    }
  }
}

// A long generation costs O(n): 200k ids stream in well under the time an O(n^2) re-decode would take.
TEST(TokenizerRobustness, StreamDecoderIsLinear) {
  for (const char* folder : {"qwen3", "mistral"}) {
    auto tok = golden_tokenizer(folder);
    ASSERT_TRUE(tok);
    auto ids = tok->encode(corpus_text(600000), false).value();
    ASSERT_GT(ids.size(), 150000u);
    auto t0 = std::chrono::steady_clock::now();
    StreamDecoder sd(*tok, true);
    std::string got;
    for (int32_t id : ids) got += sd.push(id);
    got += sd.flush();
    double dt = seconds_since(t0);
    EXPECT_EQ(got, tok->decode(ids, true)) << folder;
    EXPECT_LT(dt, 10.0) << folder << ": streaming " << ids.size() << " ids took " << dt << " s";
  }
}

}  // namespace
}  // namespace pipit::test
