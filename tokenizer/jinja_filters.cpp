// Built-in filters, as jinja2/filters.py defines them, plus transformers' tojson (json.dumps with ensure_ascii=False,
// optional indent/separators/sort_keys, no HTML escaping). Filters that return generators in Jinja2 (map, select,
// unique, batch, ...) return lists here; templates only iterate, join or list them.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interp.h"
#include "tokenizer/jinja_text.h"

namespace pipit::jinja {

Result<int64_t> arg_int(const Value* v, int64_t def, std::string_view what) {
  if (!v || v->is_none()) return def;
  if (v->is_int()) return v->as_int();
  if (v->kind() == Kind::kFloat) return static_cast<int64_t>(v->as_float());
  return Error::invalid_argument("'{}' must be an integer, not {}", what, type_name(*v));
}

Result<std::string> arg_str(const Value* v, std::string def, std::string_view what) {
  if (!v) return def;
  return to_str(*v);
}

bool arg_bool(const Value* v, bool def) { return v ? truthy(*v) : def; }

namespace {

using FilterFn = Result<Value> (*)(Interp&, const Value&, CallArgs&);

Value lower_if_str(const Value& v) { return v.is_string() ? Value::string(py_lower(v.str())) : v; }

// make_attrgetter: "a.b.0" looks up a, then b, then item 0, with getitem semantics.
Result<Value> get_path(const Value& item, const Value* attribute, const Value* def = nullptr) {
  if (!attribute || attribute->is_none()) return item;
  Value cur = item;
  if (attribute->is_int()) return get_item(cur, *attribute);
  std::string path = to_str(*attribute);
  size_t b = 0;
  while (true) {
    size_t dot = path.find('.', b);
    std::string part = path.substr(b, dot == std::string::npos ? std::string::npos : dot - b);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    PIPIT_ASSIGN_OR_RETURN(cur, get_item(cur, digits ? Value::integer(std::atoll(part.c_str())) : Value::string(part)));
    if (def && !def->is_none() && cur.is_undefined()) cur = *def;
    if (dot == std::string::npos) break;
    b = dot + 1;
  }
  return cur;
}

Result<ValueList> iter_items(Interp& in, const Value& v) {
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iterate(v));
  PIPIT_TRY(in.charge(static_cast<int64_t>(items.size())));
  return items;
}

Result<size_t> py_len(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return size_t{0};
    case Kind::kString: return cp_count(v.str());
    case Kind::kList: case Kind::kTuple: return v.items().size();
    case Kind::kDict: return v.dict().entries.size();
    default: return Error::invalid_argument("object of type '{}' has no len()", type_name(v));
  }
}

Result<Value> f_length(Interp&, const Value& v, CallArgs&) {
  PIPIT_ASSIGN_OR_RETURN(size_t n, py_len(v));
  return Value::integer(static_cast<int64_t>(n));
}

Result<Value> f_default(Interp&, const Value& v, CallArgs& a) {
  const Value* def = a.get(0, "default_value");
  if (v.is_undefined() || (arg_bool(a.get(1, "boolean"), false) && !truthy(v))) return def ? *def : Value::string("");
  return v;
}

Result<Value> f_trim(Interp&, const Value& v, CallArgs& a) {
  const Value* chars = a.get(0, "chars");
  std::string c = chars && !chars->is_none() ? to_str(*chars) : std::string();
  return Value::string(py_strip(to_str(v), chars && !chars->is_none() ? &c : nullptr, true, true));
}

Result<Value> f_upper(Interp&, const Value& v, CallArgs&) { return Value::string(py_upper(to_str(v))); }
Result<Value> f_lower(Interp&, const Value& v, CallArgs&) { return Value::string(py_lower(to_str(v))); }
Result<Value> f_capitalize(Interp&, const Value& v, CallArgs&) { return Value::string(py_capitalize(to_str(v))); }
Result<Value> f_string(Interp&, const Value& v, CallArgs&) { return Value::string(to_str(v)); }
Result<Value> f_safe(Interp&, const Value& v, CallArgs&) { return Value::string(to_str(v)); }  // Markup(str(v))

// Jinja's title: words start after runs of whitespace, '-', '(', '{', '[', '<'.
Result<Value> f_title(Interp&, const Value& v, CallArgs&) {
  std::string s = to_str(v), out;
  bool start = true;
  for (size_t i = 0; i < s.size();) {
    size_t b = i;
    char32_t c = next_cp(s, i);
    std::string ch = s.substr(b, i - b);
    bool sep = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) out += ch;
    else out += start ? py_upper(ch) : py_lower(ch);
    start = sep;
  }
  return Value::string(std::move(out));
}

