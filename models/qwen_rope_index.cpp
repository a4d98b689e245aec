// Qwen's get_rope_index (see qwen_rope_index.h).
#include "models/qwen_rope_index.h"

#include <algorithm>

namespace pipit {

Result<MediaPositions> qwen_rope_index(int64_t n_tokens, std::span<const MediaSpan> media, int merge_size) {
  MediaPositions out;
  out.n_stream = 3;
  std::vector<int32_t> pos[3];
  int32_t next = 0;  // the position the next text token takes
  int64_t i = 0;     // the next token
  auto text_until = [&](int64_t end) {
    for (; i < end; ++i, ++next)
      for (auto& s : pos) s.push_back(next);
  };
  for (const MediaSpan& m : media) {
    if (m.begin < i || m.end < m.begin || m.end > n_tokens)
      return Error::internal("[mrope] media span [{}, {}) out of order in a prompt of {} tokens", m.begin, m.end,
                             n_tokens);
    text_until(m.begin);
    // the LLM's grid: (t, h / merge, w / merge), row-major as the merger emits it
    const int64_t gt = m.grid_thw[0], gh = m.grid_thw[1] / merge_size, gw = m.grid_thw[2] / merge_size;
    if (gt * gh * gw != m.end - m.begin)
      return Error::internal("[image] grid {}x{}x{} for {} features", gt, gh, gw, m.end - m.begin);
    for (int64_t t = 0; t < gt; ++t)
      for (int64_t y = 0; y < gh; ++y)
        for (int64_t x = 0; x < gw; ++x) {
          pos[0].push_back(next + int32_t(t));
          pos[1].push_back(next + int32_t(y));
          pos[2].push_back(next + int32_t(x));
        }
    next += int32_t(std::max({gt, gh, gw}));
    i = m.end;
    out.delta_after.push_back(next - int32_t(m.end));
  }
  text_until(n_tokens);
  for (auto& s : pos) out.pos.insert(out.pos.end(), s.begin(), s.end());
  out.delta = next - int32_t(n_tokens);
  return out;
}

}  // namespace pipit
