// The Jinja parser's internals, shared by jinja_parser.cpp (statements) and jinja_parser_expr.cpp (expressions).
// Not part of the interpreter's interface: use parse_template() from jinja_parser.h.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_parser.h"

namespace pipit::jinja {

// Recursive descent over the lexer's tokens. Depth counters bound the recursion (see jinja_parser.h's limits).
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
    if (skip_op(op)) return Status::ok();
    std::string quoted(1, '\'');  // (built by append: GCC 12 flags "'" + std::string(op) + "'" with -Wrestrict)
    quoted.append(op).push_back('\'');
    return unexpected(quoted);
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

}  // namespace pipit::jinja
