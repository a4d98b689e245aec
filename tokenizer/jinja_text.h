// Text helpers for the Jinja interpreter: UTF-8 code points and the Python string rules that chat templates
// observe (str.strip whitespace set, repr() quoting, float repr, json.dumps escaping). Python strings index by code
// point, so slicing and len() here do too; a byte that is not valid UTF-8 counts as one code point of its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pipit::jinja {

// Decodes the code point at s[i] and advances i. Invalid bytes decode as themselves (0x80..0xFF) and advance 1.
char32_t next_cp(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
size_t cp_count(std::string_view s);
// Byte offset of every code point start, plus s.size() at the end (size = cp_count + 1).
std::vector<size_t> cp_offsets(std::string_view s);

// Python's str.isspace() set (also what `\s` matches in Python's re).
bool is_py_space(char32_t cp);
// str.strip()/lstrip()/rstrip(): chars == nullptr strips whitespace, otherwise any code point in *chars.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);  // first code point upper, the rest lower
std::string py_str_title(std::string_view s);   // str.title()
bool py_is_alpha(char32_t cp);
bool py_is_digit(char32_t cp);
bool py_is_printable(char32_t cp);

// Python repr() of a str: '...' or "..." with Python's escapes.
std::string py_repr_string(std::string_view s);
// json.dumps(s) of a str: "..." with JSON escapes; non-ASCII kept unless `ascii` (then \uXXXX, surrogate pairs).
std::string json_quote(std::string_view s, bool ascii = false);
// repr()/str() of a float: shortest round-trip digits, Python's layout ("1.0", "1e-05", "1e+16", "inf", "nan").
std::string py_float_repr(double v);

}  // namespace pipit::jinja
