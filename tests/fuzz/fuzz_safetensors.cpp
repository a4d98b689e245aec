// libFuzzer target: the safetensors reader on arbitrary bytes; accepted tensors are read in full.
#include <cstddef>
#include <cstdint>

#include "format/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = pipit::SafetensorsFile::parse(data, size, nullptr, "fuzz");
  if (!f.is_ok()) return 0;
  volatile uint8_t sink = 0;
  for (auto& [name, t] : f->tensors()) {
    const uint8_t* p = t.data();
    for (size_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];
  }
  return 0;
}
