// `pipit tokenize`: encode or decode with a model's tokenizer, one text or a JSONL file at a time. The JSONL
// schemas are those of testdata/tokenizers/*/cases.jsonl and decode.jsonl, so outputs diff against the goldens.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/jsonl_input.h"
#include "core/limits.h"
#include "runtime/loader.h"
#include "tokenizer/tokenizer.h"

namespace pipit::cli {

namespace {

using ojson = nlohmann::ordered_json;

// One JSON record per line. Everything we write is valid UTF-8 (decode replaces invalid bytes with U+FFFD), so
// strict never throws. U+0085, U+2028 and U+2029 are escaped, as in the golden files, because some line readers
// treat them as line breaks.
std::string dump_line(const ojson& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  std::string out;
  out.reserve(s.size() + 1);
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
  out += '\n';
  return out;
}

Status encode_line(const Tokenizer& tok, const nlohmann::json& j) {
  auto it = j.find("text");
  if (it == j.end() || !it->is_string()) return Error::invalid_argument("missing string field 'text'");
  const std::string& text = it->get_ref<const std::string&>();
  PIPIT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(text, false));
  PIPIT_ASSIGN_OR_RETURN(std::vector<int32_t> ids_special, tok.encode(text, true));
  ojson out;
  out["ids"] = ids;
  out["ids_special"] = ids_special;
  out["decoded"] = tok.decode(ids_special, false);
  std::fputs(dump_line(out).c_str(), stdout);
  return Status::ok();
}

Status decode_line(const Tokenizer& tok, const nlohmann::json& j) {
  auto it = j.find("ids");
  if (it == j.end() || !it->is_array()) return Error::invalid_argument("missing list field 'ids'");
  std::vector<int32_t> ids;
  // An id outside the vocabulary is an error naming it (HF's decode drops such ids silently, so a wrong-model or
  // corrupted id list would decode to less text without a word; the C API's pipit_detokenize refuses them too).
  const int64_t V = tok.vocab_size();
  for (const auto& v : *it) {
    if (!v.is_number_integer()) return Error::invalid_argument("'ids' holds {}, expected integers", v.dump());
    const int64_t id = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? -1 : v.get<int64_t>();
    if (id < 0 || id >= V)
      return Error::invalid_argument("'ids' holds {}, outside this tokenizer's vocabulary [0, {})", v.dump(), V);
    ids.push_back(static_cast<int32_t>(id));
  }
  bool skip = false;
  if (auto s = j.find("skip_special_tokens"); s != j.end()) {
    if (!s->is_boolean()) return Error::invalid_argument("'skip_special_tokens' must be true or false");
    skip = s->get<bool>();
  }
  ojson out;
  out["decoded"] = tok.decode(ids, skip);
  std::fputs(dump_line(out).c_str(), stdout);
  return Status::ok();
}

int cmd_tokenize(Args& a) {
  a.option({"-m", "--model"}, "model: HF folder (tokenizer.json + tokenizer_config.json), .pipit or .gguf file");
  a.option({"-p", "--prompt"}, "text to encode; prints its ids");
  a.option({"--jsonl"}, "JSONL input ('-' = stdin): {\"text\"} lines, or {\"ids\", \"skip_special_tokens\"} with --decode");
  a.flag({"--decode"}, "with --jsonl: decode id lists instead of encoding texts");
  a.flag({"--no-special"}, "with -p: do not add special tokens (BOS/EOS)");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  bool ok_args = a.has("-m") && (a.has("--jsonl") != a.has("-p")) && !(a.has("--decode") && !a.has("--jsonl"));
  if (a.help() || !ok_args) {
    std::printf("usage: pipit tokenize -m MODEL -p TEXT\n"
                "       pipit tokenize -m MODEL --jsonl IN          writes {\"ids\", \"ids_special\", \"decoded\"}\n"
                "       pipit tokenize -m MODEL --decode --jsonl IN writes {\"decoded\"}\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  auto tok = load_tokenizer(a.get("-m"));  // a folder, .pipit or .gguf (runtime/loader.h)
  if (!tok) return fail(a, tok.status().message());
  const Tokenizer& t = **tok;

  if (a.has("-p")) {
    auto ids = t.encode(a.get("-p"), !a.has("--no-special"));
    if (!ids) return fail(a, ids.status().message());
    std::string line;
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i) line += ' ';
      line += std::to_string((*ids)[i]);
    }
    std::printf("%s\n", line.c_str());
    return 0;
  }
  bool decode = a.has("--decode");
  Status st = for_each_input_line(a.get("--jsonl"), Limits::kMaxPromptFile, [&](const std::string& line) -> Status {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Error::invalid_argument("not a JSON object");
    return decode ? decode_line(t, j) : encode_line(t, j);
  });
  if (!st) return fail(a, st.message());
  if (const std::string err = stdout_error(); !err.empty()) return fail(a, err);
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("tokenize", "encode/decode text with a model's tokenizer (JSONL in, JSONL out)", cmd_tokenize);

}  // namespace pipit::cli