Result<Value> f_escape(Interp&, const Value& v, CallArgs&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::string(std::move(out));
}

Result<Value> f_replace(Interp& in, const Value& v, CallArgs& a) {
  CallArgs m;
  PIPIT_ASSIGN_OR_RETURN(std::string old, arg_str(a.get(0, "old"), "", "old"));
  PIPIT_ASSIGN_OR_RETURN(std::string rep, arg_str(a.get(1, "new"), "", "new"));
  m.pos = {Value::string(old), Value::string(rep)};
  if (const Value* c = a.get(2, "count"); c && !c->is_none()) m.pos.push_back(*c);
  return call_method(in, Value::string(to_str(v)), "replace", m);
}

Result<Value> f_tojson(Interp& in, const Value& v, CallArgs& a) {
  JsonStyle st;
  st.ascii = arg_bool(a.get(0, "ensure_ascii"), false);
  const Value* indent = a.get(1, "indent");
  if (indent && !indent->is_none()) {
    st.pretty = true;
    if (indent->is_string()) {
      st.indent = indent->str();
    } else {
      PIPIT_ASSIGN_OR_RETURN(int64_t n, arg_int(indent, 0, "indent"));
      st.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 64)), ' ');
    }
    st.item_sep = ",";
  }
  if (const Value* sep = a.get(2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_seq() || sep->items().size() != 2) return Error::invalid_argument("tojson: separators must be a pair");
    st.item_sep = to_str(sep->items()[0]);
    st.key_sep = to_str(sep->items()[1]);
  }
  st.sort_keys = arg_bool(a.get(3, "sort_keys"), false);
  PIPIT_ASSIGN_OR_RETURN(std::string s, to_json(v, st));
  PIPIT_TRY(in.check_size(s.size()));
  return Value::string(std::move(s));
}

Result<Value> f_first(Interp& in, const Value& v, CallArgs&) {
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> f_last(Interp& in, const Value& v, CallArgs&) {
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Result<Value> f_list(Interp& in, const Value& v, CallArgs&) {
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  return Value::list(std::move(items));
}

Result<Value> f_reverse(Interp& in, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::vector<size_t> off = cp_offsets(v.str());
    std::string r;
    for (size_t k = off.size() - 1; k > 0; --k) r += v.str().substr(off[k - 1], off[k] - off[k - 1]);
    return Value::string(std::move(r));
  }
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Result<Value> f_join(Interp& in, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(std::string sep, arg_str(a.get(0, "d"), "", "d"));
  const Value* attribute = a.get(1, "attribute");
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    PIPIT_ASSIGN_OR_RETURN(Value x, get_path(items[i], attribute));
    if (i) out += sep;
    out += to_str(x);
    PIPIT_TRY(in.check_size(out.size()));
  }
  return Value::string(std::move(out));
}

Result<Value> f_map(Interp& in, const Value& v, CallArgs& a) {
  if (!truthy(v)) {  // Jinja2 iterates only `if value`
    a.kw_used.assign(a.kw.size(), true);
    return Value::list({});
  }
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  ValueList out;
  if (a.pos.empty()) {
    const Value* attribute = a.get(99, "attribute");
    if (!attribute) return Error::invalid_argument("map requires a filter argument");
    const Value* def = a.get(99, "default");
    PIPIT_TRY(a.check_all_used("map"));
    for (const Value& x : items) {
      PIPIT_ASSIGN_OR_RETURN(Value y, get_path(x, attribute, def));
      out.push_back(std::move(y));
    }
    return Value::list(std::move(out));
  }
  std::string name = to_str(a.pos[0]);
  for (const Value& x : items) {
    CallArgs sub;
    sub.pos.assign(a.pos.begin() + 1, a.pos.end());
    sub.kw = a.kw;
    PIPIT_ASSIGN_OR_RETURN(Value y, apply_filter(in, name, x, sub));
    out.push_back(std::move(y));
  }
  a.kw_used.assign(a.kw.size(), true);  // handed to the mapped filter
  return Value::list(std::move(out));
}

// select / reject / selectattr / rejectattr.
Result<Value> select_impl(Interp& in, const Value& v, CallArgs& a, bool keep_if, bool by_attr) {
  if (!truthy(v)) {
    a.kw_used.assign(a.kw.size(), true);
    return Value::list({});
  }
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  size_t off = by_attr ? 1 : 0;
  if (by_attr && a.pos.empty()) return Error::invalid_argument("Missing parameter for attribute name");
  ValueList out;
  for (const Value& x : items) {
    Value probe = x;
    if (by_attr) {
      PIPIT_ASSIGN_OR_RETURN(probe, get_path(x, &a.pos[0]));
    }
    bool hit;
    if (a.pos.size() > off) {
      CallArgs sub;
      sub.pos.assign(a.pos.begin() + off + 1, a.pos.end());
      sub.kw = a.kw;
      PIPIT_ASSIGN_OR_RETURN(hit, apply_test(in, to_str(a.pos[off]), probe, sub));
    } else {
      hit = truthy(probe);
    }
    if (hit == keep_if) out.push_back(x);
  }
  a.kw_used.assign(a.kw.size(), true);  // handed to the test
  return Value::list(std::move(out));
}
Result<Value> f_select(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }
Result<Value> f_reject(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Result<Value> f_selectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Result<Value> f_rejectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }

Result<Value> f_items(Interp&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) return Error::invalid_argument("Can only get item pairs from a mapping.");
  ValueList out;
  for (auto& [k, x] : v.dict().entries) out.push_back(Value::tuple({k, x}));
  return Value::list(std::move(out));
}

