// A GGUF vocabulary built from its parts (Tokenizer::load_parts: what loading a .gguf does) is the tokenizer that the
// tokenizer.json text of those parts gives (Tokenizer::load: what `pipit convert` stores and a .pipit loads): the same
// vocabulary, added tokens and config, and the same ids and decoded text for a varied set of texts (ASCII, CJK, emoji,
// the vocabulary's special tokens, whitespace runs, invalid UTF-8). Checked for every GGUF under
// tests/data/llamacpp_gguf, for Qwen3's and Llama 3's real vocabularies written as GGUF, and for vocabularies with
// repeated tokens and tokens that are not UTF-8 (which the text replaces by U+FFFD).
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/gguf_import.h"
#include "format/gguf.h"
#include "tests/unit/convert_test_util.h"
#include "tests/unit/gguf_test_writer.h"
#include "tokenizer/tokenizer.h"

namespace pipit {
namespace {

std::vector<std::string> sample_texts(const std::vector<std::string>& specials) {
  std::vector<std::string> t = {
      "",
      "Hello world",
      "Once upon a time, there was a little girl named Lily.",
      " leading space",
      "multiple     spaces   and\ttabs\t\tand\nnewlines\n\n\nand\r\nCRLF",
      std::string(40, ' ') + "x" + std::string(17, '\n') + "y" + std::string(9, '\t'),
      "     ",
      "\n",
      "你好，世界。这是一个测试。日本語のテキストです。한국어 텍스트",
      "emoji 🙂👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 and 🤖!",
      "café naïve Ångström ﬁ ligature Ⅻ ½",
      "3.14159 12345678 1,000,000 0x1F 2024-01-01",
      "def f(x):\n    return x**2  # comment\n\n\nclass A:\n\tpass",
      "I'm sure they'll say it's fine, we've done it'd",
      "\xff\xfe bad \xc3 bytes \xe2\x82",
      "\xef\xbf\xbd replacement char",
  };
  std::string all;
  for (const std::string& s : specials) {
    t.push_back(s);
    t.push_back("text" + s + " more " + s + s + "\n");
    all += s + " ";
  }
  if (!all.empty()) t.push_back(all);
  return t;
}

// Builds the tokenizer of `f` both ways and compares everything the runtime reads of it.
void expect_same_tokenizer(const GgufFile& f, const std::string& name) {
  SCOPED_TRACE(name);
  auto texts = gguf_tokenizer_to_hf(f);
  auto parts = gguf_tokenizer_parts(f);
  ASSERT_EQ(texts.is_ok(), parts.is_ok());
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  auto a = Tokenizer::load(texts->tokenizer_json, texts->tokenizer_config_json);
  auto b = Tokenizer::load_parts(std::move(*parts));
  ASSERT_EQ(a.is_ok(), b.is_ok()) << (a.is_ok() ? b.status().message() : a.status().message());
  if (!a.is_ok()) {  // both refuse: for the same reason
    EXPECT_EQ(a.status().message(), b.status().message());
    return;
  }
  const Tokenizer& x = **a;
  const Tokenizer& y = **b;
  ASSERT_EQ(x.vocab_size(), y.vocab_size());
  std::vector<std::string> specials;
  int differ = 0;
  for (int32_t id = 0; id < x.vocab_size(); ++id) {
    const std::string t = x.id_to_token(id);
    const bool same = t == y.id_to_token(id) && x.is_special(id) == y.is_special(id) &&
                      x.token_to_id(t) == y.token_to_id(t);
    if (!same && differ++ < 3) ADD_FAILURE() << "id " << id << ": '" << t << "' / '" << y.id_to_token(id) << "'";
    if (x.is_special(id) && !t.empty() && specials.size() < 40) specials.push_back(t);
  }
  EXPECT_EQ(differ, 0);
  EXPECT_EQ(x.config().chat_template, y.config().chat_template);
  EXPECT_EQ(x.config().chat_templates, y.config().chat_templates);
  EXPECT_EQ(x.config().bos_token, y.config().bos_token);
  EXPECT_EQ(x.config().eos_token, y.config().eos_token);
  EXPECT_EQ(x.config().pad_token, y.config().pad_token);
  EXPECT_EQ(x.config().unk_token, y.config().unk_token);
  EXPECT_EQ(x.config().raw, y.config().raw);
  int encoded = 0;
  for (const std::string& text : sample_texts(specials)) {
    for (bool special : {false, true}) {
      auto ea = x.encode(text, special), eb = y.encode(text, special);
      ASSERT_EQ(ea.is_ok(), eb.is_ok()) << text;
      if (!ea.is_ok()) {
        EXPECT_EQ(ea.status().message(), eb.status().message()) << text;
        continue;
      }
      EXPECT_EQ(*ea, *eb) << text;
      EXPECT_EQ(x.decode(*ea, special), y.decode(*eb, special)) << text;
      encoded += !ea->empty();
    }
  }
  EXPECT_GT(encoded, 20);  // the texts did become ids (not one refusal after another)
}

std::string data_dir() { return std::string(PIPIT_SOURCE_DIR) + "/tests/data/llamacpp_gguf"; }

// Every GGUF of the committed llama.cpp files: SentencePiece (stories260k), byte-level with the qwen2 pre-tokenizer
// (qwen3_tiny, Qwen3-VL, Qwen3.5), Gemma 4's own ("gemma4", its GgufVocab hook: gemma4_bpe). The others hold no
// vocabulary pipit reads (mmproj files, gpt-oss's "none", the toy Gemma 4 files without merges): both ways refuse
// them alike.
TEST(GgufTokenizerParts, EveryTestGgufGivesTheSameTokenizerBothWays) {
  std::vector<std::string> files;
  if (DIR* d = opendir(data_dir().c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) files.push_back(n);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 20u);
  int with_vocab = 0;
  for (const std::string& n : files) {
    auto f = GgufFile::open(data_dir() + "/" + n);
    ASSERT_TRUE(f.is_ok()) << n << ": " << f.status().message();
    auto parts = gguf_tokenizer_parts(*f);
    if (!parts.is_ok()) {
      auto texts = gguf_tokenizer_to_hf(*f);
      ASSERT_FALSE(texts.is_ok()) << n;
      EXPECT_EQ(texts.status().message(), parts.status().message()) << n;
      continue;
    }
    ++with_vocab;
    std::printf("[ compare  ] %s\n", n.c_str());
    expect_same_tokenizer(*f, n);
  }
  EXPECT_GE(with_vocab, 15);
}

// Qwen3's and Llama 3's vocabularies (testdata/tokenizers) written into GGUF as llama.cpp stores them: 128k-151k
// tokens with their merges, the size the parts path exists for.
TEST(GgufTokenizerParts, RealByteLevelVocabsGiveTheSameTokenizerBothWays) {
  struct Case {
    const char* dir;
    const char* pre;
    int64_t bos;
  };
  for (const Case& k : {Case{"qwen3", "qwen2", -1}, Case{"llama3", "llama-bpe", 128000}}) {
    const std::string dir = test::testdata() + "/tokenizers/" + k.dir;
    auto tj = nlohmann::json::parse(test::read_bytes(dir + "/tokenizer.json"));
    auto tc = nlohmann::json::parse(test::read_bytes(dir + "/tokenizer_config.json"));
    const std::string bytes = test::byte_level_vocab_gguf(tj, tc, k.pre, k.bos);
    auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, k.dir);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    expect_same_tokenizer(*f, k.dir);
  }
}

// Tokens that are not UTF-8 become U+FFFD in tokenizer.json, so distinct tokens can become one there (and one with a
// token that is U+FFFD already): the text keeps the one its sorted keys put last. A token that repeats keeps its first
// id. The parts must give that same vocabulary, for byte-level and SentencePiece vocabularies, with and without such
// tokens (two ways of ordering the vocabulary in load_parts); a chat template that is not UTF-8 is replaced alike.
TEST(GgufTokenizerParts, InvalidUtf8AndRepeatedTokensAsTheTextHasThem) {
  for (bool bad : {true, false}) {
    const std::string b1 = bad ? "\xff" : "x", b2 = bad ? "\xfe" : "y", b3 = bad ? "\xe2\x82" : "z";
    const std::vector<std::string> tokens = {"a",      "b",        "ab",      b1,  b2,     "a", "\xef\xbf\xbd",
                                             b1 + "b", "\xc4\xa0", "<|end|>", b3, "<unk>"};
    const std::vector<int32_t> types = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 4, 2};
    for (const char* model : {"gpt2", "llama"}) {
      const std::string name = std::string(model) + (bad ? " with invalid UTF-8" : "");
      test::GgufWriter g;
      g.str("tokenizer.ggml.model", model);
      g.strs("tokenizer.ggml.tokens", tokens);
      g.i32s("tokenizer.ggml.token_type", types);
      if (std::string(model) == "gpt2") {
        g.str("tokenizer.ggml.pre", "qwen2");
        g.strs("tokenizer.ggml.merges", {"a b", b1 + " b"});
      } else {
        g.f32s("tokenizer.ggml.scores", {-1, -2, -0.5f, -3, -4, -1, -5, -0.25f, -6, 0, 0, 0});
        g.u32("tokenizer.ggml.unknown_token_id", 11);
      }
      g.u32("tokenizer.ggml.eos_token_id", 9);
      g.boolean("tokenizer.ggml.add_eos_token", true);
      g.str("tokenizer.chat_template", "{{ messages }} \xc3 {{ x }}");
      const std::string bytes = g.bytes();
      auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, name);
      ASSERT_TRUE(f.is_ok()) << f.status().message();
      expect_same_tokenizer(*f, name);
      // what the comparison rests on: the text kept the first "a" and merged the replaced tokens into one
      auto parts = gguf_tokenizer_parts(*f);
      ASSERT_TRUE(parts.is_ok());
      auto tok = Tokenizer::load_parts(std::move(*parts));
      ASSERT_TRUE(tok.is_ok()) << tok.status().message();
      EXPECT_EQ((*tok)->token_to_id("a"), 0) << name;
      EXPECT_EQ((*tok)->id_to_token(5), "") << name;
      EXPECT_EQ((*tok)->token_to_id("\xef\xbf\xbd"), bad ? 3 : 6) << name;  // "\xff" sorts after "\xef..", "\xfe"
      EXPECT_EQ((*tok)->id_to_token(4), bad ? "" : "y") << name;             // "\xfe" lost its entry to it
      EXPECT_EQ((*tok)->config().chat_template, "{{ messages }} \xef\xbf\xbd {{ x }}");
    }
  }
}

}  // namespace
}  // namespace pipit
