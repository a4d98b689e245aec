// Global functions a chat template can call: Jinja2's range, dict, namespace, joiner, cycler, and the two that
// transformers adds, raise_exception(msg) and strftime_now(format) (local time, like datetime.now().strftime).
#include <atomic>
#include <ctime>
#include <limits>
#include <map>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interp.h"

namespace pipit::jinja {

namespace {

std::atomic<int64_t> g_fixed_now{-1};

Result<Value> g_range(Interp& in, CallArgs& a) {
  if (a.pos.empty() || a.pos.size() > 3) return Error::invalid_argument("range expected 1 to 3 arguments, got {}", a.pos.size());
  for (const Value& v : a.pos)
    if (!v.is_int()) return Error::invalid_argument("'{}' object cannot be interpreted as an integer", type_name(v));
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) return Error::invalid_argument("range() arg 3 must not be zero");
  // the count in unsigned arithmetic: stop - start + step - 1 overflows int64 for range(0, 2**63-1, 2**62)
  // (which has 2 items), and the overflow came out as a huge count ("out of memory")
  const bool up = step > 0;
  const uint64_t span = up ? (stop > start ? uint64_t(stop) - uint64_t(start) : 0)
                           : (start > stop ? uint64_t(start) - uint64_t(stop) : 0);
  const uint64_t stride = up ? uint64_t(step) : uint64_t(0) - uint64_t(step);
  const uint64_t count = span / stride + (span % stride != 0);
  if (count > uint64_t(std::numeric_limits<int64_t>::max()))
    return Error::invalid_argument("range() has {} items, more than a template may make", count);
  const int64_t n = int64_t(count);
  PIPIT_TRY(in.check_items(static_cast<size_t>(n)));
  PIPIT_TRY(in.charge(n));
  ValueList out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(Value::integer(int64_t(uint64_t(start) + uint64_t(i) * uint64_t(step))));
  return Value::list(std::move(out));
}

// dict(mapping_or_pairs, **kw) and namespace(...) take the same arguments.
Result<std::shared_ptr<Dict>> dict_args(CallArgs& a, std::string_view fn) {
  auto d = std::make_shared<Dict>();
  if (a.pos.size() > 1) return Error::invalid_argument("{} expected at most 1 positional argument, got {}", fn, a.pos.size());
  if (a.pos.size() == 1) {
    const Value& src = a.pos[0];
    if (src.is_dict() || src.kind() == Kind::kNamespace) {
      for (auto& [k, v] : src.dict().entries) d->set(k, v);
    } else {
      PIPIT_ASSIGN_OR_RETURN(ValueList pairs, iterate(src));
      for (const Value& p : pairs) {
        if (!p.is_seq() || p.items().size() != 2)
          return Error::invalid_argument("{}: sequence elements must be pairs", fn);
        d->set(p.items()[0], p.items()[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) d->set(Value::string(k), v);
  a.kw_used.assign(a.kw.size(), true);
  return d;
}

Result<Value> g_dict(Interp&, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(auto d, dict_args(a, "dict"));
  return make_dict(std::move(d));
}

Result<Value> g_namespace(Interp& in, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(auto d, dict_args(a, "namespace"));
  return in.new_namespace(std::move(d));
}

Result<Value> g_raise_exception(Interp&, CallArgs& a) {
  std::string msg = a.pos.empty() ? std::string() : to_str(a.pos[0]);
  return Error::invalid_argument("{}", msg);
}

Result<Value> g_strftime_now(Interp&, CallArgs& a) {
  const Value* f = a.get(0, "format");
  if (!f || !f->is_string()) return Error::invalid_argument("strftime_now() needs a format string");
  std::tm tm{};
  if (int64_t fixed = g_fixed_now.load(); fixed >= 0) {
    std::time_t t = static_cast<std::time_t>(fixed);
    gmtime_r(&t, &tm);
  } else {
    std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
  }
  char buf[512];
  size_t n = std::strftime(buf, sizeof buf, f->str().c_str(), &tm);
  if (n == 0 && !f->str().empty()) return Error::invalid_argument("strftime_now: format too long or invalid");
  return Value::string(std::string(buf, n));
}

// joiner(sep=", "): a callable that returns "" the first time and `sep` afterwards.
Result<Value> g_joiner(Interp&, CallArgs& a) {
  PIPIT_ASSIGN_OR_RETURN(std::string sep, arg_str(a.get(0, "sep"), ", ", "sep"));
  auto used = std::make_shared<bool>(false);
  auto c = std::make_shared<Callable>();
  c->name = "joiner";
  c->fn = [sep, used](Interp&, CallArgs&) -> Result<Value> {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return Value::string(sep);
  };
  return Value::callable(std::move(c));
}

Value native(const char* name, Result<Value> (*fn)(Interp&, CallArgs&)) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->fn = fn;
  return Value::callable(std::move(c));
}

}  // namespace

void set_clock_for_testing(int64_t epoch_seconds) { g_fixed_now.store(epoch_seconds); }

const Value* find_global(std::string_view name) {
  static const std::map<std::string_view, Value> kGlobals = {
      {"range", native("range", g_range)},
      {"dict", native("dict", g_dict)},
      {"namespace", native("namespace", g_namespace)},
      {"joiner", native("joiner", g_joiner)},
      {"raise_exception", native("raise_exception", g_raise_exception)},
      {"strftime_now", native("strftime_now", g_strftime_now)},
  };
  auto it = kGlobals.find(name);
  return it == kGlobals.end() ? nullptr : &it->second;
}

}  // namespace pipit::jinja
