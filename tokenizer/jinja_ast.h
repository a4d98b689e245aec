// Syntax tree of a parsed Jinja template. Built once by the parser, then only read (a template is rendered by many
// threads at once), so nodes hold no render state. Every node keeps its template line for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace pipit::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  kConst,    // value
  kName,     // name
  kList,     // items
  kTuple,    // items
  kDict,     // items: key, value, key, value, ...
  kAttr,     // a.name
  kItem,     // a[b]
  kSlice,    // a[b:c:d] with items = {b, c, d}, null where omitted
  kCall,     // a(items..., kwargs..., *star_args, **star_kwargs)
  kFilter,   // a | name(items..., kwargs...); a is null inside {% filter %} / {% set x | f %}
  kTest,     // a is [not] name(items...)
  kNeg,      // -a
  kPos,      // +a
  kNot,      // not a
  kAnd,      // a and b
  kOr,       // a or b
  kBinary,   // a name b, name in + - * / // % **
  kConcat,   // items[0] ~ items[1] ~ ...
  kCompare,  // items[0] ops[0] items[1] ops[1] ... (chained like Python)
  kCond,     // a if b else c (c null: undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr star_args, star_kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

// Assignment target: a name, `ns.attr`, or a (nested) tuple of targets.
struct Target {
  std::string name;
  std::string attr;              // set for `ns.attr`
  std::vector<Target> elements;  // non-empty for tuple unpacking
  bool is_tuple = false;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind : uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches: (cond, body)...; a null cond is the else branch
  kFor,          // for target in expr [if cond] [recursive]: body [else: else_body]
  kSet,          // set target = expr
  kSetBlock,     // set target [| filters] %} body {% endset
  kMacro,        // macro name(params) body
  kCallBlock,    // {% call(params) expr %} body: `caller` inside the called macro renders body
  kFilterBlock,  // {% filter f %} body
  kWith,         // {% with a = x, ... %} body
  kBreak,
  kContinue,
  kScope,        // body rendered as is ({% generation %}, transformers' assistant-mask tag)
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, cond;
  Target target;
  bool recursive = false;
  Body body, else_body;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro / call-block parameters with defaults; with-assignments
  std::vector<ExprPtr> filters;                          // kSetBlock / kFilterBlock filter chain (kFilter, a == null)
};

struct Program {
  Body body;
};

}  // namespace pipit::jinja
