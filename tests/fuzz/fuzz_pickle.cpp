// libFuzzer target: the safe unpickler + state-dict extraction, and (for inputs that start like a zip) the whole
// torch.save reader: zip directory, data.pkl, storages, strided copies.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "convert/pickle.h"
#include "convert/torch_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
    std::vector<std::string> notes;
    auto t = pipit::parse_torch_checkpoint(data, size, nullptr, "fuzz", &notes);
    if (t.is_ok()) {
      volatile uint8_t sink = 0;
      for (auto& [name, x] : *t)
        for (size_t i = 0; i < x.nbytes(); ++i) sink = sink ^ x.data()[i];
    }
    return 0;
  }
  auto p = pipit::unpickle(data, size, "fuzz");
  if (p.is_ok()) (void)pipit::torch_state_dict(*p, "fuzz");
  return 0;
}
