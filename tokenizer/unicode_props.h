// Character properties exactly as HF tokenizers' regexes see them (Oniguruma, Unicode 16.0; measured by
// generated/gen_hf_unicode.js). Used to complete PCRE2's own, possibly older, Unicode tables and by the
// hand-written pre-tokenizer matchers.
#pragma once

#include <cstdint>
#include <string_view>

#include "tokenizer/generated/hf_unicode_props.h"

namespace pipit::tok {

enum class CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// \p{L}, \p{N}, \s (Oniguruma's White_Space, which includes U+0085), or none of them.
CharClass char_class(uint32_t cp);

// The property named `name` in \p{name}: "L", "Letter", "Lu", "Uppercase_Letter", "N", "P", "S", "M", "Z", ...
// nullptr when it is not one pipit tracks (PCRE2's own table is used then).
const generated::HfProperty* hf_property(std::string_view name);
// The class of the escape \w, \d or \s (c = 'w', 'd', 's'); nullptr otherwise.
const generated::HfProperty* hf_escape_class(char c);

bool in_property(const generated::HfProperty& p, uint32_t cp);

}  // namespace pipit::tok
