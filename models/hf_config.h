// Typed, checked access to a HuggingFace config.json. Every getter names the missing or mistyped field in its error,
// so "a config missing a field the family needs" tells the user which one.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit {

class HfConfig {
 public:
  HfConfig() = default;
  explicit HfConfig(nlohmann::json j) : j_(std::move(j)) {}
  static Result<HfConfig> parse(const std::string& text, const std::string& origin);
  static Result<HfConfig> load(const std::string& path);

  const nlohmann::json& json() const { return j_; }
  std::string model_type() const;  // "" when absent
  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  // The sub-config for VLMs ("text_config"), or this config itself.
  HfConfig sub(const std::string& key) const;

  Result<int64_t> get_int(const std::string& key) const;
  int64_t get_int_or(const std::string& key, int64_t def) const;
  Result<double> get_float(const std::string& key) const;
  double get_float_or(const std::string& key, double def) const;
  bool get_bool_or(const std::string& key, bool def) const;
  std::string get_string_or(const std::string& key, const std::string& def) const;
  // An int or a list of ints (eos_token_id may be either).
  std::vector<int64_t> get_int_list(const std::string& key) const;

  // Every size field a model reads (hidden_size, num_hidden_layers, head_dim, vocab_size, num_experts, image_size,
  // ... here and in nested objects such as text_config / vision_config / rope_scaling), checked before any model
  // sees it: an integer within core/limits.h's maximum for its kind. A wrong JSON type, a negative value, 2^31 or
  // 1e15 is an error naming the field, so no model allocates from such a value. Called by create_model.
  Status validate_sizes() const;

 private:
  nlohmann::json j_ = nlohmann::json::object();
  std::string origin_ = "config.json";
};

}  // namespace pipit
