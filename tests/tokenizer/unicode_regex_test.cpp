// Unit tests of the tokenizer's Unicode and regex layer: Rust-compatible lossy UTF-8, character classes,
// normalization forms, the Oniguruma -> PCRE2 translation completed with HF's Unicode 16 property tables, and the
// hand-written GPT-2 / Llama-3 / Qwen2 matchers against PCRE2 on random text.
#include <gtest/gtest.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdlib>
#include <random>

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "tokenizer/regex.h"
#include "tokenizer/regex_fast.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_props.h"

namespace pipit::tok {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(TokenizerUnicode, LossyMatchesRustFromUtf8Lossy) {
  // One U+FFFD per maximal invalid subpart (Unicode 3.9 / Rust's Utf8Chunks).
  EXPECT_EQ(utf8_lossy("Hello \xF0\x90\x80World"), "Hello " + kFffd + "World");
  EXPECT_EQ(utf8_lossy("\xE4\xB8"), kFffd);                          // truncated 3-byte sequence
  EXPECT_EQ(utf8_lossy("\xC0\x80"), kFffd + kFffd);                  // overlong: C0 is never valid
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);      // surrogate
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(utf8_lossy("a\xFF" "b\x80" "c"), "a" + kFffd + "b" + kFffd + "c");
  EXPECT_EQ(utf8_lossy("\xE2\x82\xAC\xE2\x82"), "\xE2\x82\xAC" + kFffd);
  EXPECT_EQ(utf8_lossy(""), "");
  EXPECT_TRUE(utf8_valid("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8_valid("\xED\xA0\x80"));
  EXPECT_FALSE(utf8_valid("abcdefgh\xC3"));
  EXPECT_EQ(utf8_incomplete_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xC3"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xFF"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\xC3\xA9"), 0u);
}

TEST(TokenizerUnicode, RustCharacterClasses) {
  for (uint32_t c : {0x09u, 0x0Au, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u, 0x3000u})
    EXPECT_TRUE(is_whitespace(c)) << c;
  for (uint32_t c : {0x200Bu, 0x180Eu, 0xFEFFu, 0x41u}) EXPECT_FALSE(is_whitespace(c)) << c;
  EXPECT_TRUE(is_numeric(0x0663));  // Arabic-Indic three (Nd)
  EXPECT_TRUE(is_numeric(0x00BD));  // ½ (No)
  EXPECT_TRUE(is_numeric(0x216B));  // Ⅻ (Nl)
  EXPECT_FALSE(is_numeric('a'));
  EXPECT_TRUE(is_punctuation('$'));  // ASCII punctuation includes symbols
  EXPECT_TRUE(is_punctuation(0x00AB));
  EXPECT_FALSE(is_punctuation(0x20AC));  // € is Sc, not punctuation outside ASCII
}

TEST(TokenizerUnicode, NormalizationForms) {
  auto nfc = [](std::string s) { return normalize_form(s, NormForm::kNFC).value(); };
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                    // e + combining acute -> é
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                 // Å (angstrom sign) -> Å
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // conjoining jamo -> 각
  EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");   // U+0958 is excluded from composition
  EXPECT_EQ(nfc("a\xCC\xA3\xCC\x87"), "\xE1\xBA\xA1\xCC\x87");  // reordering + partial composition
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(normalize_form("\xEF\xAC\x81", NormForm::kNFKC).value(), "fi");
  EXPECT_EQ(normalize_form("\xC3\xA9", NormForm::kNFD).value(), "e\xCC\x81");
  EXPECT_EQ(to_lower("\xC4\xB0stanbul ABC"), "i\xCC\x87stanbul abc");
  // HF's normalization tables predate Unicode 12.1: it leaves ㋿ (U+32FF) and 𞁃 (U+1E043) as they are.
  EXPECT_EQ(normalize_form("a\xE3\x8B\xBF" "b", NormForm::kNFKC).value(), "a\xE3\x8B\xBF" "b");
  EXPECT_EQ(normalize_form("\xF0\x9E\x81\x83\xEF\xAC\x81", NormForm::kNFKD).value(), "\xF0\x9E\x81\x83" "fi");
  const std::string dives = "\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0";  // U+11935 U+11930: U+11938 to Unicode 13, not to HF
  EXPECT_EQ(normalize_form(dives, NormForm::kNFC).value(), dives);
  EXPECT_EQ(normalize_form(dives, NormForm::kNFKC).value(), dives);
}

// NFC through the fast chunked path equals utf8proc on the whole string, on random mixes of risky code points.
TEST(TokenizerUnicode, NfcChunkingEqualsWholeString) {
  std::mt19937 rng(7);
  const uint32_t pool[] = {'a', 'e', 'A', ' ', 0x301, 0x323, 0x307, 0x308, 0xE9, 0x212B, 0x2126, 0x1100, 0x1161,
                           0x11A8, 0xAC00, 0x958, 0x93C, 0x915, 0x3099, 0x304B, 0x0CD5, 0x0CBF, 0x1F600, 0x4E2D};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    int n = rng() % 12;
    for (int k = 0; k < n; ++k) utf8_append(s, pool[rng() % std::size(pool)]);
    std::string whole;
    {
      utf8proc_uint8_t* out = nullptr;
      auto len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), s.size(), &out,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
      ASSERT_GE(len, 0);
      whole.assign(reinterpret_cast<char*>(out), len);
      free(out);
    }
    EXPECT_EQ(normalize_form(s, NormForm::kNFC).value(), whole);
  }
}

TEST(TokenizerRegex, OnigTranslation) {
  const std::string space = "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}-\\x{2029}"
                            "\\x{202F}\\x{205F}\\x{3000}";
  EXPECT_EQ(onig_to_pcre2("a\\sb"), "a[" + space + "]b");
  EXPECT_EQ(onig_to_pcre2("[^\\s]"), "[^" + space + "]");
  EXPECT_EQ(onig_to_pcre2("\\S"), "[^" + space + "]");
  EXPECT_EQ(onig_to_pcre2("\\h+"), "[0-9a-fA-F]+");
  EXPECT_EQ(onig_to_pcre2("\\p{Han}"), "\\p{Han}");  // properties pipit does not track stay PCRE2's
  std::string l = onig_to_pcre2("\\p{L}");
  EXPECT_EQ(l.rfind("[\\p{L}", 0), 0u) << l;  // completed with the code points PCRE2's tables may lack
}

// Every code point PCRE2 puts in a translated class is also in HF's set, and the translation covers HF's set:
// the translated classes equal HF's measured properties exactly.
TEST(TokenizerRegex, TranslatedPropertiesEqualHf) {
  struct Case { const char* onig; const char* prop; bool escape; };
  const Case cases[] = {{"\\p{L}", "L", false}, {"\\p{N}", "N", false}, {"\\p{P}", "P", false},
                        {"\\p{S}", "S", false}, {"\\p{M}", "M", false}, {"\\p{Lu}", "Lu", false},
                        {"\\p{Nd}", "Nd", false}, {"\\w", "w", true}, {"\\d", "d", true}, {"\\s", "s", true}};
  for (const Case& c : cases) {
    const generated::HfProperty* p = c.escape ? hf_escape_class(c.prop[0]) : hf_property(c.prop);
    ASSERT_NE(p, nullptr) << c.onig;
    std::string pat = onig_to_pcre2(c.onig);
    int err;
    PCRE2_SIZE off;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &off, nullptr);
    ASSERT_NE(code, nullptr) << pat;
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    int mismatches = 0;
    std::string buf;
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      buf.clear();
      utf8_append(buf, cp);
      bool pc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(buf.data()), buf.size(), 0, 0, md, nullptr) >= 0;
      if (pc != in_property(*p, cp) && ++mismatches <= 5)
        ADD_FAILURE() << c.onig << ": U+" << std::hex << cp << " pcre2=" << pc << " hf=" << !pc;
    }
    EXPECT_EQ(mismatches, 0) << c.onig;
    pcre2_match_data_free(md);
    pcre2_code_free(code);
  }
}

