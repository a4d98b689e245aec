// Jinja expression parser (the Parser class is in jinja_parser_impl.h). Precedence, loosest first (as
// jinja2/parser.py): `x if c else y`, or, and, not, comparisons (== != < <= > >= in, not in; chained), + -, ~,
// * / // %, ** (left-associative in Jinja), unary - +, then primaries with postfix `.attr`, `[index/slice]`, `(call)`,
// and filters `|f` / tests `is t`.
#include "tokenizer/jinja_parser_impl.h"

namespace pipit::jinja {

Result<ExprPtr> Parser::parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

Result<ExprPtr> Parser::parse_tuple(bool simplified, bool with_condexpr, std::string_view end_name, bool explicit_parens) {
  int line = cur().line;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) PIPIT_TRY(expect_op(","));
    const Token& t = cur();
    if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || is_op(")") ||
        (!end_name.empty() && t.type == Tok::kName && t.text == end_name))
      break;
    ExprPtr e;
    if (simplified) {
      PIPIT_ASSIGN_OR_RETURN(e, parse_primary());
    } else {
      PIPIT_ASSIGN_OR_RETURN(e, parse_expression(with_condexpr));
    }
    args.push_back(std::move(e));
    if (!is_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parens) return unexpected("an expression");
  }
  ExprPtr tup = node(ExprKind::kTuple, line);
  tup->items = std::move(args);
  return tup;
}

Result<ExprPtr> Parser::parse_condexpr() {
  PIPIT_ASSIGN_OR_RETURN(ExprPtr e, parse_or());
  int added = 0;
  while (is_name("if")) {
    PIPIT_TRY(deeper(added));
    int line = cur().line;
    next();
    ExprPtr c = node(ExprKind::kCond, line);
    PIPIT_ASSIGN_OR_RETURN(c->b, parse_or());
    if (skip_name("else")) {
      PIPIT_ASSIGN_OR_RETURN(c->c, parse_condexpr());
    }
    c->a = std::move(e);
    e = std::move(c);
  }
  chain_depth_ -= added;
  return e;
}

Result<ExprPtr> Parser::parse_or() {
  PIPIT_ASSIGN_OR_RETURN(ExprPtr e, parse_and());
  int added = 0;
  while (is_name("or")) {
    PIPIT_TRY(deeper(added));
    ExprPtr n = node(ExprKind::kOr, cur().line);
    next();
    n->a = std::move(e);
    PIPIT_ASSIGN_OR_RETURN(n->b, parse_and());
    e = std::move(n);
  }
  chain_depth_ -= added;
  return e;
}

Result<ExprPtr> Parser::parse_and() {
  PIPIT_ASSIGN_OR_RETURN(ExprPtr e, parse_not());
  int added = 0;
  while (is_name("and")) {
    PIPIT_TRY(deeper(added));
    ExprPtr n = node(ExprKind::kAnd, cur().line);
    next();
    n->a = std::move(e);
    PIPIT_ASSIGN_OR_RETURN(n->b, parse_not());
    e = std::move(n);
  }
  chain_depth_ -= added;
  return e;
}

Result<ExprPtr> Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(expr_depth_);
    if (expr_depth_ > kMaxExprDepth) return fail(cur(), "expression nested too deeply");
    ExprPtr n = node(ExprKind::kNot, cur().line);
    next();
    PIPIT_ASSIGN_OR_RETURN(n->a, parse_not());
    return n;
  }
  return parse_compare();
}

