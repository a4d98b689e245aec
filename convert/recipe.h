// Quantization recipes: which dtype each tensor gets. A recipe is an ordered list of rules (tensor-name glob ->
// dtype, first match wins); user rules from a JSON file come first, then the defaults for the requested --quant:
//   0. mxfp4 tensors                                    -> kept as they are (already 4.25 bits/weight; q4_0 would
//                                                          add error, q8_0 would double them for nothing)
//   1. 1-D tensors (norms, biases), and biases (*.bias, *_bias: per-expert [E, n] biases too) -> f32
//   2. the output head (lm_head, or the embedding when tied) -> q8_0 under q4, else the requested type
//   3. the token embedding (untied)                     -> the requested float type; under q8/q4 it stays 16-bit
//                                                          (bf16 when the source is bf16, else f16)
//   4. the rules of the checkpoint's family (its model_type), declared beside the model (models/recipe_rules.h)
//      with the measurement behind each: e.g. an MoE router kept at its source dtype (a rounding error there
//      sends a token to another expert), an MoE model's attention or a vision tower at q8_0 under q4, stacked
//      experts as mxfp4 under q4, recurrent gate projections at 16 bits. `pipit inspect` lists a file's rules.
//   5. everything else                                  -> the requested type
// The K-quant mixes (--quant q4_k_m / q4_k (= q4_k_m) / q4_k_s / q5_k_m / q5_k (= q5_k_m) / q5_k_s / q6_k) follow
// llama-quantize's defaults (llama_tensor_get_type, no imatrix) so a converted file and a downloaded one get the same
// types: 1-D -> f32; the output head (or tied embedding) -> q6_k; the family's rules registered for the mix (as
// rule 4: a family that keeps parts at q8_0 under q4 may keep them under q4_k_m / q4_k_s too); under _M, v_proj
// and down_proj of the layers use_more_bits(i, n) picks (i < n/8, i >= 7n/8, every third between) -> q6_k, because
// those two are the most sensitive to quantization error and holding them at 6.56 bits costs ~0.3 bits/weight
// overall; q4_k_s: v_proj of layers < 4 and down_proj of layers < n/8 -> q5_k; everything else (the untied
// embedding too) -> the base type.
// Rows that are not whole 256-weight super-blocks fall back as llama.cpp does (q4_k -> q5_0, q5_k -> q5_1,
// q6_k -> q8_0, output head -> q8_0).
// "auto" keeps every tensor's source dtype (GGUF Q8_0/Q4_0 stay as they are: no requantization).
// A quantized dtype needs a 2-D tensor (or stacked experts [E, out, in], names with ".experts.") whose input (last)
// dimension is a multiple of 32; a tensor that is not falls back to 16-bit (as rule 3) and the fallback is
// reported — e.g. stories260k's down_proj with an input of 172.
//
// Recipe file format (JSON): {"rules": [{"pattern": "model.layers.*.mlp.down_proj.weight", "dtype": "q8"}, ...]}
// dtype: f32, f16, bf16, q8 (= q8_0), q4 (= q4_0), q4_k, q5_k, q6_k, q4_1, q5_0, q5_1, or "source" (keep the
// source dtype). Globs: '*' any run of
// characters (dots included), '?' one character.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/checkpoint.h"
#include "core/dtype.h"
#include "core/status.h"

namespace pipit {

struct RecipeRule {
  std::string pattern;
  std::string dtype;  // canonical: f32 f16 bf16 q8_0 q4_0 source
};

struct Recipe {
  std::vector<RecipeRule> rules;
  static Result<Recipe> parse(const std::string& json_text, const std::string& origin);
  static Result<Recipe> load(const std::string& path);
};

bool glob_match(std::string_view pattern, std::string_view name);

// "q8" -> "q8_0", "q4" -> "q4_0", "q4_k" -> "q4_k_m", "q5_k" -> "q5_k_m", "f32"... unchanged, "auto"; error for
// anything else.
Result<std::string> canonical_quant(const std::string& s);
bool is_kquant_mix(const std::string& canonical);

struct TensorPlan {
  std::string name;
  DType src = DType::F32, dst = DType::F32;
  std::vector<int64_t> shape;
  std::string rule;      // which rule decided
  std::string fallback;  // why the wanted dtype could not be used ("" when it could)
  std::string wanted;    // dtype the rule asked for
};

// One plan per tensor of `c`, in name order. `quant` is canonical ("auto", "f32", ..., "q4_0").
Result<std::vector<TensorPlan>> plan_conversion(const Checkpoint& c, const std::string& quant, const Recipe& user);

// The default rules for `quant`, as lines for the file header and `pipit inspect`: the general ones and the family
// rules registered for `model_type` (models/recipe_rules.h), or every family's (each with its model types) when
// `model_type` is empty.
std::vector<std::string> default_rule_descriptions(const std::string& quant, const std::string& model_type = "");

}  // namespace pipit
