// Weights a model reads only by rows (embedding lookups), never as a matmul operand: Gemma 4's per-layer embedding
// table (262144 x 8960 in E2B: 1.3 GB at q4_0, of which a forward reads one row per token). The loader leaves them
// in the file mapping in their file dtype (runtime/loader.cpp rehome_weights): packing them into panels or copying
// them to anonymous memory would make the whole table resident. The model file registers a tensor-name suffix for
// its model_type, beside its own code.
#pragma once

#include <string>

namespace pipit {

void register_row_table(const char* model_type, const char* name_suffix);
bool is_row_table(const std::string& model_type, const std::string& name);

struct RowTableRegistrar {
  RowTableRegistrar(const char* model_type, const char* name_suffix) { register_row_table(model_type, name_suffix); }
};

}  // namespace pipit
