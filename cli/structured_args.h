// Structured output options for the commands that generate (run, chat): --grammar / --grammar-file (GBNF) and
// --json-schema / --json-schema-file (a JSON schema compiled to GBNF), as llama.cpp names them. The answer then
// follows the grammar token by token (runtime/grammar.h) on the one generation path the server uses too.
#pragma once

#include <memory>

#include "cli/args.h"
#include "core/status.h"

namespace pipit {
class Grammar;
}

namespace pipit::cli {

void add_structured_options(Args& a);
// The grammar the options ask for; null when none is given. At most one of the four.
Result<std::shared_ptr<const Grammar>> structured_grammar(const Args& a);

}  // namespace pipit::cli