TEST(TokenizerRegex, CharClassTable) {
  EXPECT_EQ(char_class('a'), CharClass::kLetter);
  EXPECT_EQ(char_class('7'), CharClass::kNumber);
  EXPECT_EQ(char_class(0x85), CharClass::kSpace);
  EXPECT_EQ(char_class(0x4E2D), CharClass::kLetter);
  EXPECT_EQ(char_class(0x11F04), CharClass::kLetter);  // Kawi (Unicode 15): a letter for HF
  EXPECT_EQ(char_class('!'), CharClass::kOther);
  EXPECT_EQ(char_class(0x10FFFF), CharClass::kOther);
}

std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> atoms = {
      "'s", "'S", "'ll", "'LL", "'Re", "'ve", "'m", "'d", "'t", "'x", "'\xC5\xBF", " ", "  ", "   ", "\t", "\n", "\r\n",
      "\r", "\n\n", " \n ", "\xC2\x85", "\xC2\xA0", "\xE3\x80\x80", "a", "Hello", "world", "1", "12", "1234567",
      "\xD9\xA3", "\xC2\xBD", "!", "...", "(", "'", "\"", "-", "\xE4\xB8\xAD\xE6\x96\x87", "\xF0\x9F\x98\x80",
      "\xF0\x91\xBC\x84", "\xE2\x80\x8B", "\xE1\xA0\x8E", "\xEF\xBB\xBF", "\xCC\x81", "_", "$", "\xE2\x82\xAC", "\x01", "\x7F"};
  std::string s;
  int n = rng() % 20;
  for (int k = 0; k < n; ++k) s += atoms[rng() % atoms.size()];
  return s;
}

