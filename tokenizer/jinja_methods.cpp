// Python methods that chat templates call on values: str (split, strip, startswith, replace, format, ...),
// dict (items, keys, values, get), list/tuple (count, index), and the loop object (its attributes, cycle, changed).
// Methods that would modify a list or dict are refused, as Jinja2's ImmutableSandboxedEnvironment refuses them.
#include <algorithm>
#include <cstdio>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interp.h"
#include "tokenizer/jinja_text.h"

namespace pipit::jinja {

namespace {

constexpr std::string_view kStrMethods[] = {
    "upper", "lower", "title", "capitalize", "swapcase", "casefold", "strip", "lstrip", "rstrip", "split", "rsplit",
    "splitlines", "startswith", "endswith", "replace", "find", "rfind", "index", "rindex", "count", "join", "format",
    "isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "isupper", "islower", "istitle", "zfill",
    "center", "ljust", "rjust", "removeprefix", "removesuffix", "partition", "rpartition"};
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get", "copy"};
constexpr std::string_view kListMethods[] = {"count", "index", "copy"};
constexpr std::string_view kUnsafeList[] = {"append", "reverse", "insert", "sort", "extend", "remove", "pop", "clear"};
constexpr std::string_view kUnsafeDict[] = {"clear", "pop", "popitem", "setdefault", "update"};

template <size_t N>
bool in(const std::string_view (&set)[N], std::string_view name) {
  return std::find(std::begin(set), std::end(set), name) != std::end(set);
}

Result<std::string> str_arg(const Value* v, std::string_view method) {
  if (!v) return Error::invalid_argument("{}() missing required argument", method);
  if (!v->is_string()) return Error::invalid_argument("{}() argument must be str, not {}", method, type_name(*v));
  return v->str();
}

// Code-point index of a byte offset.
int64_t cp_index(const std::string& s, size_t byte) { return static_cast<int64_t>(cp_count(std::string_view(s).substr(0, byte))); }

// s[start:end] by code points (Python's optional start/end arguments of find, count, startswith...).
std::string window(const std::string& s, const Value* start, const Value* end, size_t* byte_offset) {
  *byte_offset = 0;
  if ((!start || start->is_none()) && (!end || end->is_none())) return s;
  std::vector<size_t> off = cp_offsets(s);
  int64_t n = static_cast<int64_t>(off.size()) - 1;
  auto fix = [&](const Value* v, int64_t def) {
    if (!v || !v->is_int()) return def;
    int64_t i = v->as_int();
    if (i < 0) i = std::max<int64_t>(0, i + n);
    return std::min(i, n);
  };
  int64_t b = fix(start, 0), e = fix(end, n);
  if (e < b) e = b;
  *byte_offset = off[b];
  return s.substr(off[b], off[e] - off[b]);
}

ValueList split_ws(const std::string& s, int64_t maxsplit, bool from_right) {
  std::vector<std::pair<size_t, size_t>> words;  // byte ranges
  std::vector<size_t> off = cp_offsets(s);
  size_t n = off.size() - 1;
  auto space = [&](size_t k) {
    size_t i = off[k];
    return is_py_space(next_cp(s, i));
  };
  ValueList out;
  if (!from_right) {
    size_t k = 0;
    while (k < n) {
      while (k < n && space(k)) ++k;
      if (k == n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = n;
        while (e > k && space(e - 1)) --e;
        out.push_back(Value::string(s.substr(off[k], off[e] - off[k])));
        break;
      }
      size_t b = k;
      while (k < n && !space(k)) ++k;
      out.push_back(Value::string(s.substr(off[b], off[k] - off[b])));
    }
    return out;
  }
  size_t k = n;
  while (k > 0) {
    while (k > 0 && space(k - 1)) --k;
    if (k == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t b = 0;
      while (b < k && space(b)) ++b;
      out.push_back(Value::string(s.substr(off[b], off[k] - off[b])));
      break;
    }
    size_t e = k;
    while (k > 0 && !space(k - 1)) --k;
    out.push_back(Value::string(s.substr(off[k], off[e] - off[k])));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

ValueList split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  ValueList out;
  if (!from_right) {
    size_t b = 0, p;
    while ((maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) && (p = s.find(sep, b)) != std::string::npos) {
      out.push_back(Value::string(s.substr(b, p - b)));
      b = p + sep.size();
    }
    out.push_back(Value::string(s.substr(b)));
    return out;
  }
  size_t e = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (e < sep.size()) break;
    size_t p = s.rfind(sep, e - sep.size());
    if (p == std::string::npos) break;
    out.push_back(Value::string(s.substr(p + sep.size(), e - p - sep.size())));
    e = p;
  }
  out.push_back(Value::string(s.substr(0, e)));
  std::reverse(out.begin(), out.end());
  return out;
}

ValueList splitlines(const std::string& s, bool keepends) {
  ValueList out;
  size_t b = 0, i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = next_cp(s, i);
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
               c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    out.push_back(Value::string(s.substr(b, (keepends ? i : start) - b)));
    b = i;
  }
  if (b < s.size()) out.push_back(Value::string(s.substr(b)));
  return out;
}

std::string replace_all(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `rep` around every code point
    int64_t done = 0;
    size_t i = 0;
    while (i <= s.size()) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (i == s.size()) break;
      size_t start = i;
      next_cp(s, i);
      out += s.substr(start, i - start);
    }
    return out;
  }
  size_t b = 0, p;
  int64_t done = 0;
  while ((count < 0 || done < count) && (p = s.find(old, b)) != std::string::npos) {
    out += s.substr(b, p - b);
    out += rep;
    b = p + old.size();
    ++done;
  }
  return out + s.substr(b);
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, char align) {
  int64_t len = static_cast<int64_t>(cp_count(s));
  if (width <= len) return s;
  // '^' is format()'s centering (extra fill on the right); 'c' is str.center's (extra on the left for odd width).
  int64_t total = width - len;
  int64_t left = align == '<' ? 0 : align == '>' ? total : align == '^' ? total / 2 : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

// One "{...}" replacement field of str.format: [[fill]align][sign][0][width][.precision][type].
Result<std::string> format_field(const Value& v, std::string_view spec) {
  if (spec.empty()) return to_str(v);
  std::string fill = " ";
  char align = 0;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (spec.size() >= 2 && is_align(spec[1])) {
    fill = std::string(1, spec[0]);
    align = spec[1];
    i = 2;
  } else if (is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  std::string sign;
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  // Width and precision are bounded as they are read: '{:>999999999}' padded to a gigabyte (1.9 GB, 16 s) before
  // any output limit saw it, and more digits overflowed the integers. No template pads a field past 1 MiB.
  constexpr int64_t kMaxWidth = int64_t(1) << 20, kMaxPrecision = 1000;
  int64_t width = 0;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
    width = width * 10 + (spec[i++] - '0');
    if (width > kMaxWidth) return Error::out_of_range("format width in '{}' is over {}", spec, kMaxWidth);
  }
  int prec = -1;
  if (i < spec.size() && spec[i] == '.') {
    prec = 0;
    ++i;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
      prec = prec * 10 + (spec[i++] - '0');
      if (prec > kMaxPrecision) return Error::out_of_range("format precision in '{}' is over {}", spec, kMaxPrecision);
    }
  }
  char type = i < spec.size() ? spec[i++] : 0;
  if (i != spec.size()) return Error::invalid_argument("Invalid format specifier '{}'", spec);
  std::string body;
  char buf[512];
  if (v.is_number() && (type == 'f' || type == 'F' || type == 'e' || type == 'g' || type == '%' || (prec >= 0 && type == 0))) {
    double x = v.as_float() * (type == '%' ? 100 : 1);
    std::snprintf(buf, sizeof buf, ("%" + sign + "." + std::to_string(prec < 0 ? 6 : prec) + (type == '%' || type == 0 ? 'f' : type)).c_str(), x);
    body = std::string(buf) + (type == '%' ? "%" : "");
  } else if (v.is_int() && (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b' || type == 0)) {
    if (type == 'b') {
      uint64_t u = v.as_int() < 0 ? -static_cast<uint64_t>(v.as_int()) : v.as_int();
      do { body.insert(body.begin(), static_cast<char>('0' + (u & 1))); u >>= 1; } while (u);
      if (v.as_int() < 0) body.insert(body.begin(), '-');
    } else {
      std::snprintf(buf, sizeof buf, ("%" + sign + "ll" + (type == 0 ? 'd' : type)).c_str(), static_cast<long long>(v.as_int()));
      body = buf;
    }
  } else if (type == 0 || type == 's') {
    body = to_str(v);
    if (prec >= 0) {
      std::vector<size_t> off = cp_offsets(body);
      body.resize(off[std::min<size_t>(prec, off.size() - 1)]);
    }
  } else {
    return Error::invalid_argument("Unknown format code '{}' for object of type '{}'", type, type_name(v));
  }
  if (!align) align = v.is_number() ? '>' : '<';
  if (align == '=') {
    size_t sign_len = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
    std::string head = body.substr(0, sign_len), tail = body.substr(sign_len);
    return head + pad(tail, width - static_cast<int64_t>(sign_len), fill, '>');
  }
  return pad(body, width, fill, align);
}

Result<Value> str_format(const std::string& fmt, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else return Error::invalid_argument("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) return Error::invalid_argument("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conv;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field.resize(bang);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.pos.size()) return Error::invalid_argument("Replacement index {} out of range", auto_index);
      v = &args.pos[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t k = std::stoul(field);
      if (k >= args.pos.size()) return Error::invalid_argument("Replacement index {} out of range", k);
      v = &args.pos[k];
    } else {
      for (auto& [name, x] : args.kw)
        if (name == field) v = &x;
      if (!v) return Error::invalid_argument("KeyError: '{}'", field);
    }
    Value shown = conv == "r" ? Value::string(to_repr(*v)) : conv == "s" ? Value::string(to_str(*v)) : *v;
    PIPIT_ASSIGN_OR_RETURN(std::string piece, format_field(shown, spec));
    out += piece;
  }
  return Value::string(std::move(out));
}

