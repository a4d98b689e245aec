// Built-in tests (`x is defined`, `x is string`, `x is divisibleby 3`, ...), as jinja2/tests.py defines them.
// Python's type rules show through: bool counts as a number but not as an integer, Undefined is iterable.
#include <map>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interp.h"
#include "tokenizer/jinja_text.h"

namespace pipit::jinja {

namespace {

using TestFn = Result<bool> (*)(Interp&, const Value&, CallArgs&);

Result<const Value*> need(CallArgs& a, std::string_view test) {
  const Value* v = a.get(0, "other");
  if (!v) v = a.get(0, "value");
  if (!v) v = a.get(0, "num");
  if (!v) v = a.get(0, "seq");
  if (!v) return Error::invalid_argument("test '{}' needs an argument", test);
  return v;
}

Result<bool> t_defined(Interp&, const Value& v, CallArgs&) { return !v.is_undefined(); }
Result<bool> t_undefined(Interp&, const Value& v, CallArgs&) { return v.is_undefined(); }
Result<bool> t_none(Interp&, const Value& v, CallArgs&) { return v.is_none(); }
Result<bool> t_boolean(Interp&, const Value& v, CallArgs&) { return v.kind() == Kind::kBool; }
Result<bool> t_true(Interp&, const Value& v, CallArgs&) { return v.kind() == Kind::kBool && v.as_bool(); }
Result<bool> t_false(Interp&, const Value& v, CallArgs&) { return v.kind() == Kind::kBool && !v.as_bool(); }
Result<bool> t_integer(Interp&, const Value& v, CallArgs&) { return v.kind() == Kind::kInt; }
Result<bool> t_float(Interp&, const Value& v, CallArgs&) { return v.kind() == Kind::kFloat; }
Result<bool> t_number(Interp&, const Value& v, CallArgs&) { return v.is_number(); }
Result<bool> t_string(Interp&, const Value& v, CallArgs&) { return v.is_string(); }
Result<bool> t_mapping(Interp&, const Value& v, CallArgs&) { return v.is_dict(); }
Result<bool> t_iterable(Interp&, const Value& v, CallArgs&) {
  Kind k = v.kind();
  return k == Kind::kUndefined || k == Kind::kString || k == Kind::kList || k == Kind::kTuple || k == Kind::kDict ||
         k == Kind::kLoop;
}
Result<bool> t_sequence(Interp&, const Value& v, CallArgs&) {
  Kind k = v.kind();
  return k == Kind::kUndefined || k == Kind::kString || k == Kind::kList || k == Kind::kTuple || k == Kind::kDict;
}
Result<bool> t_callable(Interp&, const Value& v, CallArgs&) {
  return v.kind() == Kind::kCallable || v.kind() == Kind::kLoop || v.is_undefined();
}
Result<bool> t_escaped(Interp&, const Value&, CallArgs&) { return false; }

Result<bool> t_sameas(Interp& in, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(const Value* o, need(a, "sameas"));
  if (v.kind() != o->kind()) return false;
  switch (v.kind()) {
    case Kind::kNone: case Kind::kUndefined: return v.is_none() || v.identity() == o->identity();
    case Kind::kBool: case Kind::kInt: case Kind::kFloat: case Kind::kString: return equals(v, *o);
    default: return v.identity() == o->identity();
  }
}

// value % 2 == 1 / == 0, with Python's modulo (also for floats).
Result<bool> parity(Interp& in, const Value& v, int want) {
  PIPIT_ASSIGN_OR_RETURN(Value r, binary_op("%", v, Value::integer(2), in));
  return equals(r, Value::integer(want));
}
Result<bool> t_odd(Interp& in, const Value& v, CallArgs&) { return parity(in, v, 1); }
Result<bool> t_even(Interp& in, const Value& v, CallArgs&) { return parity(in, v, 0); }

Result<bool> t_divisibleby(Interp& in, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(const Value* n, need(a, "divisibleby"));
  PIPIT_ASSIGN_OR_RETURN(Value r, binary_op("%", v, *n, in));
  return equals(r, Value::integer(0));
}

Result<bool> t_lower(Interp&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return py_lower(s) == s && py_upper(s) != s;
}
Result<bool> t_upper(Interp&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return py_upper(s) == s && py_lower(s) != s;
}

Result<bool> t_in(Interp&, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(const Value* seq, need(a, "in"));
  return contains(*seq, v);
}

Result<bool> t_eq(Interp&, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(const Value* o, need(a, "=="));
  return equals(v, *o);
}
Result<bool> t_ne(Interp&, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(const Value* o, need(a, "!="));
  return !equals(v, *o);
}

template <int kLo, int kHi>  // accept when compare() result is in [kLo, kHi]
Result<bool> t_order(Interp&, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(const Value* o, need(a, "comparison"));
  if (v.is_undefined()) return undefined_error(v);
  if (o->is_undefined()) return undefined_error(*o);
  PIPIT_ASSIGN_OR_RETURN(int c, compare(v, *o, kLo < 0 ? (kHi < 0 ? "<" : "<=") : (kLo > 0 ? ">" : ">=")));
  return c >= kLo && c <= kHi;
}

Result<bool> t_filter(Interp&, const Value& v, CallArgs&) { return v.is_string() && has_filter(v.str()); }
Result<bool> t_test(Interp&, const Value& v, CallArgs&) { return v.is_string() && has_test(v.str()); }

const std::map<std::string_view, TestFn>& tests() {
  static const std::map<std::string_view, TestFn> kTests = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},         {"boolean", t_boolean},
      {"true", t_true},         {"false", t_false},         {"integer", t_integer},   {"float", t_float},
      {"number", t_number},     {"string", t_string},       {"mapping", t_mapping},   {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable},   {"escaped", t_escaped},   {"sameas", t_sameas},
      {"odd", t_odd},           {"even", t_even},           {"divisibleby", t_divisibleby},
      {"lower", t_lower},       {"upper", t_upper},         {"in", t_in},             {"filter", t_filter},
      {"test", t_test},         {"eq", t_eq},               {"equalto", t_eq},        {"==", t_eq},
      {"ne", t_ne},             {"!=", t_ne},               {"lt", t_order<-1, -1>},  {"lessthan", t_order<-1, -1>},
      {"<", t_order<-1, -1>},   {"le", t_order<-1, 0>},     {"<=", t_order<-1, 0>},   {"gt", t_order<1, 1>},
      {"greaterthan", t_order<1, 1>}, {">", t_order<1, 1>}, {"ge", t_order<0, 1>},    {">=", t_order<0, 1>},
  };
  return kTests;
}

}  // namespace

bool has_test(std::string_view name) { return tests().count(name) > 0; }

Result<bool> apply_test(Interp& in, std::string_view name, const Value& v, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) return Error::invalid_argument("No test named '{}'.", name);
  PIPIT_ASSIGN_OR_RETURN(bool r, it->second(in, v, args));
  PIPIT_TRY(args.check_all_used(name));
  return r;
}

}  // namespace pipit::jinja
