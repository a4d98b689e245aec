// Jinja parser; see jinja_parser.h. Precedence, loosest first (as jinja2/parser.py): `x if c else y`, or, and,
// not, comparisons (== != < <= > >= in, not in; chained), + -, ~, * / // %, ** (left-associative in Jinja),
// unary - +, then primaries with postfix `.attr`, `[index/slice]`, `(call)`, and filters `|f` / tests `is t`.
#include "tokenizer/jinja_parser.h"

#include <algorithm>

#include "tokenizer/jinja_lexer.h"

namespace pipit::jinja {

namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}
  Result<Body> parse_all();

 private:
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& depth) : d(++depth) {}
    ~DepthGuard() { --d; }
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  void next() { if (i_ + 1 < t_.size()) ++i_; }
  bool is_op(const Token& t, std::string_view op) const { return t.type == Tok::kOp && t.text == op; }
  bool is_op(std::string_view op) const { return is_op(cur(), op); }
  bool is_name(std::string_view n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skip_op(std::string_view op) { return is_op(op) ? (next(), true) : false; }
  bool skip_name(std::string_view n) { return is_name(n) ? (next(), true) : false; }
  static std::string describe(const Token& t);
  Status fail(const Token& t, std::string_view msg) const { return Error::format("line {}: {}", t.line, msg); }
  Status unexpected(std::string_view expected) const {
    return fail(cur(), "expected " + std::string(expected) + ", got " + describe(cur()));
  }
  Status expect_op(std::string_view op) {
    if (!skip_op(op)) return unexpected("'" + std::string(op) + "'");
    return Status::ok();
  }
  Status expect(Tok type, std::string_view what) {
    if (cur().type != type) return unexpected(what);
    next();
    return Status::ok();
  }
  Result<std::string> expect_name() {
    if (cur().type != Tok::kName) return unexpected("a name");
    std::string n = cur().text;
    next();
    return n;
  }
  // Left-nested chains (a + b + c, a.b.c, x|f|g) deepen the tree by one per link: count them against the same
  // limit as parentheses, so evaluating and freeing the tree never recurses too deeply.
  Status deeper(int& added) {
    ++chain_depth_;
    ++added;
    if (chain_depth_ > kMaxChainDepth) return fail(cur(), "expression chained too deeply");
    return Status::ok();
  }
  ExprPtr node(ExprKind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // statements
  Result<Body> parse_body(const std::vector<std::string>& end_tags, int open_line, std::string_view open_tag);
  Result<Body> parse_block_body(const std::vector<std::string>& end_tags, int open_line, std::string_view open_tag,
                                bool drop_end);
  Result<std::unique_ptr<Stmt>> parse_statement();
  Status parse_for(Stmt& s);
  Status parse_if(Stmt& s);
  Status parse_set(Stmt& s);
  Status parse_macro(Stmt& s);
  Status parse_signature(Stmt& s);
  Status parse_with(Stmt& s);
  Result<Target> parse_target(bool with_tuple, bool with_namespace, std::string_view end_name);
  Result<Target> to_target(const Expr& e);

  // expressions
  Result<ExprPtr> parse_expression(bool with_condexpr = true);
  Result<ExprPtr> parse_tuple(bool simplified, bool with_condexpr, std::string_view end_name, bool explicit_parens);
  Result<ExprPtr> parse_condexpr();
  Result<ExprPtr> parse_or();
  Result<ExprPtr> parse_and();
  Result<ExprPtr> parse_not();
  Result<ExprPtr> parse_compare();
  Result<ExprPtr> parse_math1();
  Result<ExprPtr> parse_concat();
  Result<ExprPtr> parse_math2();
  Result<ExprPtr> parse_pow();
  Result<ExprPtr> parse_unary(bool with_filter);
  Result<ExprPtr> parse_primary();
  Result<ExprPtr> parse_postfix(ExprPtr e);
  Result<ExprPtr> parse_filter_expr(ExprPtr e);
  Result<ExprPtr> parse_filter(ExprPtr e, bool start_inline);
  Result<ExprPtr> parse_test(ExprPtr e);
  Result<ExprPtr> parse_subscript(ExprPtr e);
  Result<ExprPtr> parse_subscribed();
  Status parse_call_args(Expr& call);

  std::vector<Token> t_;
  size_t i_ = 0;
  int expr_depth_ = 0, chain_depth_ = 0, block_depth_ = 0, loop_depth_ = 0;
};

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case Tok::kText: return "template text";
    case Tok::kVarBegin: return "'{{'";
    case Tok::kVarEnd: return "end of print statement '}}'";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "end of statement block '%}'";
    case Tok::kString: return "string";
    case Tok::kInt: case Tok::kFloat: return "number " + t.text;
    case Tok::kEof: return "end of template";
    default: return "'" + t.text + "'";
  }
}

