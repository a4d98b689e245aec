// Values of the Jinja interpreter: construction, Python truthiness/equality/ordering, str()/repr() and the
// json.dumps used by transformers' tojson filter. See jinja_value.h.
#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <cmath>

#include "tokenizer/jinja_text.h"

namespace pipit::jinja {

namespace {
struct ListData {
  ValueList items;
  int depth = 1;
};

int child_depth(const Value& v) { return v.nesting(); }

int list_depth(const ValueList& items) {
  int d = 0;
  for (const Value& v : items) d = std::max(d, child_depth(v));
  return d + 1;
}
}  // namespace

Value Value::undefined(std::string hint) {
  Value v(Kind::kUndefined);
  if (!hint.empty()) v.p_ = std::make_shared<std::string>(std::move(hint));
  return v;
}
Value Value::string(std::string s) {
  Value v(Kind::kString);
  v.p_ = std::make_shared<std::string>(std::move(s));
  return v;
}
Value Value::list(ValueList items) {
  Value v(Kind::kList);
  int d = list_depth(items);
  v.p_ = std::make_shared<ListData>(ListData{std::move(items), d});
  return v;
}
Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}
Value Value::dict(std::shared_ptr<Dict> d) {
  Value v(Kind::kDict);
  v.p_ = std::move(d);
  return v;
}
Value Value::ns(std::shared_ptr<Dict> d) {
  Value v(Kind::kNamespace);
  v.p_ = std::move(d);
  return v;
}
Value Value::callable(std::shared_ptr<Callable> c) {
  Value v(Kind::kCallable);
  v.p_ = std::move(c);
  return v;
}
Value Value::loop(std::shared_ptr<LoopState> l) {
  Value v(Kind::kLoop);
  v.p_ = std::move(l);
  return v;
}

const ValueList& Value::items() const { return static_cast<const ListData*>(p_.get())->items; }

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  return p_ ? *static_cast<const std::string*>(p_.get()) : kEmpty;
}

int Value::nesting() const {
  switch (kind_) {
    case Kind::kList: case Kind::kTuple: return static_cast<const ListData*>(p_.get())->depth;
    case Kind::kDict: case Kind::kNamespace: return dict().depth;
    default: return 0;
  }
}

Result<Value> make_list(ValueList items) {
  Value v = Value::list(std::move(items));
  if (v.nesting() > kMaxNesting) return Error::out_of_range("lists nested deeper than {} levels", kMaxNesting);
  return v;
}
Result<Value> make_tuple(ValueList items) {
  Value v = Value::tuple(std::move(items));
  if (v.nesting() > kMaxNesting) return Error::out_of_range("tuples nested deeper than {} levels", kMaxNesting);
  return v;
}
Result<Value> make_dict(std::shared_ptr<Dict> d) {
  int depth = 0;
  for (auto& [k, v] : d->entries) depth = std::max(depth, v.nesting());
  d->depth = depth + 1;
  if (d->depth > kMaxNesting) return Error::out_of_range("dicts nested deeper than {} levels", kMaxNesting);
  return Value::dict(std::move(d));
}

// ---- Dict ----

const Value* Dict::find(const Value& key) const {
  for (auto& [k, v] : entries)
    if (equals(k, key)) return &v;
  return nullptr;
}
const Value* Dict::find(std::string_view key) const {
  for (auto& [k, v] : entries)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}
void Dict::set(Value key, Value value) {
  depth = std::max(depth, value.nesting() + 1);
  for (auto& [k, v] : entries) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

// ---- CallArgs ----

const Value* CallArgs::get(size_t index, std::string_view name) {
  if (index < pos.size()) return &pos[index];
  if (kw_used.size() != kw.size()) kw_used.assign(kw.size(), false);
  for (size_t i = 0; i < kw.size(); ++i) {
    if (kw[i].first == name) {
      kw_used[i] = true;
      return &kw[i].second;
    }
  }
  return nullptr;
}

Status CallArgs::check_all_used(std::string_view fn_name) const {
  for (size_t i = 0; i < kw.size(); ++i)
    if (i >= kw_used.size() || !kw_used[i])
      return Error::invalid_argument("{}() got an unexpected keyword argument '{}'", fn_name, kw[i].first);
  return Status::ok();
}

// ---- Python semantics ----

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: case Kind::kNone: return false;
    case Kind::kBool: case Kind::kInt: return v.as_int() != 0;
    case Kind::kFloat: return v.as_float() != 0.0;
    case Kind::kString: return !v.str().empty();
    case Kind::kList: case Kind::kTuple: return !v.items().empty();
    case Kind::kDict: return !v.dict().entries.empty();
    default: return true;
  }
}

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
    case Kind::kLoop: return "LoopContext";
  }
  return "object";
}

static bool equals_at(const Value& a, const Value& b, int depth) {
  if (depth > 2 * kMaxNesting) return false;
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Kind::kFloat && b.kind() != Kind::kFloat) return a.as_int() == b.as_int();
    return a.as_float() == b.as_float();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined: case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList: case Kind::kTuple: {
      const ValueList &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals_at(x[i], y[i], depth + 1)) return false;
      return true;
    }
    case Kind::kDict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (auto& [k, v] : x.entries) {
        const Value* w = y.find(k);
        if (!w || !equals_at(v, *w, depth + 1)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}
bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

Result<int> compare(const Value& a, const Value& b, std::string_view op) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Kind::kFloat && b.kind() != Kind::kFloat) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int();
    double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.str().compare(b.str()) < 0 ? -1 : a.str() == b.str() ? 0 : 1;
  if (a.is_seq() && a.kind() == b.kind()) {
    const ValueList &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return compare(x[i], y[i], op);
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  return Error::invalid_argument("'{}' not supported between instances of '{}' and '{}'", op, type_name(a), type_name(b));
}

