// The registry of checkpoint layout functions: see checkpoint_traits.h.
#include "models/checkpoint_traits.h"

#include <map>
#include <string>

namespace pipit {

namespace {

std::map<std::string, CheckpointLayoutFn>& layouts() {  // a function-local static: registrars run in any order
  static std::map<std::string, CheckpointLayoutFn> r;
  return r;
}

}  // namespace

void register_checkpoint_layout(const char* model_type, CheckpointLayoutFn fn) { layouts()[model_type] = fn; }

Status apply_checkpoint_layout(Checkpoint& c) {
  // a model_type that is not a string is reported by the model registry, not thrown here (json's value() throws)
  const auto mt = c.config.is_object() ? c.config.find("model_type") : c.config.end();
  if (mt == c.config.end() || !mt->is_string()) return Status::ok();
  auto it = layouts().find(mt->get<std::string>());
  return it == layouts().end() ? Status::ok() : it->second(c);
}

}  // namespace pipit
