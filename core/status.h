// Status and Result<T>: how every fallible function in pipit reports failure.
// Nothing a user, a file or a request controls may abort the process; it becomes a Status with a message that names
// the operation, the value and what was expected, e.g. "[load] blk.3.attn_q.weight: shape [896, 1024], expected [...]".
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace pipit {

enum class Code { kOk = 0, kInvalidArgument, kNotFound, kIo, kFormat, kUnsupported, kOutOfRange, kInternal, kCancelled, kUnavailable };

// Minimal "{}" formatter (g++ 12 has no std::format). Each "{}" takes the next argument via operator<<.
namespace detail {
inline void format_into(std::ostringstream& os, std::string_view f) { os << f; }
template <class T, class... Rest>
void format_into(std::ostringstream& os, std::string_view f, const T& v, const Rest&... rest) {
  size_t p = f.find("{}");
  if (p == std::string_view::npos) { os << f; return; }
  os << f.substr(0, p) << v;
  format_into(os, f.substr(p + 2), rest...);
}
}  // namespace detail

template <class... Args>
std::string fmt(std::string_view f, const Args&... args) {
  std::ostringstream os;
  detail::format_into(os, f, args...);
  return os.str();
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  static Status ok() { return {}; }
  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }
  // Prefix context: "[load] " + msg.
  Status with_context(std::string_view ctx) const {
    return is_ok() ? *this : Status(code_, std::string(ctx) + ": " + msg_);
  }

 private:
  Code code_ = Code::kOk;
  std::string msg_;
};

// Error constructors: Error::invalid_argument("[rms_norm] weight has {} elements, expected {}", n, m).
struct Error {
#define PIPIT_ERROR_CTOR(name, code)                                                   \
  template <class... A>                                                                \
  static Status name(std::string_view f, const A&... a) { return Status(code, fmt(f, a...)); }
  PIPIT_ERROR_CTOR(invalid_argument, Code::kInvalidArgument)
  PIPIT_ERROR_CTOR(not_found, Code::kNotFound)
  PIPIT_ERROR_CTOR(io, Code::kIo)
  PIPIT_ERROR_CTOR(format, Code::kFormat)
  PIPIT_ERROR_CTOR(unsupported, Code::kUnsupported)
  PIPIT_ERROR_CTOR(out_of_range, Code::kOutOfRange)
  PIPIT_ERROR_CTOR(internal, Code::kInternal)
  PIPIT_ERROR_CTOR(cancelled, Code::kCancelled)
  PIPIT_ERROR_CTOR(unavailable, Code::kUnavailable)
#undef PIPIT_ERROR_CTOR
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}                      // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {               // NOLINT
    if (status_.is_ok()) status_ = Status(Code::kInternal, "Result built from an ok Status without a value");
  }
  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "pipit: internal error (a bug in pipit): %s at %s:%d %s\n", expr, file, line, msg.c_str());
  std::abort();
}

}  // namespace pipit

#define PIPIT_CONCAT_INNER(a, b) a##b
#define PIPIT_CONCAT(a, b) PIPIT_CONCAT_INNER(a, b)

// Propagate a failed Status: PIPIT_TRY(do_something());
#define PIPIT_TRY(expr)                                \
  do {                                                 \
    ::pipit::Status _pipit_st = (expr);                \
    if (!_pipit_st.is_ok()) return _pipit_st;          \
  } while (0)

// Unwrap a Result or propagate its Status: PIPIT_ASSIGN_OR_RETURN(auto x, load(...));
#define PIPIT_ASSIGN_OR_RETURN(lhs, expr) PIPIT_ASSIGN_OR_RETURN_IMPL(PIPIT_CONCAT(_pipit_r, __LINE__), lhs, expr)
#define PIPIT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

// For our own bugs only; never for anything a user controls.
#define PIPIT_ASSERT(cond, ...) \
  do { if (!(cond)) ::pipit::assert_fail(#cond, __FILE__, __LINE__, ::pipit::fmt("" __VA_ARGS__)); } while (0)
#ifdef NDEBUG
#define PIPIT_DASSERT(cond, ...) do {} while (0)
#else
#define PIPIT_DASSERT(cond, ...) PIPIT_ASSERT(cond, __VA_ARGS__)
#endif
