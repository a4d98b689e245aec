// libFuzzer target: the .pipit reader on arbitrary bytes. Every accepted file must have every tensor inside the
// buffer (reading all tensor bytes lets ASan catch any bounds slip).
#include <cstddef>
#include <cstdint>

#include "format/pipit_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = pipit::PipitFile::parse(data, size, nullptr, "fuzz");
  if (!f.is_ok()) return 0;
  volatile uint8_t sink = 0;
  for (auto& [name, t] : f->tensors()) {
    const uint8_t* p = t.data();
    for (size_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];
  }
  (void)f->text("tokenizer");
  if (auto b = f->blob("tokenizer_compiled"))  // inside the buffer: ASan catches a bounds slip
    for (char c : *b) sink = sink ^ uint8_t(c);
  return 0;
}
