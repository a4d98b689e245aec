// safetensors: bounds-checked parsing of the header, views into the mapping, and a small writer.
#include "format/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/json_depth.h"
#include "core/output_file.h"

namespace pipit {

bool safetensors_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> kMap[] = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"I32", DType::I32}, {"I8", DType::I8},
      {"U8", DType::I8}};  // raw bytes (GPT-OSS's MXFP4 *_blocks / *_scales); read only
  for (auto& [n, t] : kMap)
    if (s == n) {
      *out = t;
      return true;
    }
  return false;
}

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I8: return "I8";
    default: return nullptr;
  }
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  PIPIT_ASSIGN_OR_RETURN(auto map, MmapStorage::open(path));
  const uint8_t* data = map->data();
  size_t size = map->size();
  return parse(data, size, std::move(map), path);
}

Result<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size, std::shared_ptr<Storage> owner,
                                               const std::string& name) {
  const std::string ctx = "[safetensors] " + name;
  if (size < 8) return Error::format("{}: file is {} bytes, too small for the 8-byte header length", ctx, size);
  uint64_t n = 0;
  std::memcpy(&n, data, 8);
  if (n > size - 8)
    return Error::format("{}: header length {} exceeds the file size {} (truncated or not a safetensors file)", ctx,
                         n, size);
  if (n > (100u << 20)) return Error::format("{}: header length {} is implausibly large", ctx, n);
  if (json_depth(std::string_view(reinterpret_cast<const char*>(data) + 8, n)) > kMaxJsonDepth)
    return Error::format("{}: header JSON nested deeper than {} levels", ctx, kMaxJsonDepth);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(data) + 8, reinterpret_cast<const char*>(data) + 8 + n);
  } catch (const std::exception& e) {
    return Error::format("{}: header is not valid JSON: {}", ctx, e.what());
  }
  if (!header.is_object()) return Error::format("{}: header is not a JSON object", ctx);
  const uint8_t* base = data + 8 + n;
  const uint64_t data_size = size - 8 - n;

  SafetensorsFile f;
  f.path_ = name;
  for (auto& [key, val] : header.items()) {
    if (key == "__metadata__") {
      if (val.is_object())
        for (auto& [mk, mv] : val.items())
          if (mv.is_string()) f.metadata_[mk] = mv.get<std::string>();
      continue;
    }
    const std::string tctx = ctx + ": tensor '" + key + "'";
    if (!val.is_object() || !val.contains("dtype") || !val.contains("shape") || !val.contains("data_offsets"))
      return Error::format("{}: entry needs dtype, shape and data_offsets", tctx);
    const auto& jd = val["dtype"];
    const auto& js = val["shape"];
    const auto& jo = val["data_offsets"];
    if (!jd.is_string() || !js.is_array() || !jo.is_array() || jo.size() != 2)
      return Error::format("{}: malformed dtype/shape/data_offsets", tctx);
    DType dt;
    if (!safetensors_dtype(jd.get<std::string>(), &dt))
      return Error::unsupported("{}: dtype {} is not supported (F32, F16, BF16, I32, I8, U8 are)", tctx,
                                jd.get<std::string>());
    if (js.size() > size_t(kMaxDims))
      return Error::unsupported("{}: {} dimensions, at most {} supported", tctx, js.size(), kMaxDims);
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (auto& d : js) {
      if (!d.is_number_unsigned()) return Error::format("{}: shape entries must be non-negative integers", tctx);
      uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t(1) << 40) || (v && numel > (uint64_t(1) << 40) / v))
        return Error::format("{}: shape {} is too large", tctx, js.dump());
      numel *= v;
      shape.push_back(int64_t(v));
    }
    if (!jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
      return Error::format("{}: data_offsets must be non-negative integers", tctx);
    uint64_t b = jo[0].get<uint64_t>(), e = jo[1].get<uint64_t>();
    uint64_t want = numel * uint64_t(dtype_info(dt).block_bytes);
    if (b > e || e > data_size)
      return Error::format("{}: data_offsets [{}, {}] outside the data section of {} bytes (truncated file?)", tctx, b,
                           e, data_size);
    if (e - b != want)
      return Error::format("{}: data_offsets span {} bytes but dtype {} and shape {} need {}", tctx, e - b,
                           jd.get<std::string>(), js.dump(), want);
    if (shape.empty()) shape.push_back(1);  // scalars become [1]
    f.tensors_[key] = Tensor::from_data(dt, shape, const_cast<uint8_t*>(base + b), owner);
  }
  return f;
}

Result<Tensor> SafetensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return Error::not_found("[safetensors] {}: no tensor '{}'", path_, name);
  return it->second;
}

Result<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
  SafetensorsSet set;
  const std::string index = dir + "/model.safetensors.index.json";
  std::vector<std::string> shards;
  if (file_exists(index)) {
    PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(index));
    if (json_depth(text) > kMaxJsonDepth)
      return Error::format("[safetensors] {}: JSON nested deeper than {} levels", index, kMaxJsonDepth);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return Error::format("[safetensors] {}: expected a JSON object with a weight_map", index);
    for (auto& [k, v] : j["weight_map"].items()) {
      if (!v.is_string()) return Error::format("[safetensors] {}: weight_map['{}'] is not a file name", index, k);
      std::string s = v.get<std::string>();
      if (s.find('/') != std::string::npos || s.find("..") != std::string::npos)
        return Error::format("[safetensors] {}: shard name '{}' must be a plain file name", index, s);
      if (std::find(shards.begin(), shards.end(), s) == shards.end()) shards.push_back(s);
    }
  } else if (file_exists(dir + "/model.safetensors")) {
    shards.push_back("model.safetensors");
  } else {
    return Error::not_found("[safetensors] {}: no model.safetensors or model.safetensors.index.json", dir);
  }
  for (auto& s : shards) {
    PIPIT_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(dir + "/" + s));
    for (auto& [k, t] : f.tensors()) {
      if (set.tensors_.count(k)) return Error::format("[safetensors] tensor '{}' appears in two shards", k);
      set.tensors_[k] = t;
    }
    set.files_.push_back(std::move(f));
  }
  return set;
}

Status write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (auto& [name, t] : tensors) {
    const char* dn = safetensors_dtype_name(t.dtype());
    if (!dn) return Error::unsupported("[safetensors] cannot write dtype {} ('{}')", dtype_name(t.dtype()), name);
    if (!t.is_contiguous()) return Error::invalid_argument("[safetensors] '{}' is not contiguous", name);
    h[name] = {{"dtype", dn}, {"shape", t.shape()}, {"data_offsets", {off, off + t.nbytes()}}};
    off += t.nbytes();
  }
  std::string hs = h.dump();
  while ((hs.size() + 8) % 8) hs += ' ';
  // a streaming writer (core/output_file.h): /dev/null and pipes take the bytes, a device or a full disk errs
  PIPIT_ASSIGN_OR_RETURN(std::FILE* f, open_output_stream(path, "[safetensors]"));
  const uint64_t n = hs.size();
  bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(hs.data(), 1, hs.size(), f) == hs.size();
  for (auto& [name, t] : tensors)
    ok = ok && std::fwrite(t.data(), 1, t.nbytes(), f) == t.nbytes();
  const int e = errno;
  Status closed = close_output(f, path, "[safetensors]");
  if (!ok) return Error::io("[safetensors] error writing the output '{}': {}", path, std::strerror(e));
  PIPIT_TRY(closed);
  return Status::ok();
}

}  // namespace pipit