// Stable sort by keys compared as Python does; errors on unorderable values.
Status sort_by(ValueList& items, const std::vector<ValueList>& keys, bool reverse) {
  std::vector<size_t> idx(items.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  Status err = Status::ok();
  std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) {
    if (!err.is_ok()) return false;
    for (size_t k = 0; k < keys[x].size(); ++k) {
      Result<int> c = reverse ? compare(keys[y][k], keys[x][k], "<") : compare(keys[x][k], keys[y][k], "<");
      if (!c.is_ok()) {
        err = c.status();
        return false;
      }
      if (c.value() != 0) return c.value() < 0;
    }
    return false;
  });
  PIPIT_TRY(err);
  ValueList sorted;
  sorted.reserve(items.size());
  for (size_t i : idx) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
  return Status::ok();
}

Result<Value> f_sort(Interp& in, const Value& v, CallArgs& a) {
  bool reverse = arg_bool(a.get(0, "reverse"), false), cs = arg_bool(a.get(1, "case_sensitive"), false);
  const Value* attribute = a.get(2, "attribute");
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  std::vector<ValueList> keys;
  for (const Value& x : items) {
    ValueList k;
    if (attribute && attribute->is_string() && attribute->str().find(',') != std::string::npos) {
      std::string attrs = attribute->str();
      for (size_t b = 0;;) {
        size_t c = attrs.find(',', b);
        Value part = Value::string(attrs.substr(b, c == std::string::npos ? std::string::npos : c - b));
        PIPIT_ASSIGN_OR_RETURN(Value y, get_path(x, &part));
        k.push_back(cs ? y : lower_if_str(y));
        if (c == std::string::npos) break;
        b = c + 1;
      }
    } else {
      PIPIT_ASSIGN_OR_RETURN(Value y, get_path(x, attribute));
      k.push_back(cs ? y : lower_if_str(y));
    }
    keys.push_back(std::move(k));
  }
  PIPIT_TRY(sort_by(items, keys, reverse));
  return Value::list(std::move(items));
}

Result<Value> f_dictsort(Interp&, const Value& v, CallArgs& a) {
  if (!v.is_dict()) return Error::invalid_argument("dictsort expects a mapping, got {}", type_name(v));
  bool cs = arg_bool(a.get(0, "case_sensitive"), false);
  PIPIT_ASSIGN_OR_RETURN(std::string by, arg_str(a.get(1, "by"), "key", "by"));
  bool reverse = arg_bool(a.get(2, "reverse"), false);
  if (by != "key" && by != "value") return Error::invalid_argument("You can only sort by either \"key\" or \"value\"");
  ValueList items;
  std::vector<ValueList> keys;
  for (auto& [k, x] : v.dict().entries) {
    items.push_back(Value::tuple({k, x}));
    const Value& key = by == "key" ? k : x;
    keys.push_back({cs ? key : lower_if_str(key)});
  }
  PIPIT_TRY(sort_by(items, keys, reverse));
  return Value::list(std::move(items));
}

