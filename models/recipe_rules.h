// Tensors of a family that keep q8_0 where the 4-bit recipes (convert/recipe.cpp: q4, and the q4_k_m / q4_k_s mixes)
// would give them 4 bits: registered by the model file beside its own code, read by the converter for the
// checkpoint's model_type, so the recipe names no model. Use it for small parts whose error every token carries (an encoder's weights, a projector), with the
// measurement that justified it in a comment where it is registered.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

namespace pipit {

struct Q4Floor {
  std::string label;                  // the tensor's rule in convert's report (e.g. "Gemma 4 media towers")
  std::vector<std::string> prefixes;  // 2-D tensors whose names start with one of these
};

void register_q4_floor(const char* model_type, Q4Floor floor);
// The floors of `model_type` (empty for most families), and every registered one (for the recipe's description).
std::vector<const Q4Floor*> q4_floors(const std::string& model_type);
std::vector<const Q4Floor*> all_q4_floors();

struct Q4FloorRegistrar {
  Q4FloorRegistrar(const char* model_type, const char* label, std::initializer_list<const char*> prefixes) {
    register_q4_floor(model_type, Q4Floor{label, std::vector<std::string>(prefixes.begin(), prefixes.end())});
  }
};

}  // namespace pipit
