// Weights the loader leaves where the file maps them, in their file dtype (runtime/loader.cpp rehome_weights): tables
// a model reads only by rows (Gemma 4's per-layer embeddings: 262144 x 8960 in E2B, 1.3 GB at q4_0, of which a
// forward reads one row per token) and tensors it does not read at all (Gemma 4's vision and audio towers while they
// are not implemented). Packing them into panels or copying them to anonymous memory would make them resident for
// nothing. The model file registers name patterns for its model_type, beside its own code.
#pragma once

#include <initializer_list>
#include <string>

namespace pipit {

// pattern: "prefix*", "*suffix" or an exact name.
void register_mapped_weights(const char* model_type, const char* pattern);
bool keep_mapped(const std::string& model_type, const std::string& name);

struct MappedWeightsRegistrar {
  MappedWeightsRegistrar(const char* model_type, std::initializer_list<const char*> patterns) {
    for (const char* p : patterns) register_mapped_weights(model_type, p);
  }
};

}  // namespace pipit