// The hand-written matchers return exactly PCRE2's matches for their patterns.
TEST(TokenizerRegex, FastMatchersEqualPcre2) {
  const char* patterns[] = {
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  std::mt19937 rng(42);
  for (const char* pat : patterns) {
    auto fast = Regex::compile(pat, Regex::Engine::kAuto);
    auto slow = Regex::compile(pat, Regex::Engine::kPcre2);
    ASSERT_TRUE(fast && slow);
    ASSERT_TRUE((*fast)->uses_fast_path());
    ASSERT_FALSE((*slow)->uses_fast_path());
    int bad = 0;
    for (int iter = 0; iter < 20000 && bad < 5; ++iter) {
      std::string s = random_text(rng);
      std::vector<std::pair<size_t, size_t>> a, b;
      ASSERT_TRUE((*fast)->find_all(s, a).is_ok());
      ASSERT_TRUE((*slow)->find_all(s, b).is_ok());
      if (a != b) {
        ++bad;
        ADD_FAILURE() << "pattern " << pat << " differs on " << nlohmann::json(s).dump();
      }
    }
  }
}

}  // namespace
}  // namespace pipit::tok

namespace pipit {
namespace {

// NFC of long runs of combining marks: put in canonical order by a stable sort (tokenizer/unicode.cpp
// decompose_ordered) instead of utf8proc's neighbour exchanges, which are quadratic in a run's length. The result
// must be utf8proc's own NFC of the whole string, byte for byte. (Its time: the hostile suite's 'unicode' class.)
TEST(UnicodeNfc, LongMarkRunsEqualUtf8proc) {
  const uint32_t marks[] = {0x300, 0x301, 0x316, 0x327, 0x328, 0x334, 0x345, 0x35C, 0x360, 0x5B0,
                            0x5C1, 0x93C, 0x1DCE, 0x20D2, 0x308, 0x30A, 0x1161, 0x11A8};
  const uint32_t starters[] = {'a', 'e', 'o', 0x1100, 0xAC00, 0x391, 'x'};
  std::mt19937 rng(11);
  auto put = [](std::string& s, uint32_t c) {
    utf8proc_uint8_t b[4];
    s.append(reinterpret_cast<char*>(b), size_t(utf8proc_encode_char(utf8proc_int32_t(c), b)));
  };
  for (int k = 0; k < 30; ++k) {
    std::string s;
    put(s, starters[rng() % std::size(starters)]);
    const int n = 100 + int(rng() % 700);
    for (int i = 0; i < n; ++i) put(s, rng() % 10 == 0 ? starters[rng() % std::size(starters)] : marks[rng() % std::size(marks)]);
    auto got = tok::normalize_form(s, tok::NormForm::kNFC);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    utf8proc_uint8_t* ref = nullptr;
    const auto len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), utf8proc_ssize_t(s.size()), &ref,
                                  utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    ASSERT_GT(len, 0);
    EXPECT_EQ(*got, std::string(reinterpret_cast<char*>(ref), size_t(len))) << "case " << k;
    std::free(ref);
  }
}

}  // namespace
}  // namespace pipit
