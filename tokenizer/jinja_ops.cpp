// Operators and subscripts with Python's semantics, as Jinja2 evaluates them: arithmetic (int stays int, `/` gives a
// float, floor division and modulo round toward -inf), sequence concatenation and repetition, `in`, iteration, and
// the sandboxed getattr/getitem pair (attribute first for `a.b`, item first for `a[b]`, each falling back to the
// other; a miss gives Undefined, never an error).
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interp.h"
#include "tokenizer/jinja_text.h"

namespace pipit::jinja {

namespace {

// Jinja2's object_type_repr: how an undefined-attribute message names the object.
std::string object_type_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::kNone: return "None";
    case Kind::kNamespace: return "jinja2.utils.Namespace object";
    case Kind::kLoop: return "jinja2.runtime.LoopContext object";
    default: return std::string(type_name(v)) + " object";
  }
}

Value missing_attr(const Value& obj, std::string_view name) {
  if (obj.is_none()) return Value::undefined("'None' has no attribute '" + std::string(name) + "'");
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + std::string(name) + "'");
}

Value missing_item(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attr(obj, key.str());
  return Value::undefined(object_type_repr(obj) + " has no element " + to_repr(key));
}

Value unsafe(const Value& obj, std::string_view name) {
  return Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(obj) +
                          "' object is unsafe.");
}

Status unsupported(std::string_view op, const Value& a, const Value& b) {
  return Error::invalid_argument("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

Result<Value> repeat(const Value& seq, int64_t n, Interp& in) {
  if (n < 0) n = 0;
  size_t unit = seq.is_string() ? seq.str().size() : seq.items().size();
  if (unit > 0 && static_cast<uint64_t>(n) > (uint64_t{1} << 40) / unit)  // the product would overflow: surely too big
    return Error::out_of_range("'*' would build a sequence of {} x {} elements", unit, n);
  if (seq.is_string()) {
    PIPIT_TRY(in.check_size(seq.str().size() * static_cast<size_t>(n)));
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += seq.str();
    return Value::string(std::move(s));
  }
  PIPIT_TRY(in.check_items(seq.items().size() * static_cast<size_t>(n)));
  ValueList items;
  for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.items().begin(), seq.items().end());
  return seq.kind() == Kind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

Result<Value> arith(std::string_view op, const Value& a, const Value& b) {
  bool ints = a.kind() != Kind::kFloat && b.kind() != Kind::kFloat;
  if (ints) {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value::integer(r);
    if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value::integer(r);
    if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value::integer(r);
    if (op == "//" || op == "%") {
      if (y == 0) return Error::invalid_argument("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return Error::out_of_range("integer overflow");
      return Value::integer(op == "//" ? floor_div(x, y) : py_mod(x, y));
    }
    if (op == "**" && y >= 0) {
      int64_t acc = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(acc, x, &acc)) return Error::out_of_range("integer overflow in '**'");
        if (acc == 0 || acc == 1) break;
      }
      if (acc == 1 && x == -1 && (y % 2)) acc = -1;
      return Value::integer(acc);
    }
    if (op == "+" || op == "-" || op == "*") return Error::out_of_range("integer overflow in '{}'", op);
  }
  double x = a.as_float(), y = b.as_float();
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "/") {
    if (y == 0) return Error::invalid_argument("division by zero");
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {  // CPython's float_divmod, so 1 // 0.1 == 9.0 as in Python
    if (y == 0) return Error::invalid_argument(op == "//" ? "float floor division by zero" : "float modulo");
    double mod = std::fmod(x, y), div = (x - mod) / y;
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) {
        mod += y;
        div -= 1.0;
      }
    } else {
      mod = std::copysign(0.0, y);
    }
    double floordiv;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
      floordiv = std::copysign(0.0, x / y);
    }
    return Value::number(op == "//" ? floordiv : mod);
  }
  if (op == "**") {
    if (x == 0 && y < 0) return Error::invalid_argument("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(x, y));
  }
  return Error::invalid_argument("unknown operator '{}'", op);
}

}  // namespace

Status undefined_error(const Value& u) {
  const std::string& hint = u.undefined_hint();
  return Error::invalid_argument("{}", hint.empty() ? "undefined value" : hint);
}

