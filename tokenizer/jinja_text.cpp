// Text helpers for the Jinja interpreter; see jinja_text.h. Case mapping and character classes come from utf8proc
// (simple one-to-one case mappings; Python's few one-to-many mappings such as "ß".upper() == "SS" are not applied).
#include "tokenizer/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include <utf8proc.h>

namespace pipit::jinja {

char32_t next_cp(std::string_view s, size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 1 || len == 0 || i + len > s.size()) {
    ++i;
    return b;
  }
  char32_t cp = b & (0xFF >> (len + 1));
  for (int k = 1; k < len; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) {
      ++i;
      return b;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t cp_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) next_cp(s, i);
  return n;
}

std::vector<size_t> cp_offsets(std::string_view s) {
  std::vector<size_t> off;
  off.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    off.push_back(i);
    next_cp(s, i);
  }
  off.push_back(s.size());
  return off;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars) {
    for (size_t i = 0; i < chars->size();) set.push_back(next_cp(*chars, i));
  }
  auto strip_it = [&](char32_t c) {
    if (!chars) return is_py_space(c);
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  };
  std::vector<size_t> off = cp_offsets(s);
  size_t n = off.size() - 1, b = 0, e = n;
  auto cp_at = [&](size_t k) {
    size_t i = off[k];
    return next_cp(s, i);
  };
  if (left)
    while (b < e && strip_it(cp_at(b))) ++b;
  if (right)
    while (e > b && strip_it(cp_at(e - 1))) --e;
  return std::string(s.substr(off[b], off[e] - off[b]));
}

static std::string map_cps(std::string_view s, char32_t (*f)(char32_t)) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_utf8(out, f(next_cp(s, i)));
  return out;
}
static char32_t cp_upper(char32_t c) { return c < 0x80 ? (c >= 'a' && c <= 'z' ? c - 32 : c) : utf8proc_toupper(c); }
static char32_t cp_lower(char32_t c) { return c < 0x80 ? (c >= 'A' && c <= 'Z' ? c + 32 : c) : utf8proc_tolower(c); }
static char32_t cp_title(char32_t c) { return c < 0x80 ? cp_upper(c) : utf8proc_totitle(c); }
static bool is_cased(char32_t c) {
  auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

std::string py_upper(std::string_view s) { return map_cps(s, cp_upper); }
std::string py_lower(std::string_view s) { return map_cps(s, cp_lower); }

std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < s.size();) {
    char32_t c = next_cp(s, i);
    append_utf8(out, first ? cp_title(c) : cp_lower(c));
    first = false;
  }
  return out;
}

std::string py_str_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t c = next_cp(s, i);
    bool cased = is_cased(c);
    append_utf8(out, cased ? (prev_cased ? cp_lower(c) : cp_title(c)) : c);
    prev_cased = cased;
  }
  return out;
}

bool py_is_alpha(char32_t c) {
  auto cat = utf8proc_category(c);
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}
bool py_is_digit(char32_t c) { return utf8proc_category(c) == UTF8PROC_CATEGORY_ND; }

bool py_is_printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  if (c > 0x10FFFF) return false;
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
      return false;
    default:
      return true;
  }
}

std::string py_repr_string(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos, has_double = s.find('"') != std::string_view::npos;
  char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    char32_t c = next_cp(s, i);
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (py_is_printable(c)) {
      append_utf8(out, c);
    } else {
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out += q;
  return out;
}

std::string json_quote(std::string_view s, bool ascii) {
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    char ch = s[i];
    auto c = static_cast<unsigned char>(ch);
    if (ascii && c >= 0x80) {
      char32_t cp = next_cp(s, i);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      }
      out += buf;
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);  // shortest round-trip digits
  std::string_view sci(buf, r.ptr - buf);
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  int exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
  int decpt = exp10 + 1, nd = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {  // Python's repr switches to exponent notation here
    out += digits[0];
    if (nd > 1) out.append(".").append(digits, 1, std::string::npos);
    std::snprintf(buf, sizeof buf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + buf;
  }
  if (decpt <= 0) {
    out.append("0.").append(static_cast<size_t>(-decpt), '0').append(digits);
  } else if (decpt >= nd) {
    out.append(digits).append(static_cast<size_t>(decpt - nd), '0').append(".0");
  } else {
    out.append(digits, 0, decpt).append(".").append(digits, decpt, std::string::npos);
  }
  return out;
}

}  // namespace pipit::jinja
