// The GPT-2 byte-level alphabet (private header): each byte maps to one printable code point so byte strings can
// live in a string vocabulary. Reference: openai/gpt-2 encoder.py bytes_to_unicode, HF pre_tokenizers/byte_level.rs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace pipit::tok {

struct ByteLevelAlphabet {
  std::array<std::string, 256> utf8;  // byte -> UTF-8 of its code point
  std::array<uint16_t, 256> cp;       // byte -> code point
  int16_t byte_of[512];               // code point (< 512) -> byte, -1 when not in the alphabet
};

inline const ByteLevelAlphabet& byte_level_alphabet() {
  static const ByteLevelAlphabet a = [] {
    ByteLevelAlphabet t{};
    for (auto& b : t.byte_of) b = -1;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint16_t c = printable ? b : static_cast<uint16_t>(256 + n++);
      t.cp[b] = c;
      t.byte_of[c] = static_cast<int16_t>(b);
      std::string s;
      if (c < 0x80) {
        s.push_back(static_cast<char>(c));
      } else {
        s.push_back(static_cast<char>(0xC0 | (c >> 6)));
        s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      }
      t.utf8[b] = s;
    }
    return t;
  }();
  return a;
}

// Maps every byte of `s` to its alphabet character, appending to `out`.
inline void byte_level_encode(std::string_view s, std::string& out) {
  const auto& a = byte_level_alphabet();
  size_t n = out.size();
  out.resize(n + s.size() * 2);  // every alphabet character is 1 or 2 bytes
  char* p = out.data() + n;
  for (unsigned char b : s) {
    const std::string& u = a.utf8[b];
    p[0] = u[0];
    if (u.size() == 2) p[1] = u[1];
    p += u.size();
  }
  out.resize(static_cast<size_t>(p - out.data()));
}

}  // namespace pipit::tok
