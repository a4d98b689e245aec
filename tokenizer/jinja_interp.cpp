// Jinja interpreter; see jinja_interp.h. Statements write into a std::string; expressions evaluate to Values.
// The first failing node records its line (error_line_), and render() prefixes it to the message.
#include "tokenizer/jinja_interp.h"

#include "tokenizer/jinja_builtins.h"

namespace pipit::jinja {

namespace {
struct DepthGuard {
  int& d;
  explicit DepthGuard(int& depth) : d(++depth) {}
  ~DepthGuard() { --d; }
};
}  // namespace

Value* Interp::Scope::find_local(std::string_view name) {
  for (auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Interp::Scope::set(std::string_view name, Value v) {
  if (Value* slot = find_local(name)) *slot = std::move(v);
  else vars.emplace_back(std::string(name), std::move(v));
}

Interp::~Interp() {
  for (auto& d : namespaces_) d->entries.clear();  // break namespace reference cycles (ns.a = ns)
}

Result<std::string> Interp::render(std::vector<std::pair<std::string, Value>> vars) {
  Scope root;
  root.vars = std::move(vars);
  root_ = &root;
  std::string out;
  Status st = exec(program_.body, root, out);
  root_ = nullptr;
  if (!st.is_ok()) {
    if (error_line_ > 0) return Status(st.code(), fmt("line {}: {}", error_line_, st.message()));
    return st;
  }
  return out;
}

Status Interp::located(int line, Status st) {
  if (!st.is_ok() && error_line_ == 0) error_line_ = line;
  return st;
}

Status Interp::charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps)
    return Error::out_of_range("template rendering exceeded {} steps (loops too long?)", limits_.max_steps);
  return Status::ok();
}

Status Interp::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    return Error::out_of_range("template output exceeds {} bytes", limits_.max_output_bytes);
  return Status::ok();
}

Status Interp::check_items(size_t n) const {
  if (static_cast<int64_t>(n) > limits_.max_items)
    return Error::out_of_range("list of {} items exceeds the limit of {}", n, limits_.max_items);
  return Status::ok();
}

Value Interp::new_namespace(std::shared_ptr<Dict> attrs) {
  namespaces_.push_back(attrs);
  return Value::ns(std::move(attrs));
}

// ---- statements ----

Status Interp::exec(const Body& body, Scope& scope, std::string& out) {
  DepthGuard guard(depth_);
  if (depth_ > limits_.max_depth) return Error::out_of_range("template nesting exceeds {} levels", limits_.max_depth);
  for (const auto& s : body) {
    PIPIT_TRY(exec_stmt(*s, scope, out));
    if (flow_ != Flow::kNormal) break;
  }
  return Status::ok();
}

