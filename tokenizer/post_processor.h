// Post-processors (private header): add the special tokens (BOS/EOS, CLS/SEP) around an encoded sequence when
// add_special_tokens is on. Only single sequences are encoded by pipit, so only "single" templates run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
  virtual size_t added_tokens() const = 0;  // ids added to a single sequence when add_special_tokens is on
};

Result<std::unique_ptr<PostProcessor>> parse_post_processor(const nlohmann::json& j, const std::string& where,
                                                            int depth = 0);

}  // namespace pipit::tok