Result<Value> binary_op(std::string_view op, const Value& a, const Value& b, Interp& in) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) return arith(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      PIPIT_TRY(in.check_size(a.str().size() + b.str().size()));
      return Value::string(a.str() + b.str());
    }
    if (a.is_seq() && a.kind() == b.kind()) {
      PIPIT_TRY(in.check_items(a.items().size() + b.items().size()));
      ValueList items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return a.kind() == Kind::kTuple ? make_tuple(std::move(items)) : make_list(std::move(items));
    }
    if (a.is_string() || a.is_seq())
      return Error::invalid_argument("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b), type_name(a));
    return unsupported("+", a, b);
  }
  if (op == "*") {
    if ((a.is_string() || a.is_seq()) && b.is_int()) return repeat(a, b.as_int(), in);
    if ((b.is_string() || b.is_seq()) && a.is_int()) return repeat(b, a.as_int(), in);
    if (a.is_string() || a.is_seq() || b.is_string() || b.is_seq())
      return Error::invalid_argument("can't multiply sequence by non-int of type '{}'", type_name(a.is_int() || a.kind() == Kind::kFloat ? a : b));
    return unsupported("*", a, b);
  }
  if (op == "%" && a.is_string()) {
    PIPIT_ASSIGN_OR_RETURN(std::string s, percent_format(a.str(), b));
    return Value::string(std::move(s));
  }
  return unsupported(op, a, b);
}

Result<Value> unary_op(std::string_view op, const Value& v) {
  if (v.is_undefined()) return undefined_error(v);
  if (v.kind() == Kind::kFloat) return Value::number(op == "-" ? -v.as_float() : v.as_float());
  if (v.is_int()) {
    if (op == "+") return Value::integer(v.as_int());
    if (v.as_int() == INT64_MIN) return Error::out_of_range("integer overflow in unary '-'");
    return Value::integer(-v.as_int());
  }
  return Error::invalid_argument("bad operand type for unary {}: '{}'", op, type_name(v));
}

Result<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined: return false;  // Undefined iterates as empty
    case Kind::kString:
      if (!item.is_string())
        return Error::invalid_argument("'in <string>' requires string as left operand, not {}", type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList: case Kind::kTuple:
      for (const Value& x : container.items())
        if (equals(x, item)) return true;
      return false;
    case Kind::kDict:
      if (item.kind() == Kind::kList || item.kind() == Kind::kDict || item.kind() == Kind::kNamespace)
        return Error::invalid_argument("unhashable type: '{}'", type_name(item));
      return container.dict().find(item) != nullptr;
    default: return Error::invalid_argument("argument of type '{}' is not iterable", type_name(container));
  }
}

Result<ValueList> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return ValueList{};
    case Kind::kList: case Kind::kTuple: return v.items();
    case Kind::kDict: {
      ValueList keys;
      keys.reserve(v.dict().entries.size());
      for (auto& [k, x] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    case Kind::kString: {
      ValueList chars;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        size_t start = i;
        next_cp(s, i);
        chars.push_back(Value::string(s.substr(start, i - start)));
      }
      return chars;
    }
    default: return Error::invalid_argument("'{}' object is not iterable", type_name(v));
  }
}

Result<Value> get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (name.substr(0, 2) == "__") return unsafe(obj, name);
  switch (obj.kind()) {
    case Kind::kLoop: return loop_attr(obj, name);
    case Kind::kNamespace: {
      if (const Value* v = obj.dict().find(name)) return *v;
      return missing_attr(obj, name);
    }
    case Kind::kDict:
      if (is_unsafe_method(obj, name)) return unsafe(obj, name);
      if (is_method(obj, name)) return bound_method(obj, name);
      if (const Value* v = obj.dict().find(name)) return *v;
      return missing_attr(obj, name);
    default:
      if (is_unsafe_method(obj, name)) return unsafe(obj, name);
      if (is_method(obj, name)) return bound_method(obj, name);
      return missing_attr(obj, name);
  }
}

Result<Value> get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return undefined_error(obj);
  switch (obj.kind()) {
    case Kind::kDict:
      if (key.kind() != Kind::kList && key.kind() != Kind::kDict) {
        if (const Value* v = obj.dict().find(key)) return *v;
      }
      break;
    case Kind::kList: case Kind::kTuple:
      if (key.is_int()) {
        int64_t n = static_cast<int64_t>(obj.items().size()), i = key.as_int();
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.items()[i];
      }
      break;
    case Kind::kString:
      if (key.is_int()) {
        std::vector<size_t> off = cp_offsets(obj.str());
        int64_t n = static_cast<int64_t>(off.size()) - 1, i = key.as_int();
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value::string(obj.str().substr(off[i], off[i + 1] - off[i]));
      }
      break;
    default:
      break;
  }
  if (key.is_string() && obj.kind() != Kind::kNone) {
    if (key.str().substr(0, 2) == "__") return unsafe(obj, key.str());
    if (obj.kind() == Kind::kNamespace || obj.kind() == Kind::kLoop) return get_attr(obj, key.str());
    if (is_unsafe_method(obj, key.str())) return unsafe(obj, key.str());
    if (is_method(obj, key.str())) return bound_method(obj, key.str());
  }
  return missing_item(obj, key);
}