Status Interp::exec_stmt(const Stmt& s, Scope& scope, std::string& out) {
  PIPIT_TRY(located(s.line, charge(1)));
  switch (s.kind) {
    case StmtKind::kText:
      out += s.text;
      return located(s.line, check_size(out.size()));
    case StmtKind::kOutput: {
      PIPIT_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
      if (v.is_string()) out += v.str();
      else out += to_str(v);
      return located(s.line, check_size(out.size()));
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        bool take = true;
        if (cond) {
          PIPIT_ASSIGN_OR_RETURN(Value c, eval(*cond, scope));
          take = truthy(c);
        }
        if (take) return exec(body, scope, out);
      }
      return Status::ok();
    case StmtKind::kFor: {
      PIPIT_ASSIGN_OR_RETURN(Value iterable, eval(*s.expr, scope));
      return exec_for(s, scope, out, iterable, 0);
    }
    case StmtKind::kSet:
      return exec_set(s, scope);
    case StmtKind::kSetBlock: {
      Scope inner{&scope};
      std::string text;
      PIPIT_TRY(exec(s.body, inner, text));
      PIPIT_TRY(exec_filter_chain(s.filters, scope, text));
      if (s.target.is_tuple) return located(s.line, Error::invalid_argument("cannot unpack a block set"));
      if (!s.target.attr.empty()) {  // {% set ns.attr %}...{% endset %}
        PIPIT_ASSIGN_OR_RETURN(Value ns, lookup(s.target.name, scope));
        if (ns.kind() != Kind::kNamespace)
          return located(s.line, Error::invalid_argument("cannot assign attribute on non-namespace object"));
        ns.dict().set(Value::string(s.target.attr), Value::string(std::move(text)));
        return Status::ok();
      }
      scope.set(s.target.name, Value::string(std::move(text)));
      return Status::ok();
    }
    case StmtKind::kMacro:
      scope.set(s.name, make_macro(s));
      return Status::ok();
    case StmtKind::kCallBlock: {
      auto alive = std::make_shared<bool>(true);
      auto c = std::make_shared<Callable>();
      c->name = "caller";
      const Stmt* stmt = &s;
      Scope* outer = &scope;
      c->fn = [stmt, outer, alive](Interp& in, CallArgs& args) -> Result<Value> {
        if (!*alive) return Error::invalid_argument("caller() used after its call block ended");
        Scope cs{outer};
        for (size_t i = 0; i < stmt->params.size(); ++i) {
          const Value* v = args.get(i, stmt->params[i].first);
          if (v) {
            cs.set(stmt->params[i].first, *v);
          } else if (stmt->params[i].second) {
            PIPIT_ASSIGN_OR_RETURN(Value d, in.eval(*stmt->params[i].second, cs));
            cs.set(stmt->params[i].first, d);
          } else {
            cs.set(stmt->params[i].first, Value::undefined("parameter '" + stmt->params[i].first + "' was not provided"));
          }
        }
        std::string text;
        PIPIT_TRY(in.exec(stmt->body, cs, text));
        in.flow_ = Flow::kNormal;
        return Value::string(std::move(text));
      };
      const Expr& call = *s.expr;
      PIPIT_ASSIGN_OR_RETURN(Value fn, eval(*call.a, scope));
      CallArgs args;
      PIPIT_TRY(eval_args(call, scope, args));
      args.kw.emplace_back("caller", Value::callable(c));
      Result<Value> r = this->call(fn, args);
      *alive = false;
      if (!r.is_ok()) return located(s.line, r.status());
      out += to_str(r.value());
      return located(s.line, check_size(out.size()));
    }
    case StmtKind::kFilterBlock: {
      Scope inner{&scope};
      std::string text;
      PIPIT_TRY(exec(s.body, inner, text));
      PIPIT_TRY(exec_filter_chain(s.filters, scope, text));
      out += text;
      return located(s.line, check_size(out.size()));
    }
    case StmtKind::kWith: {
      Scope inner{&scope};
      for (const auto& [name, expr] : s.params) {
        PIPIT_ASSIGN_OR_RETURN(Value v, eval(*expr, scope));
        inner.set(name, std::move(v));
      }
      return exec(s.body, inner, out);
    }
    case StmtKind::kBreak:
      flow_ = Flow::kBreak;
      return Status::ok();
    case StmtKind::kContinue:
      flow_ = Flow::kContinue;
      return Status::ok();
    case StmtKind::kScope: {
      Scope inner{&scope};
      return exec(s.body, inner, out);
    }
  }
  return Status::ok();
}

Status Interp::exec_filter_chain(const std::vector<ExprPtr>& filters, Scope& scope, std::string& text) {
  if (filters.empty()) return Status::ok();
  Value v = Value::string(std::move(text));
  for (const auto& f : filters) {
    CallArgs args;
    PIPIT_TRY(eval_args(*f, scope, args));
    Result<Value> r = apply_filter(*this, f->name, v, args);
    if (!r.is_ok()) return located(f->line, r.status());
    v = std::move(r).value();
  }
  text = to_str(v);
  return Status::ok();
}

