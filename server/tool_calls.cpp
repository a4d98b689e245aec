// Tool-call syntaxes and parsing (see tool_calls.h).
#include "server/tool_calls.h"

#include <algorithm>
#include <random>

namespace pipit::server {

using ojson = nlohmann::ordered_json;

namespace {

constexpr char kOpen[] = "<tool_call>";
constexpr char kClose[] = "</tool_call>";
constexpr char kPythonTag[] = "<|python_tag|>";

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

bool offered(const std::vector<std::string>& names, const std::string& n) {
  return names.empty() || std::find(names.begin(), names.end(), n) != names.end();
}

// {"name": str, "arguments"|"parameters": object|string-of-object} -> a call.
bool call_from_json(const std::string& text, const std::vector<std::string>& names, ToolCall& out) {
  ojson j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto n = j.find("name");
  if (n == j.end() || !n->is_string() || !offered(names, n->get<std::string>())) return false;
  auto a = j.find("arguments");
  if (a == j.end()) a = j.find("parameters");
  ojson args = ojson::object();
  if (a != j.end()) {
    if (a->is_string()) {  // some models write the arguments as a JSON string
      args = ojson::parse(a->get<std::string>(), nullptr, false);
      if (args.is_discarded() || !args.is_object()) return false;
    } else if (a->is_object()) {
      args = *a;
    } else if (!a->is_null()) {
      return false;
    }
  }
  out.id = make_call_id();
  out.name = n->get<std::string>();
  out.arguments = args.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return true;
}

// Llama: one or more JSON objects separated by ';' or whitespace, nothing else.
bool llama_calls(std::string text, const std::vector<std::string>& names, std::vector<ToolCall>& out) {
  text = trim(text);
  if (text.rfind(kPythonTag, 0) == 0) text = trim(text.substr(sizeof(kPythonTag) - 1));
  std::vector<ToolCall> calls;
  size_t pos = 0;
  while (pos < text.size()) {
    // the end of this object: brace depth outside strings
    int depth = 0;
    bool in_str = false, esc = false;
    size_t end = std::string::npos;
    if (text[pos] != '{') return false;
    for (size_t i = pos; i < text.size(); ++i) {
      const char c = text[i];
      if (in_str) {
        if (esc) esc = false;
        else if (c == '\\') esc = true;
        else if (c == '"') in_str = false;
        continue;
      }
      if (c == '"') in_str = true;
      else if (c == '{') ++depth;
      else if (c == '}' && --depth == 0) {
        end = i + 1;
        break;
      }
    }
    if (end == std::string::npos) return false;
    ToolCall c;
    if (!call_from_json(text.substr(pos, end - pos), names, c)) return false;
    calls.push_back(std::move(c));
    pos = end;
    while (pos < text.size() && (text[pos] == ';' || text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\t' ||
                                 text[pos] == '\r'))
      ++pos;
  }
  if (calls.empty()) return false;
  out = std::move(calls);
  return true;
}

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag(const std::string& s, const char* tag) {
  const std::string t = tag;
  for (size_t n = std::min(s.size(), t.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, t, 0, n) == 0) return n;
  return 0;
}

}  // namespace

std::string make_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kAlpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlpha[rng() % 62];
  return id;
}

ToolSyntax detect_tool_syntax(const std::string& t) {
  if (t.find(kOpen) != std::string::npos) return ToolSyntax::kTagged;
  if (t.find(kPythonTag) != std::string::npos ||
      (t.find("\"parameters\"") != std::string::npos && t.find("tool_calls") != std::string::npos))
    return ToolSyntax::kLlama3;
  return ToolSyntax::kNone;
}

const char* tool_syntax_name(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::kTagged: return "tagged";
    case ToolSyntax::kLlama3: return "llama3";
    case ToolSyntax::kNone: break;
  }
  return "none";
}

ParsedAnswer parse_tool_calls(ToolSyntax syntax, const std::string& text, const std::vector<std::string>& names) {
  ParsedAnswer out;
  if (syntax == ToolSyntax::kLlama3) {
    if (!llama_calls(text, names, out.calls)) out.content = text;
    return out;
  }
  if (syntax != ToolSyntax::kTagged) {
    out.content = text;
    return out;
  }
  size_t pos = 0;
  std::string content;
  while (true) {
    const size_t a = text.find(kOpen, pos);
    if (a == std::string::npos) break;
    const size_t body = a + sizeof(kOpen) - 1;
    const size_t b = text.find(kClose, body);
    ToolCall c;
    if (b == std::string::npos || !call_from_json(trim(text.substr(body, b - body)), names, c)) break;
    content += text.substr(pos, a - pos);
    out.calls.push_back(std::move(c));
    pos = b + sizeof(kClose) - 1;
  }
  content += text.substr(pos);
  out.content = out.calls.empty() ? content : trim(content);
  return out;
}

nlohmann::json tool_call_json(const ToolCall& c, int index, bool delta) {
  nlohmann::json j = {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
  if (delta) j["index"] = index;
  return j;
}

ToolCallStream::Out ToolCallStream::feed(const std::string& piece) {
  buf_ += piece;
  return drain(false);
}

ToolCallStream::Out ToolCallStream::finish() { return drain(true); }

ToolCallStream::Out ToolCallStream::drain(bool final) {
  Out out;
  if (syntax_ == ToolSyntax::kLlama3) {
    if (!started_) {
      const size_t a = buf_.find_first_not_of(" \t\r\n");
      if (a == std::string::npos) {
        if (final) out.content.swap(buf_);
        return out;
      }
      started_ = true;
      json_mode_ = buf_[a] == '{' || buf_.compare(a, std::string::npos, kPythonTag, 0, buf_.size() - a) == 0;
    }
    if (!json_mode_) {
      out.content.swap(buf_);
      return out;
    }
    if (!final) return out;  // a call is known only once the answer ends
    std::vector<ToolCall> calls;
    if (llama_calls(buf_, names_, calls)) {
      out.calls = std::move(calls);
      n_calls_ += int(out.calls.size());
    } else {
      out.content = buf_;
    }
    buf_.clear();
    return out;
  }
  if (syntax_ != ToolSyntax::kTagged) {
    out.content.swap(buf_);
    return out;
  }
  while (true) {
    const size_t a = buf_.find(kOpen);
    if (a == std::string::npos) {
      const size_t hold = final ? 0 : partial_tag(buf_, kOpen);
      out.content += buf_.substr(0, buf_.size() - hold);
      buf_.erase(0, buf_.size() - hold);
      break;
    }
    const size_t body = a + sizeof(kOpen) - 1;
    const size_t b = buf_.find(kClose, body);
    if (b == std::string::npos) {
      out.content += buf_.substr(0, a);  // the text before the call is content already
      buf_.erase(0, a);
      if (final) {  // an unclosed call: what the model wrote
        out.content += buf_;
        buf_.clear();
      }
      break;
    }
    ToolCall c;
    if (call_from_json(trim(buf_.substr(body, b - body)), names_, c)) {
      out.content += buf_.substr(0, a);
      out.calls.push_back(std::move(c));
      ++n_calls_;
    } else {
      out.content += buf_.substr(0, b + sizeof(kClose) - 1);
    }
    buf_.erase(0, b + sizeof(kClose) - 1);
  }
  // once calls have started, the whitespace between them is not content
  if (n_calls_ > 0 && trim(out.content).empty()) out.content.clear();
  return out;
}

}  // namespace pipit::server
