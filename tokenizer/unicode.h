// UTF-8 and Unicode helpers for the tokenizer (private header): code point iteration, Rust-compatible
// `String::from_utf8_lossy`, the character classes HF `tokenizers` uses (Rust char::is_whitespace, is_numeric,
// punctuation, regex \w), and normalization forms / lowercasing on top of utf8proc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace pipit::tok {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the UTF-8 sequence starting with `lead` (1 for invalid lead bytes, so loops always advance).
inline size_t utf8_seq_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

// Decodes the code point at s[i] and advances i. `s` must be valid UTF-8.
inline uint32_t utf8_next(std::string_view s, size_t& i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = utf8_seq_len(c);
  if (n == 1 || i + n > s.size()) { ++i; return c; }
  uint32_t cp = n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

// Code point that ends at byte `end` (exclusive) of valid UTF-8 `s`; `start` receives its first byte.
inline uint32_t utf8_prev(std::string_view s, size_t end, size_t* start) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  if (start) *start = b;
  size_t i = b;
  return utf8_next(s, i);
}

void utf8_append(std::string& out, uint32_t cp);

// True when `s` is well-formed UTF-8 (no surrogates, no overlongs, nothing above U+10FFFF).
bool utf8_valid(std::string_view s);

// Rust's String::from_utf8_lossy: every maximal invalid subpart becomes one U+FFFD.
std::string utf8_lossy(std::string_view s);

// Number of bytes at the end of `s` that form an incomplete (but so far valid) UTF-8 sequence.
size_t utf8_incomplete_tail(std::string_view s);

// The character predicates of HF's Rust code, from the tables measured through HF (generated/).
bool is_whitespace(uint32_t c);    // char::is_whitespace (Unicode White_Space)
bool is_numeric(uint32_t c);       // char::is_numeric (Nd, Nl, No), as the Digits pre-tokenizer sees it
bool is_punctuation(uint32_t c);   // ASCII punctuation or P* (the Punctuation / Bert pre-tokenizers' is_punc)
bool is_word_char(uint32_t c);     // Rust regex \w (Whitespace pre-tokenizer, added tokens' single_word)
bool is_combining_mark(uint32_t c);  // StripAccents' is_combining_mark

enum class NormForm { kNFC, kNFD, kNFKC, kNFKD };

// Unicode normalization of valid UTF-8 (utf8proc). NFC has a fast path that leaves stable runs untouched.
Result<std::string> normalize_form(std::string_view s, NormForm form);

// Per-character full lowercase mapping, as HF's Lowercase normalizer (char::to_lowercase) does (measured table).
std::string to_lower(std::string_view s);

}  // namespace pipit::tok
