// layer_kinds (layer_types.h).
#include "models/layer_types.h"

namespace pipit {

Result<std::vector<bool>> layer_kinds(const HfConfig& cfg, const char* arch, int64_t n_layer, const char* yes,
                                      const char* no, const std::function<bool(int64_t layer)>& default_kind) {
  std::vector<bool> out;
  if (!cfg.has("layer_types")) {
    for (int64_t il = 0; il < n_layer; ++il) out.push_back(default_kind(il));
    return out;
  }
  const auto& lt = cfg.json()["layer_types"];
  if (!lt.is_array() || int64_t(lt.size()) != n_layer)
    return Error::invalid_argument("[{}] config field 'layer_types' must list {} layer types", arch, n_layer);
  for (size_t i = 0; i < lt.size(); ++i) {
    const std::string s = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
    if (s != yes && s != no)
      return Error::unsupported("[{}] layer_types[{}] is '{}', not a known layer type ({}, {})", arch, i, s, yes, no);
    out.push_back(s == yes);
  }
  return out;
}

}  // namespace pipit
