// Jinja statement parser (the Parser class is in jinja_parser_impl.h; expressions are in jinja_parser_expr.cpp):
// text, {{ }} and the {% %} tags, each block parsed up to its end tag, as jinja2/parser.py's subparse does.
#include <algorithm>

#include "tokenizer/jinja_parser_impl.h"

namespace pipit::jinja {

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

Result<std::shared_ptr<const Program>> parse_template(std::string_view source) {
  if (source.size() > kMaxTemplateSource)
    return Error::out_of_range("the template is {} bytes, more than the {} a chat template may have", source.size(),
                               kMaxTemplateSource);
  PIPIT_ASSIGN_OR_RETURN(std::vector<Token> toks, lex(source));
  Parser p(std::move(toks));
  PIPIT_ASSIGN_OR_RETURN(Body body, p.parse_all());
  auto prog = std::make_shared<Program>();
  prog->body = std::move(body);
  return std::shared_ptr<const Program>(std::move(prog));
}

}  // namespace pipit::jinja
