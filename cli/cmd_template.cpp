// `pipit template`: render a model's chat template, for one conversation or a JSONL file of them. The JSONL schema
// is that of testdata/tokenizers/*/chat.jsonl, so the output diffs against the goldens; ids are
// encode(text, add_special_tokens=false), as transformers' apply_chat_template(tokenize=True) computes them.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/jsonl_input.h"
#include "core/limits.h"
#include "runtime/loader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pipit::cli {

namespace {

using ojson = nlohmann::ordered_json;

// Keys of an input line that are not template variables (chat.jsonl's own outputs among them).
bool is_line_field(const std::string& key) {
  return key == "messages" || key == "add_generation_prompt" || key == "text" || key == "ids";
}

// One JSON record per line, with U+0085/U+2028/U+2029 escaped as in the golden files (some readers split on them).
std::string dump_line(const ojson& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "\xC2\x85") == 0) {
      out += "\\u0085";
      i += 1;
    } else if (s.compare(i, 3, "\xE2\x80\xA8") == 0 || s.compare(i, 3, "\xE2\x80\xA9") == 0) {
      out += s[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out + "\n";
}

Result<ojson> parse_object(const std::string& text, const char* what) {
  ojson j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::invalid_argument("{} is not valid JSON", what);
  return j;
}

// {"messages": [...], "add_generation_prompt": bool, ...extra template variables} -> {"text", "ids"}.
Status render_line(const Tokenizer& tok, const ojson& line, const ojson& base_kwargs) {
  auto m = line.find("messages");
  if (m == line.end() || !m->is_array()) return Error::invalid_argument("missing list field 'messages'");
  bool agp = false;
  if (auto g = line.find("add_generation_prompt"); g != line.end()) {
    if (!g->is_boolean()) return Error::invalid_argument("'add_generation_prompt' must be true or false");
    agp = g->get<bool>();
  }
  ojson kwargs = base_kwargs;
  for (auto it = line.begin(); it != line.end(); ++it)
    if (!is_line_field(it.key())) kwargs[it.key()] = it.value();
  PIPIT_ASSIGN_OR_RETURN(std::string text, apply_chat_template(tok, *m, agp, kwargs));
  PIPIT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(text, false));
  ojson out;
  out["text"] = text;
  out["ids"] = ids;
  std::fputs(dump_line(out).c_str(), stdout);
  return Status::ok();
}

int cmd_template(Args& a) {
  a.option({"-m", "--model"}, "model: HF folder (tokenizer.json + tokenizer_config.json), .pipit or .gguf file");
  a.option({"--messages"}, "a JSON list of messages; prints the rendered text");
  a.option({"--jsonl"}, "JSONL input ('-' = stdin): {\"messages\", \"add_generation_prompt\", ...} lines; writes {\"text\", \"ids\"}");
  a.option({"--kwargs"}, "JSON object of extra template variables: tools, enable_thinking, date_string, ...");
  a.flag({"--no-generation-prompt"}, "with --messages: do not append the assistant header");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  bool ok_args = a.has("-m") && (a.has("--jsonl") != a.has("--messages"));
  if (a.help() || !ok_args) {
    std::printf("usage: pipit template -m MODEL --messages JSON [--kwargs JSON]   prints the rendered text\n"
                "       pipit template -m MODEL --jsonl IN [--kwargs JSON]        writes {\"text\", \"ids\"} lines\n"
                "JSONL keys other than messages/add_generation_prompt/text/ids are template variables.\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  ojson kwargs = ojson::object();
  if (a.has("--kwargs")) {
    auto k = parse_object(a.get("--kwargs"), "--kwargs");
    if (!k || !k->is_object()) return fail(a, "--kwargs must be a JSON object");
    kwargs = *k;
  }
  auto tok = load_tokenizer(a.get("-m"));  // a folder, .pipit or .gguf (runtime/loader.h)
  if (!tok) return fail(a, tok.status().message());
  const Tokenizer& t = **tok;

  if (a.has("--messages")) {
    auto m = parse_object(a.get("--messages"), "--messages");
    if (!m) return fail(a, m.status().message());
    auto text = apply_chat_template(t, *m, !a.has("--no-generation-prompt"), kwargs);
    if (!text) return fail(a, text.status().message());
    std::fwrite(text->data(), 1, text->size(), stdout);
    const std::string err = stdout_error();
    return err.empty() ? 0 : fail(a, err);
  }
  Status st = for_each_input_line(a.get("--jsonl"), Limits::kMaxPromptFile, [&](const std::string& line) -> Status {
    ojson j = ojson::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Error::invalid_argument("not a JSON object");
    return render_line(t, j, kwargs);
  });
  if (!st) return fail(a, st.message());
  if (const std::string err = stdout_error(); !err.empty()) return fail(a, err);
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("template", "render a model's chat template (one conversation, or JSONL in -> {text, ids} out)",
                       cmd_template);

}  // namespace pipit::cli
