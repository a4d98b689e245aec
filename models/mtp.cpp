// Finding a model's multi-token-prediction head (see mtp.h).
#include "models/mtp.h"

namespace pipit {

Result<MtpModel*> mtp_of(Model& m) {
  auto* h = dynamic_cast<MtpModel*>(&m);
  if (!h)
    return Error::unsupported("[mtp] {} has no multi-token-prediction head (Qwen3.5 checkpoints carry one)",
                              m.info().arch);
  const std::string why = h->mtp_missing();
  if (!why.empty()) return Error::unsupported("[mtp] {}", why);
  return h;
}

}  // namespace pipit