Result<Body> Parser::parse_all() {
  PIPIT_ASSIGN_OR_RETURN(Body body, parse_body({}, 0, ""));
  if (cur().type != Tok::kEof) return fail(cur(), "unexpected '" + cur().text + "'");
  return body;
}

// Parses statements until `{% <one of end_tags>` (left with the cursor on that tag's name) or the end.
Result<Body> Parser::parse_body(const std::vector<std::string>& end_tags, int open_line, std::string_view open_tag) {
  DepthGuard guard(block_depth_);
  if (block_depth_ > kMaxBlockDepth) return fail(cur(), "blocks nested too deeply");
  static const char* kEndTags[] = {"endfor", "endif", "elif", "else", "endset", "endmacro", "endcall", "endfilter",
                                   "endwith", "endgeneration", "endraw", "endblock"};
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == Tok::kEof) {
      if (end_tags.empty()) return body;
      std::string want;
      for (auto& e : end_tags) want += (want.empty() ? "'" : " or '") + e + "'";
      return fail(t, "unexpected end of template, expected " + want + " to close the '" + std::string(open_tag) +
                         "' block opened on line " + std::to_string(open_line));
    }
    if (t.type == Tok::kText) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kText;
      s->line = t.line;
      s->text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.type == Tok::kVarBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->line = t.line;
      next();
      PIPIT_ASSIGN_OR_RETURN(s->expr, parse_tuple(false, true, "", false));
      PIPIT_TRY(expect(Tok::kVarEnd, "'}}'"));
      body.push_back(std::move(s));
    } else if (t.type == Tok::kBlockBegin) {
      next();
      if (cur().type == Tok::kName && std::find(end_tags.begin(), end_tags.end(), cur().text) != end_tags.end())
        return body;
      if (cur().type == Tok::kName &&
          std::find(std::begin(kEndTags), std::end(kEndTags), cur().text) != std::end(kEndTags))
        return fail(cur(), "unexpected '" + cur().text + "'" +
                               (open_tag.empty() ? std::string() : " inside the '" + std::string(open_tag) +
                                                                       "' block opened on line " + std::to_string(open_line)));
      PIPIT_ASSIGN_OR_RETURN(auto s, parse_statement());
      PIPIT_TRY(expect(Tok::kBlockEnd, "'%}'"));
      body.push_back(std::move(s));
    } else {
      return fail(t, "unexpected " + describe(t));
    }
  }
}

// After a block's opening tag: expects its `%}`, parses the body up to an end tag; `drop_end` skips the end tag name.
Result<Body> Parser::parse_block_body(const std::vector<std::string>& end_tags, int open_line, std::string_view open_tag,
                                      bool drop_end) {
  PIPIT_TRY(expect(Tok::kBlockEnd, "'%}'"));
  PIPIT_ASSIGN_OR_RETURN(Body body, parse_body(end_tags, open_line, open_tag));
  if (drop_end) next();
  return body;
}

