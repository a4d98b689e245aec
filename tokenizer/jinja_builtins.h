// The operations behind Jinja syntax, and the built-in filters, tests, methods and globals. Each follows what
// Jinja2 does with the corresponding Python object (jinja2/filters.py, tests.py, sandbox.py, and Python's own
// str/list/dict methods). Errors carry no line: the interpreter adds it.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja_value.h"

namespace pipit::jinja {

// ---- jinja_ops.cpp: operators and subscripts ----
Status undefined_error(const Value& u);  // the error of using an Undefined ("'x' is undefined")
Result<Value> binary_op(std::string_view op, const Value& a, const Value& b, Interp& in);
Result<Value> unary_op(std::string_view op, const Value& v);
Result<bool> contains(const Value& container, const Value& item);     // Python `item in container`
Result<ValueList> iterate(const Value& v);                            // Python iter(): list items, dict keys, chars
Result<Value> get_attr(const Value& obj, std::string_view name);      // Jinja2 environment.getattr (sandboxed)
Result<Value> get_item(const Value& obj, const Value& key);           // Jinja2 environment.getitem
Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
Result<std::string> percent_format(std::string_view fmt, const Value& args);  // Python `fmt % args`

// ---- jinja_methods.cpp: methods of str, dict and list, and the loop object's attributes ----
// Whether `obj.name` is a Python method (which wins over a dict key of the same name).
bool is_method(const Value& obj, std::string_view name);
// Whether the sandbox forbids the method (list.append, dict.update, ...).
bool is_unsafe_method(const Value& obj, std::string_view name);
Result<Value> call_method(Interp& in, const Value& obj, std::string_view name, CallArgs& args);
Value bound_method(const Value& obj, std::string_view name);  // obj.name as a callable value
Value loop_attr(const Value& loop, std::string_view name);

// ---- jinja_filters.cpp / jinja_tests.cpp ----
bool has_filter(std::string_view name);
Result<Value> apply_filter(Interp& in, std::string_view name, const Value& v, CallArgs& args);
bool has_test(std::string_view name);
Result<bool> apply_test(Interp& in, std::string_view name, const Value& v, CallArgs& args);

// ---- jinja_globals.cpp: range, dict, namespace, cycler, joiner, raise_exception, strftime_now ----
const Value* find_global(std::string_view name);
// Tests pin strftime_now's clock to `epoch_seconds`, read as UTC; a negative value restores the local clock.
void set_clock_for_testing(int64_t epoch_seconds);

// Argument helpers shared by the builtins.
Result<int64_t> arg_int(const Value* v, int64_t def, std::string_view what);
Result<std::string> arg_str(const Value* v, std::string def, std::string_view what);
bool arg_bool(const Value* v, bool def);

}  // namespace pipit::jinja
