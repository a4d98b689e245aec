// Value-level pieces of JSON Schema -> GBNF (used by json_schema.cpp): integer and number ranges, the string formats
// SDKs emit (zod's email / uuid / datetime / date), and `pattern` regexes. Each returns a GBNF expression; string
// ones are the JSON-encoded text between the quotes (a `"` in the value is `\"` in the answer).
//
// Every grammar here is sound, not always complete: each text it admits is a valid value, but a few valid values
// may be out of reach (a number just above a fractional minimum, an escaped character a negated class allows).
// What cannot be expressed exactly enough is refused by the caller with the keyword's path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace pipit::json_schema {

// Integers are written with at most 16 digits (json-int), so bounds are clamped to +-kMaxInt.
inline constexpr int64_t kMaxInt = 9999999999999999;

// The decimal integers in [lo, hi] (lo <= hi, both within +-kMaxInt): no leading zeros, "-" for negatives.
std::string integer_range(int64_t lo, int64_t hi);

// Numbers x with lo <= x <= hi written without an exponent: the integers of [lo, hi], and decimals "I.ddd" whose
// whole interval (I, I + 1) or (-I - 1, -I) lies in [lo, hi]. Empty when no integer is in range.
std::string number_range(int64_t lo, int64_t hi);

// A string format: "email", "uuid", "date-time", "date", "time", "ipv4"; nullopt for other formats.
std::optional<std::string> format_body(std::string_view format);

// An ECMAScript regex (JSON Schema's `pattern`, unanchored unless it says ^ / $) as the string's body. Refused
// (with what and where): lookaround, backreferences, word boundaries, anchors inside the pattern, \p{...}.
Result<std::string> pattern_body(std::string_view pattern);

}  // namespace pipit::json_schema
