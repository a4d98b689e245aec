// Where a text stops being UTF-8, for files that are stored or parsed as JSON strings (tokenizer.json, chat
// templates): nlohmann throws when it writes a string that is not UTF-8, so such a file is refused when read, with
// the byte named, rather than failing deep inside a conversion.
#pragma once

#include <cstddef>
#include <string_view>

namespace pipit {

// The offset of the first byte that does not belong to well-formed UTF-8 (RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF), or npos when the whole text is valid.
inline size_t utf8_error_offset(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) n = 0;
    else if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return i;
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return i;
      const unsigned b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += n + 1;
  }
  return std::string_view::npos;
}

}  // namespace pipit