Result<std::unique_ptr<Stmt>> Parser::parse_statement() {
  auto s = std::make_unique<Stmt>();
  s->line = cur().line;
  if (cur().type != Tok::kName) return fail(cur(), "expected a tag name, got " + describe(cur()));
  std::string tag = cur().text;
  next();
  if (tag == "for") {
    s->kind = StmtKind::kFor;
    PIPIT_TRY(parse_for(*s));
  } else if (tag == "if") {
    s->kind = StmtKind::kIf;
    PIPIT_TRY(parse_if(*s));
  } else if (tag == "set") {
    PIPIT_TRY(parse_set(*s));
  } else if (tag == "macro") {
    s->kind = StmtKind::kMacro;
    PIPIT_TRY(parse_macro(*s));
  } else if (tag == "call") {
    s->kind = StmtKind::kCallBlock;
    if (is_op("(")) PIPIT_TRY(parse_signature(*s));
    PIPIT_ASSIGN_OR_RETURN(s->expr, parse_expression());
    if (s->expr->kind != ExprKind::kCall) return fail(cur(), "expected a call after 'call'");
    int saved = loop_depth_;
    loop_depth_ = 0;
    PIPIT_ASSIGN_OR_RETURN(s->body, parse_block_body({"endcall"}, s->line, "call", true));
    loop_depth_ = saved;
  } else if (tag == "filter") {
    s->kind = StmtKind::kFilterBlock;
    PIPIT_ASSIGN_OR_RETURN(ExprPtr f, parse_filter(nullptr, true));
    // Unchain: the filters were built nested (last applied outermost); store them in application order.
    std::vector<ExprPtr> chain;
    while (f) {
      ExprPtr inner = std::move(f->a);
      chain.push_back(std::move(f));
      f = std::move(inner);
    }
    std::reverse(chain.begin(), chain.end());
    s->filters = std::move(chain);
    PIPIT_ASSIGN_OR_RETURN(s->body, parse_block_body({"endfilter"}, s->line, "filter", true));
  } else if (tag == "with") {
    s->kind = StmtKind::kWith;
    PIPIT_TRY(parse_with(*s));
  } else if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) return fail(t_[i_ - 1], "'" + tag + "' outside of a loop");
    s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
  } else if (tag == "generation") {
    s->kind = StmtKind::kScope;
    PIPIT_ASSIGN_OR_RETURN(s->body, parse_block_body({"endgeneration"}, s->line, "generation", true));
  } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" || tag == "block") {
    return fail(t_[i_ - 1], "'" + tag + "' is not supported in chat templates");
  } else {
    return fail(t_[i_ - 1], "unknown tag '" + tag + "'");
  }
  return s;
}

Status Parser::parse_for(Stmt& s) {
  PIPIT_ASSIGN_OR_RETURN(s.target, parse_target(true, false, "in"));
  if (!skip_name("in")) return unexpected("'in'");
  PIPIT_ASSIGN_OR_RETURN(s.expr, parse_tuple(false, false, "recursive", false));
  if (skip_name("if")) {
    PIPIT_ASSIGN_OR_RETURN(s.cond, parse_expression());
  }
  s.recursive = skip_name("recursive");
  ++loop_depth_;
  PIPIT_ASSIGN_OR_RETURN(s.body, parse_block_body({"endfor", "else"}, s.line, "for", false));
  --loop_depth_;
  bool has_else = cur().text == "else";
  next();
  if (has_else) {
    PIPIT_ASSIGN_OR_RETURN(s.else_body, parse_block_body({"endfor"}, s.line, "for", true));
  }
  return Status::ok();
}

Status Parser::parse_if(Stmt& s) {
  PIPIT_ASSIGN_OR_RETURN(ExprPtr cond, parse_tuple(false, false, "", false));
  while (true) {
    PIPIT_ASSIGN_OR_RETURN(Body body, parse_block_body({"elif", "else", "endif"}, s.line, "if", false));
    s.branches.emplace_back(std::move(cond), std::move(body));
    std::string tag = cur().text;
    next();
    if (tag == "elif") {
      PIPIT_ASSIGN_OR_RETURN(cond, parse_tuple(false, false, "", false));
    } else if (tag == "else") {
      PIPIT_ASSIGN_OR_RETURN(Body else_body, parse_block_body({"endif"}, s.line, "if", true));
      s.branches.emplace_back(nullptr, std::move(else_body));
      return Status::ok();
    } else {
      return Status::ok();
    }
  }
}

