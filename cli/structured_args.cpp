// --grammar, --grammar-file, --json-schema, --json-schema-file (see structured_args.h).
#include "cli/structured_args.h"

#include "core/storage.h"
#include "runtime/grammar.h"
#include "runtime/json_schema.h"

namespace pipit::cli {

namespace {
constexpr size_t kMaxGrammarFile = size_t(1) << 20;  // a GBNF or schema file: 1 MiB is far beyond any real one
}

void add_structured_options(Args& a) {
  a.option({"--grammar"}, "constrain the answer to this GBNF grammar (root rule: root)");
  a.option({"--grammar-file"}, "--grammar from a file");
  a.option({"--json-schema"}, "constrain the answer to JSON valid under this schema (e.g. '{\"type\": \"object\"}')");
  a.option({"--json-schema-file"}, "--json-schema from a file");
}

Result<std::shared_ptr<const Grammar>> structured_grammar(const Args& a) {
  const char* given = nullptr;
  for (const char* name : {"--grammar", "--grammar-file", "--json-schema", "--json-schema-file"}) {
    if (!a.has(name)) continue;
    if (given) return Error::invalid_argument("{} and {}: choose one", given, name);
    given = name;
  }
  if (!given) return std::shared_ptr<const Grammar>();
  const std::string name = given;
  std::string text = a.get(name);
  if (name.ends_with("-file")) {
    auto t = read_file(text, kMaxGrammarFile);
    if (!t) return t.status().with_context(name);
    text = std::move(t).value();
  }
  if (name.starts_with("--json-schema")) return grammar_from_json_schema(text, name);
  auto g = Grammar::parse(text);
  if (!g) return g.status().with_context(name);
  return g;
}

}  // namespace pipit::cli
