// Values of the Jinja interpreter, modelled on the Python objects Jinja2 handles in a chat template: Undefined,
// None, bool, int, float, str, list, tuple, dict (insertion-ordered), Namespace, callables and the loop object.
// Lists, dicts and strings are shared by reference, as in Python; the sandbox makes lists and dicts immutable, so only
// a Namespace changes after it is made.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit::jinja {

class Value;
class Interp;
using ValueList = std::vector<Value>;
struct Dict;
struct Callable;
struct LoopState;

enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace,
                            kCallable, kLoop };

// Deepest nesting of lists/dicts a value may have: bounds the recursion of repr, tojson, ==, and destruction.
constexpr int kMaxNesting = 256;

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string hint);
  static Value none() { return Value(Kind::kNone); }
  static Value boolean(bool b) { Value v(Kind::kBool); v.i_ = b; return v; }
  static Value integer(int64_t i) { Value v(Kind::kInt); v.i_ = i; return v; }
  static Value number(double f) { Value v(Kind::kFloat); v.f_ = f; return v; }
  static Value string(std::string s);
  static Value list(ValueList items);   // nesting beyond kMaxNesting is caught by make_list / make_dict
  static Value tuple(ValueList items);
  static Value dict(std::shared_ptr<Dict> d);
  static Value ns(std::shared_ptr<Dict> d);
  static Value callable(std::shared_ptr<Callable> c);
  static Value loop(std::shared_ptr<LoopState> l);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_int() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }  // Python: bool is an int
  bool is_number() const { return is_int() || kind_ == Kind::kFloat; }
  bool is_seq() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }  // kInt or kBool
  double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return *static_cast<const std::string*>(p_.get()); }
  const ValueList& items() const;  // kList, kTuple
  Dict& dict() const { return *static_cast<Dict*>(p_.get()); }  // kDict, kNamespace
  std::shared_ptr<Dict> dict_ptr() const { return std::static_pointer_cast<Dict>(p_); }
  Callable& fn() const { return *static_cast<Callable*>(p_.get()); }
  LoopState& loop() const { return *static_cast<LoopState*>(p_.get()); }
  const std::string& undefined_hint() const;
  int nesting() const;  // 0 for scalars, 1 + deepest child for lists and dicts
  const void* identity() const { return p_.get(); }  // for `is sameas` on containers

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  union {
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> p_;
};

// Insertion-ordered mapping with Python key equality (1 == 1.0 == True). Chat-template dicts are small: linear search.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  int depth = 1;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Argument `index`/`name` as Python binds it; nullptr when absent. Marks the keyword as used.
  const Value* get(size_t index, std::string_view name);
  // Error naming the first argument get() never bound, if any ("unexpected keyword argument 'x'").
  Status check_all_used(std::string_view fn_name) const;
  std::vector<bool> kw_used;
};

using NativeFn = std::function<Result<Value>(Interp&, CallArgs&)>;
struct Callable {
  std::string name;
  NativeFn fn;
};

// The `loop` variable of a for loop.
struct LoopState {
  std::shared_ptr<const ValueList> items;
  size_t index0 = 0;
  int depth0 = 0;
  bool has_changed = false;
  Value last_changed;
  Value recurse;  // callable for `{% for ... recursive %}`, else undefined
};

Result<Value> make_list(ValueList items);
Result<Value> make_tuple(ValueList items);
Result<Value> make_dict(std::shared_ptr<Dict> d);

bool truthy(const Value& v);
const char* type_name(const Value& v);  // Python's type name: 'str', 'int', 'NoneType', 'dict', ...
bool equals(const Value& a, const Value& b);
// <0, 0, >0 as Python orders numbers, strings, and lists/tuples of those; TypeError otherwise.
Result<int> compare(const Value& a, const Value& b, std::string_view op);

std::string to_str(const Value& v);   // Python str(): what {{ v }} prints
std::string to_repr(const Value& v);  // Python repr(): how v prints inside a list or dict

// Python json.dumps(v, ensure_ascii=False, indent, separators, sort_keys) as transformers' tojson filter calls it.
struct JsonStyle {
  std::string indent;   // per level, when `pretty`
  bool pretty = false;  // indent given (even 0 or "")
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
  bool ascii = false;  // ensure_ascii: non-ASCII as \uXXXX
};
Result<std::string> to_json(const Value& v, const JsonStyle& style);

// nlohmann JSON -> Value. ordered_json keeps the caller's key order, which tojson and dict iteration reproduce.
Result<Value> from_json(const nlohmann::ordered_json& j);
Result<Value> from_json(const nlohmann::json& j);

}  // namespace pipit::jinja