Result<Value> call_str_method(Interp& in, const std::string& s, std::string_view name, CallArgs& a) {
  auto opt_str = [&](size_t i, std::string_view kw) -> Result<const std::string*> {
    const Value* v = a.get(i, kw);
    if (!v || v->is_none()) return static_cast<const std::string*>(nullptr);
    if (!v->is_string()) return Error::invalid_argument("{} arg must be None or str", name);
    return &v->str();
  };
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "lower" || name == "casefold") return Value::string(py_lower(s));
  if (name == "title") return Value::string(py_str_title(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      size_t st = i;
      next_cp(s, i);
      std::string ch = s.substr(st, i - st), up = py_upper(ch);
      out += up != ch ? up : py_lower(ch);
    }
    return Value::string(std::move(out));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    PIPIT_ASSIGN_OR_RETURN(const std::string* chars, opt_str(0, "chars"));
    return Value::string(py_strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    PIPIT_ASSIGN_OR_RETURN(const std::string* sep, opt_str(0, "sep"));
    PIPIT_ASSIGN_OR_RETURN(int64_t maxsplit, arg_int(a.get(1, "maxsplit"), -1, "maxsplit"));
    if (sep && sep->empty()) return Error::invalid_argument("empty separator");
    ValueList parts = sep ? split_sep(s, *sep, maxsplit, name == "rsplit") : split_ws(s, maxsplit, name == "rsplit");
    PIPIT_TRY(in.check_items(parts.size()));
    return Value::list(std::move(parts));
  }
  if (name == "splitlines") return Value::list(splitlines(s, arg_bool(a.get(0, "keepends"), false)));
  if (name == "startswith" || name == "endswith") {
    const Value* p = a.get(0, "prefix");
    if (!p) return Error::invalid_argument("{}() takes at least 1 argument (0 given)", name);
    size_t off;
    std::string w = window(s, a.get(1, "start"), a.get(2, "end"), &off);
    ValueList options = p->kind() == Kind::kTuple ? p->items() : ValueList{*p};
    for (const Value& o : options) {
      if (!o.is_string())
        return Error::invalid_argument("{} first arg must be str or a tuple of str, not {}", name, type_name(o));
      const std::string& x = o.str();
      bool hit = x.size() <= w.size() &&
                 (name == "startswith" ? w.compare(0, x.size(), x) == 0 : w.compare(w.size() - x.size(), x.size(), x) == 0);
      if (hit) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "replace") {
    PIPIT_ASSIGN_OR_RETURN(std::string old, str_arg(a.get(0, "old"), name));
    PIPIT_ASSIGN_OR_RETURN(std::string rep, str_arg(a.get(1, "new"), name));
    PIPIT_ASSIGN_OR_RETURN(int64_t count, arg_int(a.get(2, "count"), -1, "count"));
    std::string r = replace_all(s, old, rep, count);
    PIPIT_TRY(in.check_size(r.size()));
    return Value::string(std::move(r));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    PIPIT_ASSIGN_OR_RETURN(std::string sub, str_arg(a.get(0, "sub"), name));
    size_t off;
    std::string w = window(s, a.get(1, "start"), a.get(2, "end"), &off);
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(cp_count(w)) + 1);
      int64_t n = 0;
      for (size_t p = w.find(sub); p != std::string::npos; p = w.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t p = name[0] == 'r' ? w.rfind(sub) : w.find(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") return Error::invalid_argument("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, off + p));
  }
  if (name == "join") {
    const Value* seq = a.get(0, "iterable");
    if (!seq) return Error::invalid_argument("join() takes exactly one argument (0 given)");
    PIPIT_ASSIGN_OR_RETURN(ValueList items, iterate(*seq));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        return Error::invalid_argument("sequence item {}: expected str instance, {} found", i, type_name(items[i]));
      if (i) out += s;
      out += items[i].str();
      PIPIT_TRY(in.check_size(out.size()));
    }
    return Value::string(std::move(out));
  }
  if (name == "format") {
    a.kw_used.assign(a.kw.size(), true);
    return str_format(s, a);
  }
  if (name.substr(0, 2) == "is") {
    if (s.empty()) return Value::boolean(false);
    bool all = true, any_cased = false, any_upper = false, any_lower = false;
    for (size_t i = 0; i < s.size();) {
      char32_t c = next_cp(s, i);
      std::string ch;
      append_utf8(ch, c);
      bool up = py_lower(ch) != ch, low = py_upper(ch) != ch;
      any_upper |= up;
      any_lower |= low;
      any_cased |= up || low;
      if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") all &= py_is_digit(c);
      else if (name == "isalpha") all &= py_is_alpha(c);
      else if (name == "isalnum") all &= py_is_alpha(c) || py_is_digit(c);
      else if (name == "isspace") all &= is_py_space(c);
    }
    if (name == "isupper") return Value::boolean(any_upper && !any_lower);
    if (name == "islower") return Value::boolean(any_lower && !any_upper);
    if (name == "istitle") return Value::boolean(any_cased && py_str_title(s) == s);
    return Value::boolean(all);
  }
  if (name == "zfill") {
    PIPIT_ASSIGN_OR_RETURN(int64_t width, arg_int(a.get(0, "width"), 0, "width"));
    PIPIT_TRY(in.check_size(static_cast<size_t>(std::max<int64_t>(0, width))));
    bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    std::string body = s.substr(sign ? 1 : 0);
    int64_t fill = width - static_cast<int64_t>(cp_count(s));
    return Value::string((sign ? s.substr(0, 1) : "") + std::string(std::max<int64_t>(0, fill), '0') + body);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    PIPIT_ASSIGN_OR_RETURN(int64_t width, arg_int(a.get(0, "width"), 0, "width"));
    PIPIT_ASSIGN_OR_RETURN(std::string fill, arg_str(a.get(1, "fillchar"), " ", "fillchar"));
    PIPIT_TRY(in.check_size(static_cast<size_t>(std::max<int64_t>(0, width))));
    return Value::string(pad(s, width, fill, name == "center" ? 'c' : name == "ljust" ? '<' : '>'));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    PIPIT_ASSIGN_OR_RETURN(std::string x, str_arg(a.get(0, "prefix"), name));
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value::string(s.substr(x.size()));
    if (name == "removesuffix" && !x.empty() && x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value::string(s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (name == "partition" || name == "rpartition") {
    PIPIT_ASSIGN_OR_RETURN(std::string sep, str_arg(a.get(0, "sep"), name));
    if (sep.empty()) return Error::invalid_argument("empty separator");
    size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos)
      return Value::tuple(name == "partition" ? ValueList{Value::string(s), Value::string(""), Value::string("")}
                                              : ValueList{Value::string(""), Value::string(""), Value::string(s)});
    return Value::tuple({Value::string(s.substr(0, p)), Value::string(sep), Value::string(s.substr(p + sep.size()))});
  }
  return Error::invalid_argument("'str' object has no attribute '{}'", name);
}

}  // namespace