Status Parser::parse_set(Stmt& s) {
  PIPIT_ASSIGN_OR_RETURN(s.target, parse_target(true, true, ""));
  if (skip_op("=")) {
    s.kind = StmtKind::kSet;
    PIPIT_ASSIGN_OR_RETURN(s.expr, parse_tuple(false, true, "", false));
    return Status::ok();
  }
  s.kind = StmtKind::kSetBlock;
  if (is_op("|")) {
    PIPIT_ASSIGN_OR_RETURN(ExprPtr f, parse_filter(nullptr, false));
    std::vector<ExprPtr> chain;
    while (f) {
      ExprPtr inner = std::move(f->a);
      chain.push_back(std::move(f));
      f = std::move(inner);
    }
    std::reverse(chain.begin(), chain.end());
    s.filters = std::move(chain);
  }
  PIPIT_ASSIGN_OR_RETURN(s.body, parse_block_body({"endset"}, s.line, "set", true));
  return Status::ok();
}

Status Parser::parse_signature(Stmt& s) {
  PIPIT_TRY(expect_op("("));
  bool defaults = false;
  while (!is_op(")")) {
    if (!s.params.empty()) PIPIT_TRY(expect_op(","));
    if (is_op(")")) break;
    PIPIT_ASSIGN_OR_RETURN(std::string name, expect_name());
    ExprPtr def;
    if (skip_op("=")) {
      PIPIT_ASSIGN_OR_RETURN(def, parse_expression());
      defaults = true;
    } else if (defaults) {
      return fail(cur(), "non-default argument follows default argument");
    }
    s.params.emplace_back(std::move(name), std::move(def));
  }
  return expect_op(")");
}

Status Parser::parse_macro(Stmt& s) {
  PIPIT_ASSIGN_OR_RETURN(s.name, expect_name());
  PIPIT_TRY(parse_signature(s));
  int saved = loop_depth_;
  loop_depth_ = 0;
  PIPIT_ASSIGN_OR_RETURN(s.body, parse_block_body({"endmacro"}, s.line, "macro", true));
  loop_depth_ = saved;
  return Status::ok();
}

Status Parser::parse_with(Stmt& s) {
  while (cur().type != Tok::kBlockEnd) {
    if (!s.params.empty()) PIPIT_TRY(expect_op(","));
    PIPIT_ASSIGN_OR_RETURN(std::string name, expect_name());
    PIPIT_TRY(expect_op("="));
    PIPIT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    s.params.emplace_back(std::move(name), std::move(value));
  }
  PIPIT_ASSIGN_OR_RETURN(s.body, parse_block_body({"endwith"}, s.line, "with", true));
  return Status::ok();
}

Result<Target> Parser::parse_target(bool with_tuple, bool with_namespace, std::string_view end_name) {
  if (with_namespace && cur().type == Tok::kName && is_op(peek(), ".")) {
    Target t;
    t.name = cur().text;
    next();
    next();
    PIPIT_ASSIGN_OR_RETURN(t.attr, expect_name());
    return t;
  }
  PIPIT_ASSIGN_OR_RETURN(ExprPtr e, with_tuple ? parse_tuple(true, false, end_name, false) : parse_primary());
  return to_target(*e);
}

Result<Target> Parser::to_target(const Expr& e) {
  Target t;
  if (e.kind == ExprKind::kName) {
    t.name = e.name;
    return t;
  }
  if (e.kind == ExprKind::kTuple) {
    t.is_tuple = true;
    for (auto& item : e.items) {
      PIPIT_ASSIGN_OR_RETURN(Target sub, to_target(*item));
      t.elements.push_back(std::move(sub));
    }
    return t;
  }
  return Error::format("line {}: can't assign to this expression", e.line);
}

// ---- expressions ----

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

}  // namespace

Result<std::shared_ptr<const Program>> parse_template(std::string_view source) {
  PIPIT_ASSIGN_OR_RETURN(std::vector<Token> toks, lex(source));
  Parser p(std::move(toks));
  PIPIT_ASSIGN_OR_RETURN(Body body, p.parse_all());
  auto prog = std::make_shared<Program>();
  prog->body = std::move(body);
  return std::shared_ptr<const Program>(std::move(prog));
}

}  // namespace pipit::jinja
