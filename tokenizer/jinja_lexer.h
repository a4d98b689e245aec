// Jinja lexer: splits a template into text and the tokens inside {{ }}, {% %} (comments dropped), applying
// whitespace control exactly as Jinja2's lexer does with transformers' settings: trim_blocks (drop the first newline
// after a block or comment tag), lstrip_blocks (drop spaces/tabs from the line start up to a block or comment tag),
// `-` on either side of a tag (strip all whitespace on that side), `+` (disable lstrip/trim there), newlines
// normalized to "\n" and a single trailing newline of the template dropped (keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace pipit::jinja {

enum class Tok : uint8_t {
  kText,        // literal template text (already whitespace-controlled)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // text holds the decoded value
  kInt,
  kFloat,
  kOp,          // text holds the operator: + - * / // % ** ~ ( ) [ ] { } . , : | = == != < <= > >= ;
  kEof,
};

struct Token {
  Tok type;
  int line;
  std::string text;
  int64_t ival = 0;
  double fval = 0;
};

// Syntax errors name the line: "line 3: unexpected char '$'".
Result<std::vector<Token>> lex(std::string_view source);

}  // namespace pipit::jinja
