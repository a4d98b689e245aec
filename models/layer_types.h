// HF configs' per-layer `layer_types` (sliding / full attention, linear / full attention), read one way for every
// family: one entry per layer, each of two known names.
#pragma once

#include <functional>
#include <vector>

#include "models/hf_config.h"

namespace pipit {

// true where layer_types says `yes`, false where it says `no`; without the field, default_kind(layer) (the family's
// config default). A list of the wrong length, or an entry that is neither name, is an error naming the arch, the
// entry and both names.
Result<std::vector<bool>> layer_kinds(const HfConfig& cfg, const char* arch, int64_t n_layer, const char* yes,
                                      const char* no, const std::function<bool(int64_t layer)>& default_kind);

}  // namespace pipit