Status Interp::exec_for(const Stmt& s, Scope& scope, std::string& out, const Value& iterable, int depth0) {
  Result<ValueList> all = iterate(iterable);
  if (!all.is_ok()) return located(s.line, all.status());
  ValueList items;
  if (s.cond) {
    for (Value& item : all.value()) {
      PIPIT_TRY(located(s.line, charge(1)));
      Scope tmp{&scope};
      PIPIT_TRY(assign(s.target, item, tmp));
      PIPIT_ASSIGN_OR_RETURN(Value keep, eval(*s.cond, tmp));
      if (truthy(keep)) items.push_back(std::move(item));
    }
  } else {
    items = std::move(all).value();
  }
  if (items.empty()) {
    Scope inner{&scope};
    return exec(s.else_body, inner, out);
  }
  auto state = std::make_shared<LoopState>();
  state->items = std::make_shared<const ValueList>(std::move(items));
  state->depth0 = depth0;
  if (s.recursive) {
    auto c = std::make_shared<Callable>();
    c->name = "loop";
    const Stmt* stmt = &s;
    Scope* outer = &scope;
    c->fn = [stmt, outer, depth0](Interp& in, CallArgs& args) -> Result<Value> {
      if (args.pos.size() != 1) return Error::invalid_argument("loop() takes exactly one argument");
      std::string text;
      PIPIT_TRY(in.exec_for(*stmt, *outer, text, args.pos[0], depth0 + 1));
      return Value::string(std::move(text));
    };
    state->recurse = Value::callable(std::move(c));
  }
  Value loop = Value::loop(state);
  const ValueList& list = *state->items;
  Status st = Status::ok();
  for (size_t i = 0; i < list.size(); ++i) {
    st = located(s.line, charge(1));
    if (!st.is_ok()) break;
    state->index0 = i;
    Scope body{&scope};
    st = assign(s.target, list[i], body);
    if (!st.is_ok()) break;
    body.set("loop", loop);
    st = exec(s.body, body, out);
    if (!st.is_ok()) break;
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  state->recurse = Value();  // the recursive callable refers to this frame's scope
  return st;
}

Status Interp::exec_set(const Stmt& s, Scope& scope) {
  PIPIT_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
  if (!s.target.attr.empty()) {
    PIPIT_ASSIGN_OR_RETURN(Value ns, lookup(s.target.name, scope));
    if (ns.kind() != Kind::kNamespace)
      return located(s.line, Error::invalid_argument("cannot assign attribute on non-namespace object"));
    ns.dict().set(Value::string(s.target.attr), std::move(v));
    return Status::ok();
  }
  return located(s.line, assign(s.target, v, scope));
}

Status Interp::assign(const Target& t, const Value& v, Scope& scope) {
  if (!t.is_tuple) {
    scope.set(t.name, v);
    return Status::ok();
  }
  PIPIT_ASSIGN_OR_RETURN(ValueList vals, iterate(v));
  if (vals.size() < t.elements.size())
    return Error::invalid_argument("not enough values to unpack (expected {}, got {})", t.elements.size(), vals.size());
  if (vals.size() > t.elements.size())
    return Error::invalid_argument("too many values to unpack (expected {})", t.elements.size());
  for (size_t i = 0; i < vals.size(); ++i) PIPIT_TRY(assign(t.elements[i], vals[i], scope));
  return Status::ok();
}

// ---- macros ----

Value Interp::make_macro(const Stmt& s) {
  auto c = std::make_shared<Callable>();
  c->name = s.name;
  const Stmt* m = &s;
  c->fn = [m](Interp& in, CallArgs& args) { return in.call_macro(*m, args, Value()); };
  return Value::callable(std::move(c));
}

Result<Value> Interp::call_macro(const Stmt& m, CallArgs& args, const Value& caller) {
  Scope s{root_};
  for (size_t i = 0; i < m.params.size(); ++i) {
    const std::string& name = m.params[i].first;
    if (const Value* v = args.get(i, name)) {
      s.set(name, *v);
    } else if (m.params[i].second) {
      PIPIT_ASSIGN_OR_RETURN(Value d, eval(*m.params[i].second, s));
      s.set(name, std::move(d));
    } else {
      s.set(name, Value::undefined("parameter '" + name + "' was not provided"));
    }
  }
  ValueList extra;
  for (size_t i = m.params.size(); i < args.pos.size(); ++i) extra.push_back(args.pos[i]);
  s.set("varargs", Value::tuple(std::move(extra)));
  auto kwargs = std::make_shared<Dict>();
  for (size_t i = 0; i < args.kw.size(); ++i) {
    if (i < args.kw_used.size() && args.kw_used[i]) continue;
    if (args.kw[i].first == "caller") s.set("caller", args.kw[i].second);
    else kwargs->entries.emplace_back(Value::string(args.kw[i].first), args.kw[i].second);
  }
  s.set("kwargs", Value::dict(std::move(kwargs)));
  if (!caller.is_undefined()) s.set("caller", caller);
  std::string out;
  PIPIT_TRY(exec(m.body, s, out));
  flow_ = Flow::kNormal;
  return Value::string(std::move(out));
}

Result<Value> Interp::call(const Value& fn, CallArgs& args) {
  if (fn.kind() == Kind::kCallable) {
    DepthGuard guard(call_depth_);
    if (call_depth_ > limits_.max_call_depth)
      return Error::out_of_range("calls nested deeper than {} levels (unbounded recursion?)", limits_.max_call_depth);
    return fn.fn().fn(*this, args);
  }
  if (fn.kind() == Kind::kLoop) {
    if (fn.loop().recurse.is_undefined()) return Error::invalid_argument("loop() needs a 'for ... recursive' loop");
    return call(fn.loop().recurse, args);
  }
  if (fn.is_undefined()) return undefined_error(fn);
  return Error::invalid_argument("'{}' object is not callable", type_name(fn));
}

// ---- expressions ----

Result<Value> Interp::lookup(std::string_view name, Scope& scope) {
  for (Scope* s = &scope; s; s = s->parent)
    if (Value* v = s->find_local(name)) return *v;
  if (const Value* g = find_global(name)) return *g;
  return Value::undefined("'" + std::string(name) + "' is undefined");
}

Result<Value> Interp::eval(const Expr& e, Scope& scope) {
  DepthGuard guard(depth_);
  if (depth_ > limits_.max_depth)
    return located(e.line, Error::out_of_range("template nesting exceeds {} levels", limits_.max_depth));
  return eval_inner(e, scope);
}

Status Interp::eval_args(const Expr& e, Scope& scope, CallArgs& args) {
  for (const auto& item : e.items) {
    PIPIT_ASSIGN_OR_RETURN(Value v, eval(*item, scope));
    args.pos.push_back(std::move(v));
  }
  for (const auto& [name, expr] : e.kwargs) {
    PIPIT_ASSIGN_OR_RETURN(Value v, eval(*expr, scope));
    args.kw.emplace_back(name, std::move(v));
  }
  if (e.star_args) {
    PIPIT_ASSIGN_OR_RETURN(Value v, eval(*e.star_args, scope));
    Result<ValueList> items = iterate(v);
    if (!items.is_ok()) return located(e.line, items.status());
    for (Value& x : items.value()) args.pos.push_back(std::move(x));
  }
  if (e.star_kwargs) {
    PIPIT_ASSIGN_OR_RETURN(Value v, eval(*e.star_kwargs, scope));
    if (!v.is_dict()) return located(e.line, Error::invalid_argument("argument after ** must be a mapping, not {}", type_name(v)));
    for (auto& [k, x] : v.dict().entries) {
      if (!k.is_string()) return located(e.line, Error::invalid_argument("keywords must be strings"));
      args.kw.emplace_back(k.str(), x);
    }
  }
  return Status::ok();
}

Result<Value> Interp::eval_call(const Expr& e, Scope& scope) {
  const Expr& callee = *e.a;
  CallArgs args;
  if (callee.kind == ExprKind::kAttr) {
    PIPIT_ASSIGN_OR_RETURN(Value obj, eval(*callee.a, scope));
    if (is_unsafe_method(obj, callee.name))
      return located(e.line, Error::invalid_argument("access to attribute '{}' of '{}' object is unsafe.", callee.name,
                                                     type_name(obj)));
    if (is_method(obj, callee.name)) {
      PIPIT_TRY(eval_args(e, scope, args));
      Result<Value> r = call_method(*this, obj, callee.name, args);
      if (!r.is_ok()) return located(e.line, r.status());
      return r;
    }
    Result<Value> fn = get_attr(obj, callee.name);
    if (!fn.is_ok()) return located(e.line, fn.status());
    PIPIT_TRY(eval_args(e, scope, args));
    Result<Value> r = call(fn.value(), args);
    if (!r.is_ok()) return located(e.line, r.status());
    return r;
  }
  PIPIT_ASSIGN_OR_RETURN(Value fn, eval(callee, scope));
  PIPIT_TRY(eval_args(e, scope, args));
  Result<Value> r = call(fn, args);
  if (!r.is_ok()) return located(e.line, r.status());
  return r;
}

Result<Value> Interp::eval_compare(const Expr& e, Scope& scope) {
  PIPIT_ASSIGN_OR_RETURN(Value left, eval(*e.items[0], scope));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    PIPIT_ASSIGN_OR_RETURN(Value right, eval(*e.items[i + 1], scope));
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==" || op == "!=") {
      ok = equals(left, right) == (op == "==");
    } else if (op == "in" || op == "not in") {
      Result<bool> r = contains(right, left);
      if (!r.is_ok()) return located(e.line, r.status());
      ok = r.value() == (op == "in");
    } else {
      if (left.is_undefined()) return located(e.line, undefined_error(left));
      if (right.is_undefined()) return located(e.line, undefined_error(right));
      Result<int> c = compare(left, right, op);
      if (!c.is_ok()) return located(e.line, c.status());
      int v = c.value();
      ok = op == "<" ? v < 0 : op == "<=" ? v <= 0 : op == ">" ? v > 0 : v >= 0;
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Result<Value> Interp::eval_inner(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case ExprKind::kConst: return e.value;
    case ExprKind::kName: return lookup(e.name, scope);
    case ExprKind::kList: case ExprKind::kTuple: {
      ValueList items;
      items.reserve(e.items.size());
      for (const auto& item : e.items) {
        PIPIT_ASSIGN_OR_RETURN(Value v, eval(*item, scope));
        items.push_back(std::move(v));
      }
      Result<Value> r = e.kind == ExprKind::kList ? make_list(std::move(items)) : make_tuple(std::move(items));
      if (!r.is_ok()) return located(e.line, r.status());
      return r;
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        PIPIT_ASSIGN_OR_RETURN(Value k, eval(*e.items[i], scope));
        PIPIT_ASSIGN_OR_RETURN(Value v, eval(*e.items[i + 1], scope));
        if (k.is_seq() && k.kind() == Kind::kList) return located(e.line, Error::invalid_argument("unhashable type: 'list'"));
        d->set(std::move(k), std::move(v));
      }
      Result<Value> r = make_dict(std::move(d));
      if (!r.is_ok()) return located(e.line, r.status());
      return r;
    }
    case ExprKind::kAttr: {
      PIPIT_ASSIGN_OR_RETURN(Value obj, eval(*e.a, scope));
      Result<Value> r = get_attr(obj, e.name);
      if (!r.is_ok()) return located(e.line, r.status());
      return r;
    }
    case ExprKind::kItem: {
      PIPIT_ASSIGN_OR_RETURN(Value obj, eval(*e.a, scope));
      PIPIT_ASSIGN_OR_RETURN(Value key, eval(*e.b, scope));
      Result<Value> r = get_item(obj, key);
      if (!r.is_ok()) return located(e.line, r.status());
      return r;
    }
    case ExprKind::kSlice: {
      PIPIT_ASSIGN_OR_RETURN(Value obj, eval(*e.a, scope));
      Value parts[3] = {Value::none(), Value::none(), Value::none()};
      for (int i = 0; i < 3; ++i)
        if (e.items[i]) {
          PIPIT_ASSIGN_OR_RETURN(parts[i], eval(*e.items[i], scope));
        }
      Result<Value> r = get_slice(obj, parts[0], parts[1], parts[2]);
      if (!r.is_ok()) return located(e.line, r.status());
      return r;
    }
    case ExprKind::kCall: return eval_call(e, scope);
    case ExprKind::kFilter: {
      PIPIT_ASSIGN_OR_RETURN(Value v, eval(*e.a, scope));
      CallArgs args;
      PIPIT_TRY(eval_args(e, scope, args));
      Result<Value> r = apply_filter(*this, e.name, v, args);
      if (!r.is_ok()) return located(e.line, r.status());
      return r;
    }
    case ExprKind::kTest: {
      PIPIT_ASSIGN_OR_RETURN(Value v, eval(*e.a, scope));
      CallArgs args;
      PIPIT_TRY(eval_args(e, scope, args));
      Result<bool> r = apply_test(*this, e.name, v, args);
      if (!r.is_ok()) return located(e.line, r.status());
      return Value::boolean(r.value() != e.negated);
    }
    case ExprKind::kNeg: case ExprKind::kPos: {
      PIPIT_ASSIGN_OR_RETURN(Value v, eval(*e.a, scope));
      Result<Value> r = unary_op(e.kind == ExprKind::kNeg ? "-" : "+", v);
      if (!r.is_ok()) return located(e.line, r.status());
      return r;
    }
    case ExprKind::kNot: {
      PIPIT_ASSIGN_OR_RETURN(Value v, eval(*e.a, scope));
      return Value::boolean(!truthy(v));
    }
    case ExprKind::kAnd: case ExprKind::kOr: {
      PIPIT_ASSIGN_OR_RETURN(Value l, eval(*e.a, scope));
      if (truthy(l) == (e.kind == ExprKind::kOr)) return l;
      return eval(*e.b, scope);
    }
    case ExprKind::kBinary: {
      PIPIT_ASSIGN_OR_RETURN(Value l, eval(*e.a, scope));
      PIPIT_ASSIGN_OR_RETURN(Value r, eval(*e.b, scope));
      Result<Value> v = binary_op(e.name, l, r, *this);
      if (!v.is_ok()) return located(e.line, v.status());
      return v;
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& item : e.items) {
        PIPIT_ASSIGN_OR_RETURN(Value v, eval(*item, scope));
        const std::string piece = v.is_string() ? v.str() : to_str(v);
        // checked before the bytes are joined: a string doubled in a loop stops at the limit, not at twice it
        PIPIT_TRY(located(e.line, check_size(s.size() + piece.size())));
        s += piece;
      }
      return Value::string(std::move(s));
    }
    case ExprKind::kCompare: return eval_compare(e, scope);
    case ExprKind::kCond: {
      PIPIT_ASSIGN_OR_RETURN(Value c, eval(*e.b, scope));
      if (truthy(c)) return eval(*e.a, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

}  // namespace pipit::jinja
