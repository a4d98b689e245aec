// Shared pieces of the image processors (private to models/vision): preprocessor_config.json field readers with
// range checks, Python rounding, and HF's rescale + normalize into CHW planes.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/vision/image.h"
#include "models/vision/image_processor.h"

namespace pipit::image_fields {

// Python round(): half to even (the default rounding mode of nearbyint).
inline int64_t py_round(double x) { return int64_t(std::nearbyint(x)); }

template <class T>
Status read_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, T* out) {
  if (!j.contains(key) || j[key].is_null()) return Status::ok();
  const auto& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    return Error::invalid_argument("[image processor] {}: {} must be an integer in [{}, {}]", key, v.dump(), lo, hi);
  *out = T(v.get<int64_t>());
  return Status::ok();
}

Status read_bool(const nlohmann::json& j, const char* key, bool* out);
Status read_triple(const nlohmann::json& j, const char* key, bool positive, std::array<float, 3>* out);

// CHW float planes from 8-bit RGB: rescale (double multiply, cast to float) then normalize (float), as HF.
void rescale_normalize(const Image& img, const ImageProcessorConfig& c, float* out);

}  // namespace pipit::image_fields
