// HfConfig: config.json parsing with field-naming errors.
#include "models/hf_config.h"

#include "core/storage.h"

namespace pipit {

Result<HfConfig> HfConfig::parse(const std::string& text, const std::string& origin) {
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
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && v.get<double>() == double(int64_t(v.get<double>()))) return int64_t(v.get<double>());
  return Error::invalid_argument("[config] {}: field '{}' is {}, expected an integer", origin_, key, v.dump());
}

int64_t HfConfig::get_int_or(const std::string& key, int64_t def) const {
  auto r = get_int(key);
  return r.is_ok() ? *r : def;
}

Result<double> HfConfig::get_float(const std::string& key) const {
  if (!has(key)) return Error::invalid_argument("[config] {}: missing field '{}'", origin_, key);
  const auto& v = j_[key];
  if (v.is_number()) return v.get<double>();
  return Error::invalid_argument("[config] {}: field '{}' is {}, expected a number", origin_, key, v.dump());
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

}  // namespace pipit