Result<ExprPtr> Parser::parse_compare() {
  int line = cur().line;
  PIPIT_ASSIGN_OR_RETURN(ExprPtr e, parse_math1());
  ExprPtr cmp;
  while (true) {
    std::string op;
    const Token& t = cur();
    if (t.type == Tok::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" ||
                               t.text == ">=")) {
      op = t.text;
      next();
    } else if (is_name("in")) {
      op = "in";
      next();
    } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
      op = "not in";
      next();
      next();
    } else {
      break;
    }
    if (!cmp) {
      cmp = node(ExprKind::kCompare, line);
      cmp->items.push_back(std::move(e));
    }
    PIPIT_ASSIGN_OR_RETURN(ExprPtr rhs, parse_math1());
    cmp->ops.push_back(op);
    cmp->items.push_back(std::move(rhs));
  }
  return cmp ? std::move(cmp) : std::move(e);
}

Result<ExprPtr> Parser::parse_math1() {
  PIPIT_ASSIGN_OR_RETURN(ExprPtr e, parse_concat());
  int added = 0;
  while (is_op("+") || is_op("-")) {
    PIPIT_TRY(deeper(added));
    ExprPtr n = node(ExprKind::kBinary, cur().line);
    n->name = cur().text;
    next();
    n->a = std::move(e);
    PIPIT_ASSIGN_OR_RETURN(n->b, parse_concat());
    e = std::move(n);
  }
  chain_depth_ -= added;
  return e;
}

Result<ExprPtr> Parser::parse_concat() {
  PIPIT_ASSIGN_OR_RETURN(ExprPtr e, parse_math2());
  if (!is_op("~")) return e;
  ExprPtr n = node(ExprKind::kConcat, cur().line);
  n->items.push_back(std::move(e));
  while (skip_op("~")) {
    PIPIT_ASSIGN_OR_RETURN(ExprPtr rhs, parse_math2());
    n->items.push_back(std::move(rhs));
  }
  return n;
}

Result<ExprPtr> Parser::parse_math2() {
  PIPIT_ASSIGN_OR_RETURN(ExprPtr e, parse_pow());
  int added = 0;
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    PIPIT_TRY(deeper(added));
    ExprPtr n = node(ExprKind::kBinary, cur().line);
    n->name = cur().text;
    next();
    n->a = std::move(e);
    PIPIT_ASSIGN_OR_RETURN(n->b, parse_pow());
    e = std::move(n);
  }
  chain_depth_ -= added;
  return e;
}

Result<ExprPtr> Parser::parse_pow() {
  PIPIT_ASSIGN_OR_RETURN(ExprPtr e, parse_unary(true));
  int added = 0;
  while (is_op("**")) {
    PIPIT_TRY(deeper(added));
    ExprPtr n = node(ExprKind::kBinary, cur().line);
    n->name = "**";
    next();
    n->a = std::move(e);
    PIPIT_ASSIGN_OR_RETURN(n->b, parse_unary(true));
    e = std::move(n);
  }
  chain_depth_ -= added;
  return e;
}

Result<ExprPtr> Parser::parse_unary(bool with_filter) {
  DepthGuard guard(expr_depth_);
  if (expr_depth_ > kMaxExprDepth) return fail(cur(), "expression nested too deeply");
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = node(is_op("-") ? ExprKind::kNeg : ExprKind::kPos, cur().line);
    next();
    PIPIT_ASSIGN_OR_RETURN(e->a, parse_unary(false));
  } else {
    PIPIT_ASSIGN_OR_RETURN(e, parse_primary());
  }
  PIPIT_ASSIGN_OR_RETURN(e, parse_postfix(std::move(e)));
  if (with_filter) {
    PIPIT_ASSIGN_OR_RETURN(e, parse_filter_expr(std::move(e)));
  }
  return e;
}

