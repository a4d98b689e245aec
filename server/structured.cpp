// tools / tool_choice / parallel_tool_calls, response_format and grammar (see openai_request.h). A forced tool
// call (tool_choice "required" or a named function) is a grammar too: the call's wrapper in the model's own
// syntax, the tool's name, and its parameters schema compiled to GBNF, so even a model that would never call a
// tool by itself writes a well-formed call.
#include <set>

#include "runtime/grammar.h"
#include "runtime/json_schema.h"
#include "server/openai_request.h"

namespace pipit::server {

using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxTools = 128;
constexpr size_t kMaxGrammarBytes = 256 * 1024;

const ojson* field(const ojson& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> parse_tools(const ojson& body, const std::string& chat_template, ParsedRequest& out,
                                    std::vector<const ojson*>& params) {
  const ojson* tools = field(body, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return bad_request("'tools' must be a list", "tools");
  if (tools->empty()) return std::nullopt;
  if (!out.chat) return bad_request("'tools' is for /v1/chat/completions", "tools");
  if (tools->size() > kMaxTools) return bad_request(fmt("'tools' has more than {} tools", kMaxTools), "tools");
  std::set<std::string> seen;
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string p = fmt("tools[{}]", i);
    const ojson& t = (*tools)[i];
    if (!t.is_object()) return bad_request(fmt("{} must be an object", p), p);
    const ojson* type = field(t, "type");
    if (!type || *type != "function")
      return bad_request(fmt("{}.type must be \"function\"", p), p + ".type");
    const ojson* f = field(t, "function");
    if (!f || !f->is_object()) return bad_request(fmt("{}.function must be an object", p), p + ".function");
    const ojson* name = field(*f, "name");
    if (!name || !name->is_string() || name->get<std::string>().empty() || name->get<std::string>().size() > 64)
      return bad_request(fmt("{}.function.name must be a string of 1 to 64 characters", p), p + ".function.name");
    if (!seen.insert(name->get<std::string>()).second)
      return bad_request(fmt("{}.function.name '{}' is used twice", p, name->get<std::string>()), p + ".function.name");
    const ojson* ps = field(*f, "parameters");
    if (ps && !ps->is_object()) return bad_request(fmt("{}.function.parameters must be a JSON schema object", p),
                                                   p + ".function.parameters");
    out.tool_names.push_back(name->get<std::string>());
    params.push_back(ps);
  }
  out.tool_syntax = detect_tool_syntax(chat_template);
  if (out.tool_syntax == ToolSyntax::kNone)
    return bad_request("this model's chat template does not describe tool calls, so 'tools' cannot be used", "tools");
  out.tools = *tools;
  return std::nullopt;
}

// The grammar of one call in the model's syntax, for the tools in `which` (indices into tool_names).
std::optional<ApiError> forced_call_grammar(const ParsedRequest& out, const std::vector<const ojson*>& params,
                                            const std::vector<size_t>& which, bool parallel, std::string& gbnf) {
  JsonGrammarBuilder b;
  std::string alts;
  const bool llama = out.tool_syntax == ToolSyntax::kLlama3;
  for (size_t i : which) {
    const std::string rule = fmt("args-{}", i);
    const ojson empty = ojson::object();
    const ojson& schema = params[i] ? *params[i] : empty;
    if (Status st = b.add_schema(rule, schema, fmt("tools[{}].function.parameters", i)); !st)
      return bad_request(st.message(), fmt("tools[{}].function.parameters", i));
    const std::string head = llama ? "{\"name\": \"" + out.tool_names[i] + "\", \"parameters\": "
                                   : "{\"name\": \"" + out.tool_names[i] + "\", \"arguments\": ";
    alts += (alts.empty() ? "" : " | ") + JsonGrammarBuilder::literal(head) + " " + rule + " \"}\"";
  }
  b.add_rule("call", alts);
  if (llama) {
    b.add_rule("root", parallel ? "call ( \"; \" call )*" : "call");
  } else {
    b.add_rule("one", "\"<tool_call>\\n\" call \"\\n</tool_call>\"");
    b.add_rule("root", parallel ? "one ( \"\\n\" one )*" : "one");
  }
  gbnf = b.gbnf();
  return std::nullopt;
}


// The legacy function calling as tools: functions [{name, description, parameters}] -> tools, function_call
// ("none", "auto" or {"name"}) -> tool_choice, one call at most. Errors then name the legacy fields.
ojson legacy_as_tools(const ojson& body) {
  ojson b = body;
  ojson tools = ojson::array();
  for (const auto& f : body["functions"]) tools.push_back({{"type", "function"}, {"function", f}});
  b["tools"] = std::move(tools);
  b.erase("functions");
  if (auto fc = body.find("function_call"); fc != body.end()) {
    if (fc->is_object()) b["tool_choice"] = {{"type", "function"}, {"function", *fc}};
    else b["tool_choice"] = *fc;
    b.erase("function_call");
  }
  b["parallel_tool_calls"] = false;
  return b;
}

std::string legacy_param(std::string p) {
  if (p.rfind("tools", 0) == 0) return "functions" + p.substr(5);
  if (p == "tool_choice") return "function_call";
  return p;
}

}  // namespace

std::optional<ApiError> parse_structured(const ojson& body, const std::string& chat_template, ParsedRequest& out) {
  if (const ojson* f = field(body, "functions")) {
    if (!f->is_array()) return bad_request("'functions' must be a list", "functions");
    out.legacy_functions = true;
    auto e = parse_structured(legacy_as_tools(body), chat_template, out);
    if (e) e->param = legacy_param(e->param);
    return e;
  }
  std::vector<const ojson*> params;
  if (auto e = parse_tools(body, chat_template, out, params)) return e;

  bool parallel = true;
  if (const ojson* p = field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) return bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    parallel = p->get<bool>();
  }
  // tool_choice: "auto" (default with tools), "none", "required", {"type": "function", "function": {"name"}}
  std::vector<size_t> forced;
  bool required = false;  // tool_choice "required": a call of any of the tools
  if (const ojson* tc = field(body, "tool_choice")) {
    std::string mode;
    if (tc->is_string()) {
      mode = tc->get<std::string>();
      if (mode != "auto" && mode != "none" && mode != "required")
        return bad_request(fmt("'tool_choice' '{}' is not one of auto, none, required or a named function",
                               mode.substr(0, 40)),
                           "tool_choice");
    } else if (tc->is_object()) {
      const ojson* f = field(*tc, "function");
      const ojson* name = f && f->is_object() ? field(*f, "name") : nullptr;
      if (!name || !name->is_string())
        return bad_request("'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
      const std::string n = name->get<std::string>();
      size_t i = 0;
      while (i < out.tool_names.size() && out.tool_names[i] != n) ++i;
      if (i == out.tool_names.size())
        return bad_request(fmt("'tool_choice' names the function '{}', which is not in 'tools'", n.substr(0, 64)),
                           "tool_choice");
      mode = "named";
      forced.push_back(i);
    } else {
      return bad_request("'tool_choice' must be a string or an object", "tool_choice");
    }
    if (mode == "required") {
      required = true;
      if (out.tool_names.empty()) return bad_request("'tool_choice' is \"required\" but there are no 'tools'", "tool_choice");
      for (size_t i = 0; i < out.tool_names.size(); ++i) forced.push_back(i);
    }
    if (mode == "none") {  // the model is not told about the tools, and its answer is not parsed for calls
      out.tools = nullptr;
      out.tool_names.clear();
      out.tool_syntax = ToolSyntax::kNone;
    }
  }
  out.parallel_tool_calls = parallel;
  if (!forced.empty()) {
    // "required" with parallel_tool_calls (OpenAI's default) lets the model write several calls, each of any
    // tool; a named function, or parallel_tool_calls false, is one call, and the grammar ends the answer after it.
    if (auto e = forced_call_grammar(out, params, forced, required && parallel, out.grammar)) return e;
    out.grammar_param = "tool_choice";
  }

  if (const ojson* rf = field(body, "response_format")) {
    const ojson* t = rf->is_object() ? field(*rf, "type") : nullptr;
    const std::string type = t && t->is_string() ? t->get<std::string>() : "";
    std::string g;
    if (type == "text") {
    } else if (type == "json_object") {
      g = json_object_grammar();
    } else if (type == "json_schema") {
      const ojson* js = field(*rf, "json_schema");
      if (!js || !js->is_object())
        return bad_request("'response_format.json_schema' must be an object with a 'schema'", "response_format.json_schema");
      const ojson* schema = field(*js, "schema");
      if (!schema) return bad_request("'response_format.json_schema.schema' is required", "response_format.json_schema.schema");
      auto r = json_schema_grammar(*schema, "response_format.json_schema.schema");
      if (!r.is_ok()) return bad_request(r.status().message(), "response_format.json_schema.schema");
      g = std::move(r).value();
    } else {
      return bad_request("'response_format.type' must be text, json_object or json_schema", "response_format");
    }
    if (!g.empty()) {
      if (!out.grammar.empty())
        return bad_request("'response_format' cannot be combined with a forced tool call", "response_format");
      out.grammar = std::move(g);
      out.grammar_param = "response_format";
    }
  }
  if (const ojson* gr = field(body, "grammar")) {
    if (!gr->is_string()) return bad_request("'grammar' must be a string (GBNF)", "grammar");
    if (gr->get<std::string>().size() > kMaxGrammarBytes)
      return bad_request(fmt("'grammar' is longer than {} bytes", kMaxGrammarBytes), "grammar");
    if (!out.grammar.empty())
      return bad_request("'grammar' cannot be combined with response_format or a forced tool call", "grammar");
    out.grammar = gr->get<std::string>();
    out.grammar_param = "grammar";
  }
  if (!out.grammar.empty()) {
    auto g = Grammar::parse(out.grammar);
    if (!g.is_ok()) return bad_request(g.status().message(), out.grammar_param);
    out.params.grammar = std::move(g).value();
  }
  return std::nullopt;
}

}  // namespace pipit::server