// Jinja2 compiles `x[a:b]` to plain Python slicing (not environment.getitem), so misuse raises instead of giving
// Undefined.
Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_dict()) return Error::invalid_argument("unhashable type: 'slice'");
  if (!obj.is_string() && !obj.is_seq())
    return Error::invalid_argument("'{}' object is not subscriptable", type_name(obj));
  for (const Value* p : {&start, &stop, &step})
    if (!p->is_none() && !p->is_int())
      return Error::invalid_argument("slice indices must be integers or None or have an __index__ method");
  int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) return Error::invalid_argument("slice step cannot be zero");
  std::vector<size_t> off;
  int64_t n;
  if (obj.is_string()) {
    off = cp_offsets(obj.str());
    n = static_cast<int64_t>(off.size()) - 1;
  } else {
    n = static_cast<int64_t>(obj.items().size());
  }
  // PySlice_AdjustIndices
  int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? n : n - 1;
  auto clamp = [&](const Value& v, int64_t def) {
    if (v.is_none()) return def;
    int64_t i = v.as_int();
    if (i < 0) {
      i += n;
      if (i < lower) i = lower;
    } else if (i > upper) {
      i = upper;
    }
    return i;
  };
  int64_t b = clamp(start, st > 0 ? lower : upper), e = clamp(stop, st > 0 ? upper : lower);
  if (obj.is_string()) {
    const std::string& s = obj.str();
    std::string r;
    if (st == 1) {
      if (b < e) r = s.substr(off[b], off[e] - off[b]);
    } else {
      for (int64_t i = b; st > 0 ? i < e : i > e; i += st) r += s.substr(off[i], off[i + 1] - off[i]);
    }
    return Value::string(std::move(r));
  }
  ValueList items;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) items.push_back(obj.items()[i]);
  return obj.kind() == Kind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

// Python's printf-style `fmt % args`: %s %r %d %i %f %F %e %g %x %X %o %c %%, flags - + space 0, width, precision,
// and %(name)s with a dict argument.
Result<std::string> percent_format(std::string_view fmt, const Value& args) {
  ValueList pos;
  if (args.kind() == Kind::kTuple) pos = args.items();
  else if (!args.is_dict()) pos.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) return Error::invalid_argument("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string_view::npos || !args.is_dict()) return Error::invalid_argument("format requires a mapping");
      arg = args.dict().find(fmt.substr(i + 1, close - i - 1));
      if (!arg) return Error::invalid_argument("KeyError: '{}'", fmt.substr(i + 1, close - i - 1));
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ 0#").find(fmt[i]) != std::string_view::npos) flags += fmt[i++];
    std::string width, prec;
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') width += fmt[i++];
    if (i < fmt.size() && fmt[i] == '.') {
      prec = ".";
      ++i;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') prec += fmt[i++];
    }
    if (i >= fmt.size()) return Error::invalid_argument("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= pos.size()) return Error::invalid_argument("not enough arguments for format string");
      arg = &pos[next++];
    }
    std::string spec = "%" + flags + width + prec;
    char buf[512];
    std::string piece;
    if (conv == 's' || conv == 'r') {
      piece = conv == 's' ? to_str(*arg) : to_repr(*arg);
      if (prec.size() > 1) piece = piece.substr(0, std::stoul(prec.substr(1)));
      size_t w = width.empty() ? 0 : std::stoul(width), len = cp_count(piece);
      if (len < w) piece = flags.find('-') != std::string::npos ? piece + std::string(w - len, ' ') : std::string(w - len, ' ') + piece;
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o' || conv == 'c') {
      if (!arg->is_number()) return Error::invalid_argument("%{} format: a real number is required, not {}", conv, type_name(*arg));
      long long v = arg->kind() == Kind::kFloat ? static_cast<long long>(arg->as_float()) : arg->as_int();
      if (conv == 'c') {
        append_utf8(piece, static_cast<char32_t>(v));
      } else {
        std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), v);
        piece = buf;
      }
    } else if (std::string_view("fFeEgG").find(conv) != std::string_view::npos) {
      if (!arg->is_number()) return Error::invalid_argument("must be real number, not {}", type_name(*arg));
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg->as_float());
      piece = buf;
    } else {
      return Error::invalid_argument("unsupported format character '{}'", conv);
    }
    out += piece;
  }
  // Python treats any mapping-like argument (dict, and also list) as "maybe used by %(name)s": no leftover check.
  if (next < pos.size() && args.kind() != Kind::kList)
    return Error::invalid_argument("not all arguments converted during string formatting");
  return out;
}

}  // namespace pipit::jinja
