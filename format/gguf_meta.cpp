// llama.cpp metadata read with checked types: see gguf_meta.h.
#include "format/gguf_meta.h"

namespace pipit {

Result<int64_t> GgufMeta::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return Error::format("[gguf] {}: missing metadata '{}.{}'", f_.path(), arch_, key);
  if (!v->is_int() || v->as_int() < 0)
    return Error::format("[gguf] {}: '{}.{}' is {}, expected a non-negative integer", f_.path(), arch_, key,
                         v->type == GgufType::kArray ? "an array (per-layer values are not supported)"
                                                     : v->to_string());
  return v->as_int();
}

Result<int64_t> GgufMeta::get_int_or(const std::string& key, int64_t def) const {
  if (!find(key)) return def;
  return get_int(key);
}

Result<double> GgufMeta::get_float_or(const std::string& key, double def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (!v->is_number()) return Error::format("[gguf] {}: '{}.{}' is not a number", f_.path(), arch_, key);
  return v->as_double();
}

Result<std::vector<int64_t>> GgufMeta::per_layer_ints(const std::string& key, int64_t n_layer,
                                                      std::optional<int64_t> def) const {
  const GgufValue* v = find(key);
  if (v && v->type == GgufType::kArray) {
    if (int64_t(v->arr_size()) != n_layer)
      return Error::format("[gguf] {}: {}.{} holds {} values for {} layers", f_.path(), arch_, key, v->arr_size(),
                           n_layer);
    std::vector<int64_t> out;
    for (size_t k = 0; k < v->arr_size(); ++k) {
      const GgufValue x = v->at(k);
      if (!x.is_int() || x.as_int() < 0)
        return Error::format("[gguf] {}: {}.{} must hold non-negative integers", f_.path(), arch_, key);
      out.push_back(x.as_int());
    }
    return out;
  }
  PIPIT_ASSIGN_OR_RETURN(int64_t one, def ? get_int_or(key, *def) : get_int(key));
  return std::vector<int64_t>(size_t(n_layer), one);
}

Result<std::vector<bool>> GgufMeta::sliding_layers(int64_t n_layer, int64_t default_pattern) const {
  std::vector<bool> sliding(size_t(n_layer), false);
  const GgufValue* pv = find("attention.sliding_window_pattern");
  if (pv && pv->type == GgufType::kArray) {
    if (int64_t(pv->arr_size()) != n_layer || (pv->arr_size() && !pv->at(0).is_int()))
      return Error::format("[gguf] {}: {}.attention.sliding_window_pattern must hold {} bools", f_.path(), arch_,
                           n_layer);
    for (int64_t il = 0; il < n_layer; ++il) sliding[size_t(il)] = pv->at(size_t(il)).as_int() != 0;
    return sliding;
  }
  PIPIT_ASSIGN_OR_RETURN(int64_t n, get_int_or("attention.sliding_window_pattern", default_pattern));
  for (int64_t il = 0; il < n_layer; ++il) sliding[size_t(il)] = n == 0 || il % n < n - 1;
  return sliding;
}

Result<nlohmann::json> GgufMeta::rope_sections() const {
  const GgufValue* sv = find("rope.dimension_sections");
  if (!sv || sv->type != GgufType::kArray || sv->arr_size() < 3)
    return Error::format("[gguf] {}: {} needs the array '{}.rope.dimension_sections'", f_.path(), arch_, arch_);
  nlohmann::json sec = nlohmann::json::array();
  for (size_t k = 0; k < 3; ++k) {
    const GgufValue x = sv->at(k);
    if (!x.is_int() || x.as_int() < 0)
      return Error::format("[gguf] {}: {}.rope.dimension_sections must hold non-negative integers", f_.path(),
                           arch_);
    sec.push_back(x.as_int());
  }
  return sec;
}

Status gguf_check_layer_tensors(const GgufFile& f, int64_t n_layer,
                                const std::function<std::vector<const char*>(int64_t)>& need) {
  for (int64_t il = 0; il < n_layer; ++il)
    for (const char* n : need(il)) {
      const std::string name = "blk." + std::to_string(il) + "." + n;
      if (!f.find_tensor(name)) return Error::not_found("[gguf] {}: missing tensor '{}'", f.path(), name);
    }
  return Status::ok();
}

std::optional<std::pair<std::string, std::string>> gguf_layer_name(const std::string& g) {
  if (g.rfind("blk.", 0) != 0) return std::nullopt;
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot - 4 > 6) return std::nullopt;
  for (size_t k = 4; k < dot; ++k)
    if (g[k] < '0' || g[k] > '9') return std::nullopt;
  return std::pair{g.substr(4, dot - 4), g.substr(dot + 1)};
}

const GgufValue* gguf_clip_key(const GgufFile& f, const std::string& key) { return f.find("clip." + key); }

Result<int64_t> gguf_clip_int(const GgufFile& f, const std::string& key, std::optional<int64_t> def) {
  const GgufValue* v = gguf_clip_key(f, key);
  if (!v) {
    if (def) return *def;
    return Error::format("[gguf] {}: missing metadata 'clip.{}'", f.path(), key);
  }
  if (!v->is_int() || v->as_int() < 0 || v->as_int() > (int64_t(1) << 30))
    return Error::format("[gguf] {}: 'clip.{}' is {}, expected a non-negative integer", f.path(), key, v->to_string());
  return v->as_int();
}

Result<nlohmann::json> gguf_clip_floats(const GgufFile& f, const std::string& key, size_t n) {
  const GgufValue* v = gguf_clip_key(f, key);
  if (!v || v->type != GgufType::kArray || v->arr_size() != n)
    return Error::format("[gguf] {}: 'clip.{}' must be an array of {} numbers", f.path(), key, n);
  nlohmann::json a = nlohmann::json::array();
  for (size_t k = 0; k < n; ++k) {
    const GgufValue x = v->at(k);
    if (!x.is_number()) return Error::format("[gguf] {}: 'clip.{}' must hold numbers", f.path(), key);
    a.push_back(x.as_double());
  }
  return a;
}

Result<std::vector<std::string>> gguf_string_array(const GgufFile& f, const char* key, bool required) {
  std::vector<std::string> out;
  const GgufValue* v = f.find(key);
  if (!v) {
    if (required) return Error::not_found("[gguf] {}: no {}", f.path(), key);
    return out;
  }
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kString)
    return Error::format("[gguf] {}: {} is not an array of strings", f.path(), key);
  out.reserve(v->arr_size());
  for (size_t k = 0; k < v->arr_size(); ++k) out.emplace_back(v->str_at(k));
  return out;
}

Result<int64_t> gguf_token_id(const GgufFile& text, const std::string& token) {
  const GgufValue* v = text.find("tokenizer.ggml.tokens");
  if (v && v->type == GgufType::kArray)
    for (size_t i = 0; i < v->arr_size(); ++i)  // str_at is "" for elements that are not strings
      if (v->elem_type == GgufType::kString && v->str_at(i) == token) return int64_t(i);
  return Error::format("[gguf] {}: the vocabulary has no '{}' token, which images need", text.path(), token);
}

}  // namespace pipit
