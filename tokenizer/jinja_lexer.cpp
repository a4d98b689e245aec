// Jinja lexer; see jinja_lexer.h. Mirrors the regex rules of Jinja2's lexer (jinja2/lexer.py) by hand: the text
// before each tag, the end-of-tag forms ("-%}" eats following whitespace, "%}" eats one newline with trim_blocks),
// and the token shapes (floats with `_` separators and exponents, 0x/0o/0b integers, quoted strings with Python's
// unicode-escape rules).
#include "tokenizer/jinja_lexer.h"

#include <charconv>

#include "tokenizer/jinja_text.h"

namespace pipit::jinja {

namespace {

bool starts_with(std::string_view s, size_t pos, std::string_view p) { return s.substr(pos, p.size()) == p; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Skips Python whitespace (`\s*`) from pos; returns the new position.
size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t i = pos;
    if (!is_py_space(next_cp(s, i))) break;
    pos = i;
  }
  return pos;
}

bool all_space(std::string_view s) {
  size_t end = skip_space(s, 0);
  return !s.empty() && end == s.size();
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}
  Result<std::vector<Token>> run();

 private:
  Status error(std::string_view msg) { return Error::format("line {}: {}", line_, msg); }
  void emit(Tok t, std::string text = {}) { out_.push_back(Token{t, line_, std::move(text)}); }
  void emit_text(std::string_view text, char sign, bool is_variable);
  Status lex_comment();
  Status lex_raw(size_t body_start);
  Status lex_tag(bool block);
  bool lex_number();
  Status lex_string();

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the previous tag end consumed a newline (Jinja2's `line_starting`)
  std::vector<Token> out_;
};

// Text before a tag, with `-` (strip all trailing whitespace) or lstrip_blocks applied.
void Lexer::emit_text(std::string_view text, char sign, bool is_variable) {
  std::string t(text);
  if (sign == '-') {
    t = py_strip(t, nullptr, false, true);
  } else if (sign != '+' && !is_variable) {
    size_t nl = t.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting_) && all_space(std::string_view(t).substr(l_pos))) t.resize(l_pos);
  }
  if (!t.empty()) emit(Tok::kText, std::move(t));
  line_ += count_newlines(text);
}