Result<Value> f_unique(Interp& in, const Value& v, CallArgs& a) {
  bool cs = arg_bool(a.get(0, "case_sensitive"), false);
  const Value* attribute = a.get(1, "attribute");
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  ValueList out, seen;
  for (const Value& x : items) {
    PIPIT_ASSIGN_OR_RETURN(Value k, get_path(x, attribute));
    if (!cs) k = lower_if_str(k);
    bool dup = false;
    for (const Value& s : seen) dup = dup || equals(s, k);
    if (dup) continue;
    PIPIT_TRY(in.charge(static_cast<int64_t>(seen.size())));
    seen.push_back(k);
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Result<Value> min_max(Interp& in, const Value& v, CallArgs& a, bool want_max) {
  bool cs = arg_bool(a.get(0, "case_sensitive"), false);
  const Value* attribute = a.get(1, "attribute");
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    PIPIT_ASSIGN_OR_RETURN(Value k, get_path(items[i], attribute));
    if (!cs) k = lower_if_str(k);
    if (i == 0) {
      best_key = k;
      continue;
    }
    PIPIT_ASSIGN_OR_RETURN(int c, compare(k, best_key, want_max ? ">" : "<"));
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}
Result<Value> f_min(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }
Result<Value> f_max(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }

Result<Value> f_sum(Interp& in, const Value& v, CallArgs& a) {
  const Value* attribute = a.get(0, "attribute");
  const Value* start = a.get(1, "start");
  Value acc = start ? *start : Value::integer(0);
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  for (const Value& x : items) {
    PIPIT_ASSIGN_OR_RETURN(Value y, get_path(x, attribute));
    PIPIT_ASSIGN_OR_RETURN(acc, binary_op("+", acc, y, in));
  }
  return acc;
}

Result<Value> f_abs(Interp&, const Value& v, CallArgs&) {
  if (v.kind() == Kind::kFloat) return Value::number(std::fabs(v.as_float()));
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) return Error::out_of_range("integer overflow in abs");
    return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  return Error::invalid_argument("bad operand type for abs(): '{}'", type_name(v));
}

// Python float(str): surrounding whitespace allowed, also "inf", "nan", "1_000.5".
bool parse_py_float(const std::string& text, double* out) {
  std::string s = py_strip(text, nullptr, true, true), clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && isdigit(static_cast<unsigned char>(s[i - 1])) &&
        isdigit(static_cast<unsigned char>(s[i + 1])))
      continue;
    clean += s[i];
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return false;
  std::string low = py_lower(clean);
  std::string_view body = low;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  if (body != "inf" && body != "infinity" && body != "nan" && body.find_first_not_of("0123456789.e+-") != std::string::npos)
    return false;
  char* end = nullptr;
  *out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size();
}

Result<Value> f_int(Interp&, const Value& v, CallArgs& a) {
  if (v.is_undefined()) return undefined_error(v);  // int(Undefined) raises, not caught by the filter
  PIPIT_ASSIGN_OR_RETURN(int64_t def, arg_int(a.get(0, "default"), 0, "default"));
  PIPIT_ASSIGN_OR_RETURN(int64_t base, arg_int(a.get(1, "base"), 10, "base"));
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.kind() == Kind::kFloat) {
    double f = v.as_float();
    if (std::isnan(f) || std::isinf(f) || std::fabs(f) > 9.2e18) return Value::integer(def);
    return Value::integer(static_cast<int64_t>(f));
  }
  if (v.is_string()) {
    std::string s = py_strip(v.str(), nullptr, true, true), clean;
    for (char c : s)
      if (c != '_') clean += c;
    std::string digits = clean;
    bool neg = false;
    if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
      neg = digits[0] == '-';
      digits.erase(0, 1);
    }
    if (base == 16 && (digits.rfind("0x", 0) == 0 || digits.rfind("0X", 0) == 0)) digits.erase(0, 2);
    if (base == 8 && (digits.rfind("0o", 0) == 0 || digits.rfind("0O", 0) == 0)) digits.erase(0, 2);
    if (base == 2 && (digits.rfind("0b", 0) == 0 || digits.rfind("0B", 0) == 0)) digits.erase(0, 2);
    if (!digits.empty() && base >= 2 && base <= 36) {
      char* end = nullptr;
      errno = 0;
      long long x = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
      if (end == digits.c_str() + digits.size() && errno == 0 && isalnum(static_cast<unsigned char>(digits[0])))
        return Value::integer(neg ? -x : x);
    }
    double f;
    if (parse_py_float(v.str(), &f) && !std::isnan(f) && !std::isinf(f) && std::fabs(f) < 9.2e18)
      return Value::integer(static_cast<int64_t>(f));
  }
  return Value::integer(def);
}

