// Jinja parser: template source -> syntax tree (jinja_ast.h), with Jinja2's grammar and operator precedence
// (jinja2/parser.py). Statements: if/elif/else, for (tuple targets, `if` filter, else, recursive), set (incl.
// `ns.attr` and block set with filters), macro, call, filter, with, break/continue (the loopcontrols extension),
// raw, and transformers' {% generation %}. Syntax errors name the template line.
#pragma once

#include <cstddef>
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
// The source's size bounds the syntax tree (~0.8 KB per node: a 10 MB template of `{{ 'x' }}` took 8.6 s and
// 930 MB to parse). The largest chat templates on the Hub (tool-calling ones) are tens of KB.
constexpr size_t kMaxTemplateSource = size_t(1) << 20;

Result<std::shared_ptr<const Program>> parse_template(std::string_view source);

}  // namespace pipit::jinja
