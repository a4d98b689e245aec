// HfConfig: config.json parsing with field-naming errors.
#include "models/hf_config.h"

#include <cmath>
#include <map>

#include "core/json_depth.h"
#include "core/limits.h"
#include "core/storage.h"

namespace pipit {

Result<HfConfig> HfConfig::parse(const std::string& text, const std::string& origin) {
  if (json_depth(text) > kMaxJsonDepth)
    return Error::format("[config] {}: JSON nested deeper than {} levels", origin, kMaxJsonDepth);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::format("[config] {}: not valid JSON", origin);
  if (!j.is_object()) return Error::format("[config] {}: expected a JSON object", origin);
  HfConfig c(std::move(j));
  c.origin_ = origin;
  return c;
}

Result<HfConfig> HfConfig::load(const std::string& path) {
  PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse(text, path);
}

std::string HfConfig::model_type() const { return get_string_or("model_type", ""); }

HfConfig HfConfig::sub(const std::string& key) const {
  if (j_.contains(key) && j_[key].is_object()) {
    HfConfig c(j_[key]);
    c.origin_ = origin_ + ":" + key;
    return c;
  }
  return *this;
}

Result<int64_t> HfConfig::get_int(const std::string& key) const {
  if (!has(key)) return Error::invalid_argument("[config] {}: missing field '{}'", origin_, key);
  const auto& v = j_[key];
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    return Error::invalid_argument("[config] {}: field '{}' is {}, too large", origin_, key, v.get<uint64_t>());
  if (v.is_number_integer()) return v.get<int64_t>();
  // 64.0 is 64; 1e30 is not an int64 (converting it would be undefined), nor is 64.5.
  if (v.is_number_float() && std::fabs(v.get<double>()) < 9.2e18 && v.get<double>() == std::trunc(v.get<double>()))
    return int64_t(v.get<double>());
  return Error::invalid_argument("[config] {}: field '{}' is {}, expected an integer", origin_, key,
                                 v.is_structured() ? std::string(v.type_name()) : v.dump());
}

int64_t HfConfig::get_int_or(const std::string& key, int64_t def) const {
  auto r = get_int(key);
  return r.is_ok() ? *r : def;
}

Result<double> HfConfig::get_float(const std::string& key) const {
  if (!has(key)) return Error::invalid_argument("[config] {}: missing field '{}'", origin_, key);
  const auto& v = j_[key];
  if (v.is_number()) return v.get<double>();
  return Error::invalid_argument("[config] {}: field '{}' is {}, expected a number", origin_, key,
                                 v.is_structured() ? std::string(v.type_name()) : v.dump());
}

double HfConfig::get_float_or(const std::string& key, double def) const {
  auto r = get_float(key);
  return r.is_ok() ? *r : def;
}

bool HfConfig::get_bool_or(const std::string& key, bool def) const {
  return has(key) && j_[key].is_boolean() ? j_[key].get<bool>() : def;
}

std::string HfConfig::get_string_or(const std::string& key, const std::string& def) const {
  return has(key) && j_[key].is_string() ? j_[key].get<std::string>() : def;
}

std::vector<int64_t> HfConfig::get_int_list(const std::string& key) const {
  std::vector<int64_t> out;
  if (!has(key)) return out;
  const auto& v = j_[key];
  if (v.is_number_integer()) out.push_back(v.get<int64_t>());
  if (v.is_array())
    for (auto& x : v)
      if (x.is_number_integer()) out.push_back(x.get<int64_t>());
  return out;
}

namespace {

// The size fields models read, by kind: [min, max]. A field absent from this table is not checked here.
struct SizeRule {
  int64_t min, max;
  const char* kind;
};
const std::map<std::string, SizeRule>& size_rules() {
  static const std::map<std::string, SizeRule> r = [] {
    std::map<std::string, SizeRule> m;
    const SizeRule dim{0, Limits::kMaxDim, "dimension"}, head_dim{0, Limits::kMaxHeadDim, "head dimension"},
        heads{0, Limits::kMaxHeads, "head count"}, layers{0, Limits::kMaxLayers, "layer count"},
        vocab{0, Limits::kMaxVocab, "vocabulary size"}, experts{0, Limits::kMaxExperts, "expert count"},
        pos{0, Limits::kMaxPositions, "position count"}, image{0, Limits::kMaxImageSide, "image size"},
        id{-1, Limits::kMaxTokenId, "token id"};
    for (const char* k : {"hidden_size", "intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
                          "embed_dim", "out_hidden_size", "projection_dim", "hidden_dim", "kv_lora_rank",
                          "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                          "num_channels", "in_chans", "in_channels", "hidden_size_per_layer_input"})
      m[k] = dim;
    m["head_dim"] = m["global_head_dim"] = head_dim;
    for (const char* k : {"num_attention_heads", "num_key_value_heads", "num_heads", "num_global_key_value_heads"})
      m[k] = heads;
    for (const char* k : {"num_hidden_layers", "num_layers", "depth", "sliding_window_pattern", "no_rope_layer_interval",
                          "decoder_sparse_step", "first_k_dense_replace", "num_kv_shared_layers"})
      m[k] = layers;
    m["vocab_size"] = m["vocab_size_per_layer_input"] = vocab;
    for (const char* k : {"num_experts", "num_local_experts", "num_experts_per_tok", "n_routed_experts",
                          "n_shared_experts", "experts_per_token", "top_k_experts"})
      m[k] = experts;
    for (const char* k : {"max_position_embeddings", "original_max_position_embeddings", "sliding_window",
                          "window_size"})
      m[k] = pos;
    for (const char* k : {"image_size", "patch_size", "spatial_patch_size", "temporal_patch_size", "spatial_merge_size"})
      m[k] = image;
    for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id", "image_token_id", "image_token_index",
                          "video_token_id", "vision_start_token_id", "vision_end_token_id", "audio_token_id",
                          "boi_token_id", "eoi_token_id", "boa_token_id", "eoa_token_id"})
      m[k] = id;
    return m;
  }();
  return r;
}

Status check_size(const std::string& where, const std::string& key, const nlohmann::json& v, const SizeRule& r) {
  auto bad = [&](const std::string& what) {
    return Error::invalid_argument("[config] {}: field '{}' is {}; a {} must be an integer in [{}, {}]", where, key,
                                   what, r.kind, r.min, r.max);
  };
  if (v.is_null()) return Status::ok();  // HF writes null for "not used" (sliding_window, pad_token_id)
  if (v.is_array() && std::string(r.kind) == "token id") {  // eos_token_id may list several
    for (const auto& x : v) PIPIT_TRY(check_size(where, key, x, r));
    return Status::ok();
  }
  if (v.is_boolean()) return bad(v.dump());
  if (v.is_structured() || v.is_string()) return bad(std::string(v.is_string() ? "a " : "an ") + v.type_name());
  double x;
  if (v.is_number_unsigned()) x = double(v.get<uint64_t>());
  else if (v.is_number_integer()) x = double(v.get<int64_t>());
  else x = v.get<double>();
  if (!std::isfinite(x) || x != std::trunc(x)) return bad(v.dump());
  if (x < double(r.min) || x > double(r.max)) return bad(v.dump());
  return Status::ok();
}

// The float fields models read, with the range outside which every logit would be NaN or inf (an eps below 0 takes
// the square root of a negative number, a scale of 0 divides by it, a soft-cap of -1 flips the logits, ...).
// RoPE bases and scaling factors are checked where the frequencies are made (models/rope.cpp).
struct FloatRule {
  double min, max;
  bool min_open;  // min itself is refused
  const char* kind;
};
const std::map<std::string, FloatRule>& float_rules() {
  static const std::map<std::string, FloatRule> r = [] {
    std::map<std::string, FloatRule> m;
    for (const char* k : {"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps"})
      m[k] = {0.0, 1.0, false, "norm epsilon"};
    m["partial_rotary_factor"] = {0.0, 1.0, true, "rotary fraction"};
    for (const char* k : {"final_logit_softcapping", "attn_logit_softcapping"}) m[k] = {0.0, 1e9, false, "soft-cap"};
    for (const char* k : {"query_pre_attn_scalar", "routed_scaling_factor", "scale_emb", "scale_depth",
                          "dim_model_base", "swiglu_alpha", "swiglu_limit", "logit_scale"})
      m[k] = {0.0, 1e9, true, "scale"};
    return m;
  }();
  return r;
}

Status check_float(const std::string& where, const std::string& key, const nlohmann::json& v, const FloatRule& r) {
  if (v.is_null()) return Status::ok();  // "not used" (a soft-cap of null is none)
  const double x = v.is_number() ? v.get<double>() : 0.0;
  if (v.is_number() && std::isfinite(x) && (r.min_open ? x > r.min : x >= r.min) && x <= r.max) return Status::ok();
  return Error::invalid_argument("[config] {}: field '{}' is {}; a {} must be a finite number in {}{}, {}]", where, key,
                                 v.is_structured() ? std::string(v.type_name()) : v.dump(), r.kind,
                                 r.min_open ? "(" : "[", r.min, r.max);
}

Status validate_object(const nlohmann::json& j, const std::string& where, int depth) {
  if (depth > 8) return Status::ok();  // configs nest 2-3 levels; deeper objects are nothing a model reads
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& rules = size_rules();
    const auto& frules = float_rules();
    if (auto r = rules.find(it.key()); r != rules.end()) PIPIT_TRY(check_size(where, it.key(), it.value(), r->second));
    else if (auto f = frules.find(it.key()); f != frules.end())
      PIPIT_TRY(check_float(where, it.key(), it.value(), f->second));
    else if (it.value().is_object()) PIPIT_TRY(validate_object(it.value(), where + ":" + it.key(), depth + 1));
  }
  return Status::ok();
}

}  // namespace

Status HfConfig::validate_sizes() const {
  if (!j_.is_object()) return Error::format("[config] {}: expected a JSON object", origin_);
  return validate_object(j_, origin_, 0);
}

}  // namespace pipit