Result<Value> f_float(Interp&, const Value& v, CallArgs& a) {
  if (v.is_undefined()) return undefined_error(v);
  const Value* def = a.get(0, "default");
  if (v.is_number()) return Value::number(v.as_float());
  double f;
  if (v.is_string() && parse_py_float(v.str(), &f)) return Value::number(f);
  return def ? (def->is_number() ? Value::number(def->as_float()) : *def) : Value::number(0.0);
}

Result<Value> f_round(Interp&, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(int64_t precision, arg_int(a.get(0, "precision"), 0, "precision"));
  PIPIT_ASSIGN_OR_RETURN(std::string method, arg_str(a.get(1, "method"), "common", "method"));
  if (method != "common" && method != "ceil" && method != "floor")
    return Error::invalid_argument("method must be common, ceil or floor");
  if (!v.is_number()) return Error::invalid_argument("type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    if (v.is_int()) return Value::integer(v.as_int());
    char buf[512];  // printf rounds the exact binary value half-to-even, as Python's round() does
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), v.as_float());
    return Value::number(std::strtod(buf, nullptr));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_float() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Result<Value> f_batch(Interp& in, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(int64_t n, arg_int(a.get(0, "linecount"), 1, "linecount"));
  if (n <= 0) return Error::invalid_argument("batch size must be positive");
  const Value* fill = a.get(1, "fill_with");
  PIPIT_ASSIGN_OR_RETURN(ValueList items, iter_items(in, v));
  ValueList out, cur;
  for (Value& x : items) {
    cur.push_back(std::move(x));
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Result<Value> f_slice(Interp& in, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(int64_t slices, arg_int(a.get(0, "slices"), 1, "slices"));
  if (slices <= 0 || slices > 100000) return Error::invalid_argument("slice count must be positive");
  const Value* fill = a.get(1, "fill_with");
  PIPIT_ASSIGN_OR_RETURN(ValueList seq, iter_items(in, v));
  int64_t len = static_cast<int64_t>(seq.size()), per = len / slices, extra = len % slices, offset = 0;
  ValueList out;
  for (int64_t k = 0; k < slices; ++k) {
    int64_t start = offset + k * per;
    if (k < extra) ++offset;
    int64_t end = offset + (k + 1) * per;
    ValueList part(seq.begin() + start, seq.begin() + end);
    if (fill && !fill->is_none() && k >= extra) part.push_back(*fill);
    out.push_back(Value::list(std::move(part)));
  }
  return Value::list(std::move(out));
}

Result<Value> f_indent(Interp&, const Value& v, CallArgs& a) {
  if (v.is_undefined()) return undefined_error(v);  // Jinja2 does `s += "\n"` on its input
  if (!v.is_string()) return Error::invalid_argument("indent: expected a string, got {}", type_name(v));
  const Value* w = a.get(0, "width");
  std::string ind = w && w->is_string() ? w->str() : std::string(static_cast<size_t>(std::clamp<int64_t>(w && w->is_int() ? w->as_int() : 4, 0, 1000)), ' ');
  bool first = arg_bool(a.get(1, "first"), false), blank = arg_bool(a.get(2, "blank"), false);
  std::string s = to_str(v) + "\n";  // Jinja's quirk for splitlines
  ValueList lines;  // s.splitlines()
  size_t b = 0, i = 0;
  while (i < s.size()) {
    size_t st = i;
    char32_t c = next_cp(s, i);
    if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
        c == 0x2028 || c == 0x2029) {
      if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
      lines.push_back(Value::string(s.substr(b, st - b)));
      b = i;
    }
  }
  if (b < s.size()) lines.push_back(Value::string(s.substr(b)));
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k].str();
  } else {
    for (size_t k = 0; k < lines.size(); ++k) {
      const std::string& line = lines[k].str();
      if (k == 0) rv = line;
      else rv += "\n" + (line.empty() ? line : ind + line);
    }
  }
  if (first) rv = ind + rv;
  return Value::string(std::move(rv));
}

Result<Value> f_center(Interp& in, const Value& v, CallArgs& a) {
  CallArgs m;
  PIPIT_ASSIGN_OR_RETURN(int64_t width, arg_int(a.get(0, "width"), 80, "width"));
  m.pos = {Value::integer(width)};
  return call_method(in, Value::string(to_str(v)), "center", m);
}

