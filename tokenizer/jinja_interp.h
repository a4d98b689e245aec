// Jinja interpreter: renders a parsed template (jinja_ast.h) against a context of variables, with the semantics of
// Jinja2's ImmutableSandboxedEnvironment as transformers configures it: Undefined prints as "", attribute access
// falls back to item access (and item access to attributes), for-loop bodies get a fresh scope per iteration (so a
// `set` inside a loop does not leak out; namespaces carry state), lists and dicts cannot be modified.
// Render state lives here, one Interp per render; the Program is shared and read-only.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja_ast.h"

namespace pipit::jinja {

// Bounds on one render, so a hostile template or input fails with an error instead of exhausting time or memory.
struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // rendered text, and any one string built while rendering
  int64_t max_steps = 5'000'000;               // statements executed + loop iterations + filter items
  int max_depth = 300;                         // nested evaluation (expressions, blocks, macro calls)
  int max_call_depth = 32;                     // nested macro calls / recursive loops
  int64_t max_items = 1'000'000;               // elements of one list built by the template (range, *, +)
};

class Interp {
 public:
  Interp(const Program& program, RenderLimits limits) : program_(program), limits_(limits) {}
  ~Interp();

  // Renders with `vars` (name -> value) as the template's context; errors name the template line.
  Result<std::string> render(std::vector<std::pair<std::string, Value>> vars);

  // Used by filters, methods and globals.
  Result<Value> call(const Value& fn, CallArgs& args);
  Status charge(int64_t steps);
  Status check_size(size_t bytes) const;
  Status check_items(size_t n) const;
  Value new_namespace(std::shared_ptr<Dict> attrs);  // tracked so reference cycles are broken after the render

 private:
  struct Scope {
    Scope* parent = nullptr;
    std::vector<std::pair<std::string, Value>> vars;
    Value* find_local(std::string_view name);
    void set(std::string_view name, Value v);
  };
  enum class Flow { kNormal, kBreak, kContinue };

  Status exec(const Body& body, Scope& scope, std::string& out);
  Status exec_stmt(const Stmt& s, Scope& scope, std::string& out);
  Status exec_for(const Stmt& s, Scope& scope, std::string& out, const Value& iterable, int depth0);
  Status exec_set(const Stmt& s, Scope& scope);
  Status exec_filter_chain(const std::vector<ExprPtr>& filters, Scope& scope, std::string& text);
  Status assign(const Target& t, const Value& v, Scope& scope);
  Result<Value> eval(const Expr& e, Scope& scope);
  Result<Value> eval_inner(const Expr& e, Scope& scope);
  Result<Value> eval_call(const Expr& e, Scope& scope);
  Status eval_args(const Expr& e, Scope& scope, CallArgs& args);
  Result<Value> eval_compare(const Expr& e, Scope& scope);
  Result<Value> lookup(std::string_view name, Scope& scope);
  Value make_macro(const Stmt& s);
  Result<Value> call_macro(const Stmt& m, CallArgs& args, const Value& caller);
  Status located(int line, Status st);

  const Program& program_;
  RenderLimits limits_;
  Scope* root_ = nullptr;
  Flow flow_ = Flow::kNormal;
  int64_t steps_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
  int error_line_ = 0;
  std::vector<std::shared_ptr<Dict>> namespaces_;
};

}  // namespace pipit::jinja