bool is_method(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Kind::kString: return in(kStrMethods, name);
    case Kind::kDict: return in(kDictMethods, name);
    case Kind::kList: return in(kListMethods, name);
    case Kind::kTuple: return name == "count" || name == "index";
    case Kind::kLoop: return name == "cycle" || name == "changed";
    default: return false;
  }
}

bool is_unsafe_method(const Value& obj, std::string_view name) {
  if (obj.kind() == Kind::kList) return in(kUnsafeList, name);
  if (obj.kind() == Kind::kDict) return in(kUnsafeDict, name);
  return false;
}

Value bound_method(const Value& obj, std::string_view name) {
  auto c = std::make_shared<Callable>();
  c->name = std::string(name);
  c->fn = [obj, n = std::string(name)](Interp& in, CallArgs& args) { return call_method(in, obj, n, args); };
  return Value::callable(std::move(c));
}

Result<Value> call_method(Interp& in, const Value& obj, std::string_view name, CallArgs& a) {
  switch (obj.kind()) {
    case Kind::kString: {
      PIPIT_ASSIGN_OR_RETURN(Value r, call_str_method(in, obj.str(), name, a));
      PIPIT_TRY(a.check_all_used(name));
      return r;
    }
    case Kind::kDict: {
      const Dict& d = obj.dict();
      if (name == "get") {
        const Value* key = a.get(0, "key");
        if (!key) return Error::invalid_argument("get expected at least 1 argument, got 0");
        const Value* found = d.find(*key);
        if (found) return *found;
        const Value* def = a.get(1, "default");
        return def ? *def : Value::none();
      }
      if (name == "copy") {
        auto c = std::make_shared<Dict>(d);
        return Value::dict(std::move(c));
      }
      ValueList out;
      for (auto& [k, v] : d.entries) {
        if (name == "keys") out.push_back(k);
        else if (name == "values") out.push_back(v);
        else out.push_back(Value::tuple({k, v}));
      }
      return Value::list(std::move(out));
    }
    case Kind::kList: case Kind::kTuple: {
      if (name == "copy") return Value::list(obj.items());
      const Value* x = a.get(0, "value");
      if (!x) return Error::invalid_argument("{}() takes exactly one argument (0 given)", name);
      int64_t count = 0;
      for (size_t i = 0; i < obj.items().size(); ++i) {
        if (!equals(obj.items()[i], *x)) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(i));
        ++count;
      }
      if (name == "index") return Error::invalid_argument("{} is not in list", to_repr(*x));
      return Value::integer(count);
    }
    case Kind::kLoop: {
      LoopState& l = obj.loop();
      if (name == "cycle") {
        if (a.pos.empty()) return Error::invalid_argument("no items for cycling given");
        return a.pos[l.index0 % a.pos.size()];
      }
      Value now = Value::tuple(a.pos);
      bool changed = !l.has_changed || !equals(now, l.last_changed);
      l.has_changed = true;
      l.last_changed = now;
      return Value::boolean(changed);
    }
    default:
      return Error::invalid_argument("'{}' object has no attribute '{}'", type_name(obj), name);
  }
}

Value loop_attr(const Value& loop, std::string_view name) {
  const LoopState& l = loop.loop();
  int64_t n = static_cast<int64_t>(l.items->size()), i = static_cast<int64_t>(l.index0);
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(l.depth0 + 1);
  if (name == "depth0") return Value::integer(l.depth0);
  if (name == "previtem") return i > 0 ? (*l.items)[i - 1] : Value::undefined("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? (*l.items)[i + 1] : Value::undefined("there is no next item");
  if (name == "cycle" || name == "changed") return bound_method(loop, name);
  return Value::undefined("'jinja2.runtime.LoopContext object' has no attribute '" + std::string(name) + "'");
}

}  // namespace pipit::jinja