Result<ExprPtr> Parser::parse_primary() {
  const Token& t = cur();
  int line = t.line;
  if (t.type == Tok::kName) {
    ExprPtr e = node(ExprKind::kConst, line);
    if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
    else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
    else if (t.text == "none" || t.text == "None") e->value = Value::none();
    else {
      e->kind = ExprKind::kName;
      e->name = t.text;
    }
    next();
    return e;
  }
  if (t.type == Tok::kString) {
    std::string s;
    while (cur().type == Tok::kString) {
      s += cur().text;
      next();
    }
    ExprPtr e = node(ExprKind::kConst, line);
    e->value = Value::string(std::move(s));
    return e;
  }
  if (t.type == Tok::kInt || t.type == Tok::kFloat) {
    ExprPtr e = node(ExprKind::kConst, line);
    e->value = t.type == Tok::kInt ? Value::integer(t.ival) : Value::number(t.fval);
    next();
    return e;
  }
  if (is_op("(")) {
    next();
    PIPIT_ASSIGN_OR_RETURN(ExprPtr e, parse_tuple(false, true, "", true));
    PIPIT_TRY(expect_op(")"));
    return e;
  }
  if (is_op("[") || is_op("{")) {
    bool is_list = is_op("[");
    ExprPtr e = node(is_list ? ExprKind::kList : ExprKind::kDict, line);
    next();
    const char* close = is_list ? "]" : "}";
    while (!is_op(close)) {
      if (!e->items.empty()) PIPIT_TRY(expect_op(","));
      if (is_op(close)) break;
      PIPIT_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
      e->items.push_back(std::move(item));
      if (!is_list) {
        PIPIT_TRY(expect_op(":"));
        PIPIT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
        e->items.push_back(std::move(value));
      }
    }
    next();
    return e;
  }
  return fail(t, "unexpected " + describe(t));
}

Result<ExprPtr> Parser::parse_postfix(ExprPtr e) {
  int added = 0;
  while (true) {
    if (is_op(".") || is_op("[") || is_op("(")) PIPIT_TRY(deeper(added));
    if (is_op(".") || is_op("[")) {
      PIPIT_ASSIGN_OR_RETURN(e, parse_subscript(std::move(e)));
    } else if (is_op("(")) {
      ExprPtr call = node(ExprKind::kCall, cur().line);
      call->a = std::move(e);
      PIPIT_TRY(parse_call_args(*call));
      e = std::move(call);
    } else {
      chain_depth_ -= added;
      return e;
    }
  }
}

Result<ExprPtr> Parser::parse_filter_expr(ExprPtr e) {
  int added = 0;
  while (true) {
    if (is_op("|") || is_name("is") || is_op("(")) PIPIT_TRY(deeper(added));
    if (is_op("|")) {
      PIPIT_ASSIGN_OR_RETURN(e, parse_filter(std::move(e), false));
    } else if (is_name("is")) {
      PIPIT_ASSIGN_OR_RETURN(e, parse_test(std::move(e)));
    } else if (is_op("(")) {
      ExprPtr call = node(ExprKind::kCall, cur().line);
      call->a = std::move(e);
      PIPIT_TRY(parse_call_args(*call));
      e = std::move(call);
    } else {
      chain_depth_ -= added;
      return e;
    }
  }
}

Result<ExprPtr> Parser::parse_subscript(ExprPtr e) {
  int line = cur().line;
  if (skip_op(".")) {
    if (cur().type == Tok::kName) {
      ExprPtr n = node(ExprKind::kAttr, line);
      n->name = cur().text;
      n->a = std::move(e);
      next();
      return n;
    }
    if (cur().type == Tok::kInt) {
      ExprPtr n = node(ExprKind::kItem, line);
      n->a = std::move(e);
      n->b = node(ExprKind::kConst, line);
      n->b->value = Value::integer(cur().ival);
      next();
      return n;
    }
    return unexpected("a name or number after '.'");
  }
  next();  // '['
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) PIPIT_TRY(expect_op(","));
    PIPIT_ASSIGN_OR_RETURN(ExprPtr a, parse_subscribed());
    args.push_back(std::move(a));
  }
  next();
  if (args.empty()) return Error::format("line {}: empty subscript", line);
  ExprPtr index;
  if (args.size() == 1) {
    index = std::move(args[0]);
  } else {
    index = node(ExprKind::kTuple, line);
    index->items = std::move(args);
  }
  if (index->kind == ExprKind::kSlice) {
    index->a = std::move(e);
    return index;
  }
  ExprPtr n = node(ExprKind::kItem, line);
  n->a = std::move(e);
  n->b = std::move(index);
  return n;
}

