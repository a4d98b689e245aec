// multimodal_suffix (see multimodal.h): a prompt with media, evaluated after a context that holds its beginning.
#include "runtime/multimodal.h"

namespace pipit {

// Session::eval(mm) places token i of mm at position n_past + rope_delta + mm.mrope_pos[i] and, after it, sets
// rope_delta to its own plus mm.rope_delta (each span's delta_after likewise). A context holding the first `from`
// tokens of the whole prompt stands at n_past = from with rope_delta = the whole prompt's offset there (the
// delta_after of the last span before `from`, 0 before any): subtracting both keeps every position the whole
// prompt gives.
Result<MultimodalPrompt> multimodal_suffix(const MultimodalPrompt& mm, int64_t from) {
  const int64_t n = int64_t(mm.tokens.size());
  if (from < 0 || from > n) return Error::internal("[multimodal] suffix from {} of a prompt of {} tokens", from, n);
  if (from == 0) return mm;
  int32_t delta = 0;  // the whole prompt's rope offset at `from`
  for (const auto& sp : mm.image_spans) {
    if (sp.begin < from && from < sp.end)
      return Error::internal("[multimodal] suffix from {}: inside the media span [{}, {})", from, sp.begin, sp.end);
    if (sp.end <= from) delta = sp.delta_after;
  }
  MultimodalPrompt out;
  out.tokens.assign(mm.tokens.begin() + from, mm.tokens.end());
  out.embd = mm.embd;  // rows keep their numbers
  out.deepstack = mm.deepstack;
  if (!mm.embd_row.empty()) out.embd_row.assign(mm.embd_row.begin() + from, mm.embd_row.end());
  if (!mm.mrope_pos.empty()) {
    const int32_t shift = int32_t(from) + delta;
    out.mrope_pos.reserve(size_t(3 * (n - from)));
    for (int64_t s = 0; s < 3; ++s)
      for (int64_t i = from; i < n; ++i) out.mrope_pos.push_back(mm.mrope_pos[size_t(s * n + i)] - shift);
    out.rope_delta = mm.rope_delta - delta;
  }
  for (const auto& sp : mm.image_spans)
    if (sp.begin >= from) out.image_spans.push_back({sp.begin - from, sp.end - from, sp.delta_after - delta});
  return out;
}

}  // namespace pipit