Result<Value> f_wordcount(Interp&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    char32_t c = next_cp(s, i);
    bool w = c == '_' || py_is_alpha(c) || py_is_digit(c) || (c < 0x80 && isalnum(static_cast<int>(c)));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Result<Value> f_format(Interp&, const Value& v, CallArgs& a) {
  Value args;
  if (!a.kw.empty()) {
    auto d = std::make_shared<Dict>();
    for (auto& [k, x] : a.kw) d->entries.emplace_back(Value::string(k), x);
    args = Value::dict(std::move(d));
  } else {
    args = Value::tuple(a.pos);
  }
  a.kw_used.assign(a.kw.size(), true);
  PIPIT_ASSIGN_OR_RETURN(std::string s, percent_format(to_str(v), args));
  return Value::string(std::move(s));
}

Result<Value> f_truncate(Interp&, const Value& v, CallArgs& a) {
  if (!v.is_string()) {  // Jinja2 applies len() and slicing to whatever it gets
    PIPIT_ASSIGN_OR_RETURN(size_t n, py_len(v));
    PIPIT_ASSIGN_OR_RETURN(int64_t length, arg_int(a.get(0, "length"), 255, "length"));
    PIPIT_ASSIGN_OR_RETURN(int64_t leeway, arg_int(a.get(3, "leeway"), 5, "leeway"));
    a.kw_used.assign(a.kw.size(), true);
    if (static_cast<int64_t>(n) <= length + leeway) return v;
    return Error::invalid_argument("truncate: cannot shorten a {}", type_name(v));
  }
  std::string s = v.str();
  PIPIT_ASSIGN_OR_RETURN(int64_t length, arg_int(a.get(0, "length"), 255, "length"));
  bool killwords = arg_bool(a.get(1, "killwords"), false);
  PIPIT_ASSIGN_OR_RETURN(std::string end, arg_str(a.get(2, "end"), "...", "end"));
  PIPIT_ASSIGN_OR_RETURN(int64_t leeway, arg_int(a.get(3, "leeway"), 5, "leeway"));
  std::vector<size_t> off = cp_offsets(s);
  int64_t n = static_cast<int64_t>(off.size()) - 1, keep = std::max<int64_t>(0, length - static_cast<int64_t>(cp_count(end)));
  if (n <= length + leeway) return Value::string(s);
  std::string head = s.substr(0, off[std::min(keep, n)]);
  if (!killwords) {
    size_t sp = head.rfind(' ');
    if (sp != std::string::npos) head.resize(sp);
  }
  return Value::string(head + end);
}

Result<Value> f_attr(Interp&, const Value& v, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(std::string name, arg_str(a.get(0, "name"), "", "name"));
  return get_attr(v, name);
}

const std::map<std::string_view, FilterFn>& filters() {
  static const std::map<std::string_view, FilterFn> kFilters = {
      {"abs", f_abs},         {"attr", f_attr},           {"batch", f_batch},         {"capitalize", f_capitalize},
      {"center", f_center},   {"count", f_length},        {"d", f_default},           {"default", f_default},
      {"dictsort", f_dictsort}, {"e", f_escape},          {"escape", f_escape},       {"first", f_first},
      {"float", f_float},     {"forceescape", f_escape},  {"format", f_format},       {"indent", f_indent},
      {"int", f_int},         {"items", f_items},         {"join", f_join},           {"last", f_last},
      {"length", f_length},   {"list", f_list},           {"lower", f_lower},         {"map", f_map},
      {"max", f_max},         {"min", f_min},             {"reject", f_reject},       {"rejectattr", f_rejectattr},
      {"replace", f_replace}, {"reverse", f_reverse},     {"round", f_round},         {"safe", f_safe},
      {"select", f_select},   {"selectattr", f_selectattr}, {"slice", f_slice},       {"sort", f_sort},
      {"string", f_string},   {"sum", f_sum},             {"title", f_title},         {"tojson", f_tojson},
      {"trim", f_trim},       {"truncate", f_truncate},   {"unique", f_unique},       {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return kFilters;
}

}  // namespace

bool has_filter(std::string_view name) { return filters().count(name) > 0; }

Result<Value> apply_filter(Interp& in, std::string_view name, const Value& v, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) return Error::invalid_argument("No filter named '{}'.", name);
  // Most filters stringify or iterate their input; Undefined is fine for those (prints "", iterates empty), as in
  // Jinja2. Arithmetic-like ones fail inside.
  PIPIT_ASSIGN_OR_RETURN(Value r, it->second(in, v, args));
  PIPIT_TRY(args.check_all_used(name));
  return r;
}

}  // namespace pipit::jinja