Result<std::vector<Token>> Lexer::run() {
  std::string_view s = src_;
  while (pos_ < s.size()) {
    size_t t = pos_;
    while ((t = s.find('{', t)) != std::string_view::npos) {
      if (t + 1 < s.size() && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#')) break;
      ++t;
    }
    if (t == std::string_view::npos) {
      emit(Tok::kText, std::string(s.substr(pos_)));
      break;
    }
    char kind = s[t + 1];
    size_t after = t + 2;
    char sign = 0;
    if (after < s.size() && (s[after] == '-' || s[after] == '+')) sign = s[after++];
    std::string_view text = s.substr(pos_, t - pos_);

    if (kind == '%') {  // {% raw %} ... {% endraw %}: everything between is text
      size_t p = skip_space(s, after);
      if (starts_with(s, p, "raw")) {
        size_t q = skip_space(s, p + 3);
        size_t body = std::string_view::npos;
        if (starts_with(s, q, "-%}")) body = skip_space(s, q + 3);
        else if (starts_with(s, q, "%}")) body = q + 2;
        if (body != std::string_view::npos) {
          emit_text(text, sign, false);
          line_ += count_newlines(s.substr(t, body - t));
          line_starting_ = s[body - 1] == '\n';
          PIPIT_TRY(lex_raw(body));
          continue;
        }
      }
    }
    emit_text(text, sign, kind == '{');
    pos_ = after;
    if (kind == '#') {
      PIPIT_TRY(lex_comment());
    } else {
      emit(kind == '%' ? Tok::kBlockBegin : Tok::kVarBegin);
      PIPIT_TRY(lex_tag(kind == '%'));
    }
  }
  emit(Tok::kEof);
  return std::move(out_);
}

Status Lexer::lex_comment() {
  std::string_view s = src_;
  for (size_t p = pos_; p < s.size(); ++p) {
    size_t end = 0;
    if (starts_with(s, p, "+#}")) end = p + 3;
    else if (starts_with(s, p, "-#}")) end = skip_space(s, p + 3);
    else if (starts_with(s, p, "#}")) end = p + 2 + (p + 2 < s.size() && s[p + 2] == '\n');
    if (end) {
      line_ += count_newlines(s.substr(pos_, end - pos_));
      line_starting_ = s[end - 1] == '\n';
      pos_ = end;
      return Status::ok();
    }
  }
  return error("missing end of comment tag");
}

Status Lexer::lex_raw(size_t body) {
  std::string_view s = src_;
  for (size_t p = body; p < s.size(); ++p) {
    if (!starts_with(s, p, "{%")) continue;
    size_t q = p + 2;
    char sign = 0;
    if (q < s.size() && (s[q] == '-' || s[q] == '+')) sign = s[q++];
    q = skip_space(s, q);
    if (!starts_with(s, q, "endraw")) continue;
    q = skip_space(s, q + 6);
    size_t end = 0;
    if (starts_with(s, q, "+%}")) end = q + 3;
    else if (starts_with(s, q, "-%}")) end = skip_space(s, q + 3);
    else if (starts_with(s, q, "%}")) end = q + 2 + (q + 2 < s.size() && s[q + 2] == '\n');
    if (!end) continue;
    emit_text(s.substr(body, p - body), sign, false);
    line_ += count_newlines(s.substr(p, end - p));
    line_starting_ = s[end - 1] == '\n';
    pos_ = end;
    return Status::ok();
  }
  return error("missing end of raw directive");
}

Status Lexer::lex_tag(bool block) {
  std::string_view s = src_;
  std::string balance;
  while (true) {
    size_t p = skip_space(s, pos_);
    line_ += count_newlines(s.substr(pos_, p - pos_));
    pos_ = p;
    if (pos_ >= s.size()) return error(block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
    if (balance.empty()) {
      size_t end = 0;
      if (block) {
        if (starts_with(s, pos_, "+%}")) end = pos_ + 3;
        else if (starts_with(s, pos_, "-%}")) end = skip_space(s, pos_ + 3);
        else if (starts_with(s, pos_, "%}")) end = pos_ + 2 + (pos_ + 2 < s.size() && s[pos_ + 2] == '\n');
      } else {
        if (starts_with(s, pos_, "-}}")) end = skip_space(s, pos_ + 3);
        else if (starts_with(s, pos_, "}}")) end = pos_ + 2;
      }
      if (end) {
        emit(block ? Tok::kBlockEnd : Tok::kVarEnd);
        line_ += count_newlines(s.substr(pos_, end - pos_));
        line_starting_ = s[end - 1] == '\n';
        pos_ = end;
        return Status::ok();
      }
    }
    char c = s[pos_];
    if (is_digit(c)) {
      if (!lex_number()) return error("integer literal too large");
      continue;
    }
    if (is_name_start(c)) {
      size_t e = pos_;
      while (e < s.size() && is_name_char(s[e])) ++e;
      emit(Tok::kName, std::string(s.substr(pos_, e - pos_)));
      pos_ = e;
      continue;
    }
    if (c == '\'' || c == '"') {
      PIPIT_TRY(lex_string());
      continue;
    }
    static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")",
                                 "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
    std::string op;
    for (const char* o : kOps) {
      if (starts_with(s, pos_, o)) {
        op = o;
        break;
      }
    }
    if (op.empty()) {
      size_t i = pos_;
      std::string ch;
      append_utf8(ch, next_cp(s, i));
      return error("unexpected char '" + ch + "'");
    }
    if (op == "(" || op == "[" || op == "{") {
      balance += op == "(" ? ')' : op == "[" ? ']' : '}';
    } else if (op == ")" || op == "]" || op == "}") {
      if (balance.empty()) return error("unexpected '" + op + "'");
      if (balance.back() != op[0]) return error("unexpected '" + op + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    emit(Tok::kOp, op);
    pos_ += op.size();
  }
}

// Digits with optional single `_` separators between them: `\d+(_\d+)*`. Returns the end, or `p` if none.
size_t scan_digits(std::string_view s, size_t p) {
  size_t e = p;
  while (e < s.size() && is_digit(s[e])) ++e;
  if (e == p) return p;
  while (e + 1 < s.size() && s[e] == '_' && is_digit(s[e + 1])) {
    ++e;
    while (e < s.size() && is_digit(s[e])) ++e;
  }
  return e;
}

std::string without_underscores(std::string_view s) {
  std::string r;
  for (char c : s)
    if (c != '_') r += c;
  return r;
}

bool Lexer::lex_number() {
  std::string_view s = src_;
  size_t p = pos_;
  bool after_dot = p > 0 && s[p - 1] == '.';
  size_t int_end = scan_digits(s, p);
  // float: D ((.D)? e[+-]?D | .D), not directly after a '.'
  if (!after_dot) {
    size_t e = 0, frac = int_end;
    if (frac < s.size() && s[frac] == '.') {
      size_t f = scan_digits(s, frac + 1);
      frac = f > frac + 1 ? f : int_end;
    }
    auto exp_at = [&](size_t q) -> size_t {
      if (q < s.size() && (s[q] == 'e' || s[q] == 'E')) {
        size_t r = q + 1;
        if (r < s.size() && (s[r] == '+' || s[r] == '-')) ++r;
        size_t d = scan_digits(s, r);
        if (d > r) return d;
      }
      return 0;
    };
    e = exp_at(frac);
    if (!e && frac != int_end) e = exp_at(int_end);
    if (!e && frac != int_end) e = frac;
    if (e) {
      std::string num = without_underscores(s.substr(p, e - p));
      double v = 0;
      std::from_chars(num.data(), num.data() + num.size(), v);
      out_.push_back(Token{Tok::kFloat, line_, num, 0, v});
      pos_ = e;
      return true;
    }
  }
  // integer: 0x.. 0o.. 0b.. or decimal
  int base = 10;
  size_t digits_start = p, e = int_end;
  if (s[p] == '0' && p + 1 < s.size() && (s[p + 1] == 'x' || s[p + 1] == 'X' || s[p + 1] == 'o' || s[p + 1] == 'O' ||
                                          s[p + 1] == 'b' || s[p + 1] == 'B')) {
    char k = s[p + 1] | 0x20;
    base = k == 'x' ? 16 : k == 'o' ? 8 : 2;
    auto ok = [&](char c) {
      c = static_cast<char>(c | 0x20);
      return base == 16 ? (is_digit(c) || (c >= 'a' && c <= 'f')) : base == 8 ? (c >= '0' && c <= '7') : (c == '0' || c == '1');
    };
    size_t q = p + 2;
    while (q < s.size() && (ok(s[q]) || (s[q] == '_' && q + 1 < s.size() && ok(s[q + 1])))) ++q;
    if (q > p + 2) {
      digits_start = p + 2;
      e = q;
    } else {
      base = 10;
    }
  } else if (s[p] == '0') {  // "0", "00", "0_0": a leading zero only continues with zeros
    e = p + 1;
    while (e < s.size() && (s[e] == '0' || (s[e] == '_' && e + 1 < s.size() && s[e + 1] == '0'))) ++e;
  }
  std::string digits = without_underscores(s.substr(digits_start, e - digits_start));
  int64_t v = 0;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (r.ec != std::errc()) return false;
  out_.push_back(Token{Tok::kInt, line_, std::string(s.substr(p, e - p)), v, 0});
  pos_ = e;
  return true;
}

Status Lexer::lex_string() {
  std::string_view s = src_;
  char q = s[pos_];
  size_t p = pos_ + 1;
  while (p < s.size() && s[p] != q) p += s[p] == '\\' ? 2 : 1;
  if (p >= s.size()) return error(std::string("unexpected char '") + q + "'");
  std::string_view body = s.substr(pos_ + 1, p - pos_ - 1);
  std::string v;
  // Python "unicode-escape" decoding, as Jinja2 applies to string literals.
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      v += c;
      continue;
    }
    char e = body[++i];
    auto hex = [&](int n) -> int64_t {
      int64_t x = 0;
      for (int k = 1; k <= n; ++k) {
        if (i + k >= body.size()) return -1;
        char h = static_cast<char>(body[i + k] | 0x20);
        if (!is_digit(h) && !(h >= 'a' && h <= 'f')) return -1;
        x = x * 16 + (is_digit(h) ? h - '0' : h - 'a' + 10);
      }
      i += n;
      return x;
    };
    switch (e) {
      case '\n': break;
      case '\\': v += '\\'; break;
      case '\'': v += '\''; break;
      case '"': v += '"'; break;
      case 'a': v += '\a'; break;
      case 'b': v += '\b'; break;
      case 'f': v += '\f'; break;
      case 'n': v += '\n'; break;
      case 'r': v += '\r'; break;
      case 't': v += '\t'; break;
      case 'v': v += '\v'; break;
      case 'x': case 'u': case 'U': {
        int64_t cp = hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
        if (cp < 0 || cp > 0x10FFFF) return error(std::string("truncated or invalid \\") + e + " escape in string literal");
        append_utf8(v, static_cast<char32_t>(cp));
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int cp = e - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) cp = cp * 8 + (body[++i] - '0');
          append_utf8(v, static_cast<char32_t>(cp));
        } else {
          v += '\\';
          v += e;
        }
    }
  }
  out_.push_back(Token{Tok::kString, line_, std::move(v)});
  line_ += count_newlines(s.substr(pos_, p + 1 - pos_));
  pos_ = p + 1;
  return Status::ok();
}

}  // namespace

Result<std::vector<Token>> lex(std::string_view source) {
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {  // newlines -> "\n" (Jinja2 splits on \r\n, \r, \n)
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();  // keep_trailing_newline=False
  return Lexer(std::move(src)).run();
}

}  // namespace pipit::jinja
