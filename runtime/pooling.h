// Embeddings (/v1/embeddings, pipit_embed): a text's vector from the model's last hidden states (after the final norm), pooled as the
// checkpoint's sentence-transformers config says: modules.json names a Pooling module whose config.json sets one
// of pooling_mode_mean_tokens / pooling_mode_lasttoken / pooling_mode_cls_token, and an optional Normalize module
// (L2). A checkpoint without that config gets a clear error rather than a guess: a decoder-only chat model was not
// trained to put a sentence's meaning in any one pooled vector, so pipit does not pick a pooling for it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace pipit {

class Session;

struct PoolingConfig {
  enum class Mode { kNone, kMean, kLastToken, kCls };
  Mode mode = Mode::kNone;
  bool normalize = false;
  std::string error;  // why mode is kNone: no config, or a pooling pipit does not do
};

// Reads DIR/modules.json and its Pooling module's config.json. `model_path` that is not a directory (a .pipit or
// .gguf file) has no such config.
PoolingConfig read_pooling_config(const std::string& model_path);

const char* pooling_name(PoolingConfig::Mode m);

// rows: [n_rows, n_embd] hidden states of one text, in token order (for kLastToken only the last row is read).
std::vector<float> pool_rows(const float* rows, int64_t n_rows, int64_t n_embd, const PoolingConfig& cfg);

// The pooled embedding of `ids` through `s` (its context is reset before and after): the final norm's rows, seen
// through the context's tensor hook, pooled by `cfg` (whose mode must not be kNone).
Result<std::vector<float>> embed_tokens(Session& s, const std::vector<int32_t>& ids, const PoolingConfig& cfg);

}  // namespace pipit
