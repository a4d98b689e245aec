// libFuzzer target: the GGUF reader and the GGUF -> HF import (names, config, q/k un-permutation, rope_freqs,
// tokenizer.json) on arbitrary bytes. Accepted tensors are read in full; an accepted vocabulary is built into the
// tokenizer as loading a .gguf does (Tokenizer::load_parts), which then encodes and decodes a text.
#include <cstddef>
#include <cstdint>

#include "convert/gguf_import.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = pipit::GgufFile::parse(data, size, nullptr, "fuzz");
  if (!f.is_ok()) return 0;
  volatile uint8_t sink = 0;
  for (auto& ti : f->tensors()) {
    auto t = f->tensor(ti);
    if (!t.is_ok()) continue;
    for (size_t i = 0; i < t->nbytes(); ++i) sink = sink ^ t->data()[i];
  }
  for (auto& [k, v] : f->metadata()) (void)v.to_string();
  auto c = pipit::import_gguf(*f);
  if (!c.is_ok()) return 0;
  if (c->tokenizer_parts) {
    auto t = pipit::Tokenizer::load_parts(pipit::TokenizerParts(*c->tokenizer_parts));
    if (t.is_ok()) {
      auto ids = (*t)->encode("Hello world, 你好 \xff <|im_start|>", true);
      if (ids.is_ok()) (void)(*t)->decode(*ids, false);
    }
  }
  pipit::with_tokenizer_texts(*c);  // the tokenizer.json text pipit convert would write
  return 0;
}