// ---- str / repr ----

static void repr_into(std::string& out, const Value& v, int depth);

static void items_into(std::string& out, const ValueList& items, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    repr_into(out, items[i], depth + 1);
  }
}

static void dict_into(std::string& out, const Dict& d, int depth) {
  out += '{';
  bool first = true;
  for (auto& [k, v] : d.entries) {
    if (!first) out += ", ";
    first = false;
    repr_into(out, k, depth + 1);
    out += ": ";
    repr_into(out, v, depth + 1);
  }
  out += '}';
}

static void str_into(std::string& out, const Value& v, int depth) {
  if (depth > 2 * kMaxNesting) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case Kind::kUndefined: return;
    case Kind::kNone: out += "None"; return;
    case Kind::kBool: out += v.as_bool() ? "True" : "False"; return;
    case Kind::kInt: out += std::to_string(v.as_int()); return;
    case Kind::kFloat: out += py_float_repr(v.as_float()); return;
    case Kind::kString: out += v.str(); return;
    case Kind::kList: out += '['; items_into(out, v.items(), depth); out += ']'; return;
    case Kind::kTuple:
      out += '(';
      items_into(out, v.items(), depth);
      out += v.items().size() == 1 ? ",)" : ")";
      return;
    case Kind::kDict: dict_into(out, v.dict(), depth); return;
    case Kind::kNamespace: out += "<Namespace "; dict_into(out, v.dict(), depth); out += '>'; return;
    case Kind::kCallable: out += "<function " + v.fn().name + ">"; return;
    case Kind::kLoop: {
      auto& l = v.loop();
      out += "<LoopContext " + std::to_string(l.index0 + 1) + "/" + std::to_string(l.items->size()) + ">";
      return;
    }
  }
}

static void repr_into(std::string& out, const Value& v, int depth) {
  if (v.is_string()) out += py_repr_string(v.str());
  else if (v.is_undefined()) out += "Undefined";
  else str_into(out, v, depth);
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  str_into(out, v, 0);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

// ---- JSON ----

static Status json_into(std::string& out, const Value& v, const JsonStyle& st, int level) {
  if (level > 2 * kMaxNesting) return Error::out_of_range("tojson: value nested deeper than {} levels", 2 * kMaxNesting);
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += st.indent;
  };
  switch (v.kind()) {
    case Kind::kNone: out += "null"; return Status::ok();
    case Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status::ok();
    case Kind::kInt: out += std::to_string(v.as_int()); return Status::ok();
    case Kind::kFloat: {
      double f = v.as_float();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity") : py_float_repr(f);
      return Status::ok();
    }
    case Kind::kString: out += json_quote(v.str(), st.ascii); return Status::ok();
    case Kind::kList: case Kind::kTuple: {
      const ValueList& items = v.items();
      if (items.empty()) {
        out += "[]";
        return Status::ok();
      }
      out += '[';
      if (st.pretty) newline(level + 1);
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) {
          out += st.item_sep;
          if (st.pretty) newline(level + 1);
        }
        PIPIT_TRY(json_into(out, items[i], st, level + 1));
      }
      if (st.pretty) newline(level);
      out += ']';
      return Status::ok();
    }
    case Kind::kDict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (auto& e : v.dict().entries) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return Status::ok();
      }
      if (st.sort_keys) {
        for (auto* e : entries)
          if (!e->first.is_string()) return Error::invalid_argument("tojson: sort_keys needs string keys");
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first.str() < b->first.str(); });
      }
      out += '{';
      if (st.pretty) newline(level + 1);
      bool first = true;
      for (auto* e : entries) {
        if (!first) {
          out += st.item_sep;
          if (st.pretty) newline(level + 1);
        }
        first = false;
        const Value& k = e->first;
        if (k.is_string()) out += json_quote(k.str(), st.ascii);
        else if (k.kind() == Kind::kBool) out += k.as_bool() ? "\"true\"" : "\"false\"";
        else if (k.is_none()) out += "\"null\"";
        else if (k.is_number()) out += "\"" + to_str(k) + "\"";
        else return Error::invalid_argument("keys must be str, int, float, bool or None, not {}", type_name(k));
        out += st.key_sep;
        PIPIT_TRY(json_into(out, e->second, st, level + 1));
      }
      if (st.pretty) newline(level);
      out += '}';
      return Status::ok();
    }
    default:
      return Error::invalid_argument("Object of type {} is not JSON serializable", type_name(v));
  }
}

Result<std::string> to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  PIPIT_TRY(json_into(out, v, style, 0));
  return out;
}

template <class Json>
static Result<Value> from_json_at(const Json& j, int depth) {
  if (depth > kMaxNesting) return Error::out_of_range("JSON nested deeper than {} levels", kMaxNesting);
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) {
        PIPIT_ASSIGN_OR_RETURN(Value v, from_json_at(e, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto d = std::make_shared<Dict>();
      d->entries.reserve(j.size());
      int deepest = 0;
      for (auto it = j.begin(); it != j.end(); ++it) {
        PIPIT_ASSIGN_OR_RETURN(Value v, from_json_at(it.value(), depth + 1));
        deepest = std::max(deepest, v.nesting());
        d->entries.emplace_back(Value::string(it.key()), std::move(v));
      }
      d->depth = deepest + 1;
      return Value::dict(std::move(d));
    }
    default:
      return Error::invalid_argument("unsupported JSON value type '{}'", j.type_name());
  }
}

Result<Value> from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }
Result<Value> from_json(const nlohmann::json& j) { return from_json_at(j, 0); }

}  // namespace pipit::jinja
