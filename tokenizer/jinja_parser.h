// Jinja parser: template source -> syntax tree (jinja_ast.h), with Jinja2's grammar and operator precedence
// (jinja2/parser.py). Statements: if/elif/else, for (tuple targets, `if` filter, else, recursive), set (incl.
// `ns.attr` and block set with filters), macro, call, filter, with, break/continue (the loopcontrols extension),
// raw, and transformers' {% generation %}. Syntax errors name the template line.
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "tokenizer/jinja_ast.h"

namespace pipit::jinja {

// Nesting limits keep hostile templates from exhausting the stack (each parenthesis level costs the parser ~4 KB of
// stack; a render needs well under 512 KB in all). Real chat templates stay far below them.
constexpr int kMaxExprDepth = 48;    // nested (...), [...], {...}, not, unary -, x if c else ...
constexpr int kMaxChainDepth = 200;  // plus links of left-nested chains (a + b + c, a.b.c, x|f|g) along one path
constexpr int kMaxBlockDepth = 64;   // nested {% if %} / {% for %} / ... blocks

Result<std::shared_ptr<const Program>> parse_template(std::string_view source);

}  // namespace pipit::jinja