// One subscript: an expression or a slice [start]:[stop][:[step]].
Result<ExprPtr> Parser::parse_subscribed() {
  int line = cur().line;
  ExprPtr first;
  if (!is_op(":")) {
    PIPIT_ASSIGN_OR_RETURN(first, parse_expression());
    if (!is_op(":")) return first;
  }
  next();
  ExprPtr s = node(ExprKind::kSlice, line);
  s->items.push_back(std::move(first));
  auto part = [&]() -> Result<ExprPtr> {
    if (is_op("]") || is_op(",") || is_op(":")) return ExprPtr();
    return parse_expression();
  };
  PIPIT_ASSIGN_OR_RETURN(ExprPtr stop, part());
  s->items.push_back(std::move(stop));
  ExprPtr step;
  if (skip_op(":")) {
    PIPIT_ASSIGN_OR_RETURN(step, part());
  }
  s->items.push_back(std::move(step));
  return s;
}

Status Parser::parse_call_args(Expr& call) {
  PIPIT_TRY(expect_op("("));
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      PIPIT_TRY(expect_op(","));
      if (is_op(")")) break;
    }
    first = false;
    if (skip_op("*")) {
      PIPIT_ASSIGN_OR_RETURN(call.star_args, parse_expression());
    } else if (skip_op("**")) {
      PIPIT_ASSIGN_OR_RETURN(call.star_kwargs, parse_expression());
    } else if (cur().type == Tok::kName && is_op(peek(), "=")) {
      std::string key = cur().text;
      next();
      next();
      PIPIT_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
      call.kwargs.emplace_back(std::move(key), std::move(v));
    } else {
      PIPIT_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
      call.items.push_back(std::move(v));
    }
  }
  next();
  return Status::ok();
}

Result<ExprPtr> Parser::parse_filter(ExprPtr e, bool start_inline) {
  int added = 0;
  while (is_op("|") || start_inline) {
    PIPIT_TRY(deeper(added));
    if (!start_inline) next();
    start_inline = false;
    ExprPtr f = node(ExprKind::kFilter, cur().line);
    PIPIT_ASSIGN_OR_RETURN(f->name, expect_name());
    while (skip_op(".")) {
      PIPIT_ASSIGN_OR_RETURN(std::string part, expect_name());
      f->name += "." + part;
    }
    if (is_op("(")) PIPIT_TRY(parse_call_args(*f));
    f->a = std::move(e);
    e = std::move(f);
  }
  chain_depth_ -= added;
  return e;
}

Result<ExprPtr> Parser::parse_test(ExprPtr e) {
  ExprPtr t = node(ExprKind::kTest, cur().line);
  next();  // 'is'
  t->negated = skip_name("not");
  PIPIT_ASSIGN_OR_RETURN(t->name, expect_name());
  while (skip_op(".")) {
    PIPIT_ASSIGN_OR_RETURN(std::string part, expect_name());
    t->name += "." + part;
  }
  const Token& c = cur();
  if (is_op("(")) {
    PIPIT_TRY(parse_call_args(*t));
  } else if ((c.type == Tok::kName || c.type == Tok::kString || c.type == Tok::kInt || c.type == Tok::kFloat ||
              is_op("[") || is_op("{")) &&
             !(c.type == Tok::kName && (c.text == "else" || c.text == "or" || c.text == "and"))) {
    if (is_name("is")) return fail(c, "You cannot chain multiple tests with is");
    PIPIT_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
    PIPIT_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
    t->items.push_back(std::move(arg));
  }
  t->a = std::move(e);
  return t;
}

}  // namespace pipit::jinja
