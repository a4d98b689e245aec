// What the quantization recipe (convert/recipe.cpp) needs to know about a family beyond its general rules: records a
// model file registers beside its own code for its model_type(s), read by the converter for the checkpoint's
// model_type, so the recipe names no family and holds no family's tensor names. Use one for a tensor whose error
// the general rules would make too large (a router whose rounding picks another expert, an encoder every soft token
// goes through), with the measurement that justified it in a comment where it is registered.
//
// Where they stand in the recipe (convert/recipe.h): after the user's --recipe rules, the source-kind rules (auto,
// non-weights, mxfp4 kept, 1-D and biases -> f32), the output head and, outside the K-quant mixes, the token
// embedding; before the default type (or the mix's per-layer types). The first record that matches decides: a
// family's records in the order it registered them.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

namespace pipit {

// What a matching tensor gets.
enum class RuleGives {
  kQ8_0,    // q8_0
  kSource,  // its source dtype, unchanged
  kHalf,    // 16-bit: bf16 when the source is bf16, else f16
  kMxfp4,   // mxfp4 (needs a row length that is a multiple of 32 like q4_0, else the general 16-bit fallback)
};

struct FamilyRecipeRule {
  std::string label;  // the tensor's rule in convert's report, e.g. "MoE router"
  // A tensor matches when its name starts with one of `prefix`, ends with one of `suffix` or contains one of
  // `contains` (at least one of the three is set).
  std::vector<std::string> prefix, suffix, contains;
  int ndim = 0;  // 2 or 3 (stacked experts [E, out, in]): only tensors of that rank; 0: any matrix
  // Only in a checkpoint holding a tensor whose name contains one of these (an MoE rule needs the experts, which
  // a family's dense variants lack); empty: always.
  std::vector<std::string> only_with;
  // The canonical --quant values it applies under: "q8_0", "q4_0", "q4_k_m", "q4_k_s", "q5_k_m", "q5_k_s", "q6_k",
  // "f16", "bf16", "f32" (never under "auto", which keeps every source dtype).
  std::vector<std::string> quants;
  RuleGives gives = RuleGives::kQ8_0;
};

// Rules registered for a set of model types. A model_type's rules are tried in registration order: the order in
// the list, and registrations in one file in the order they are declared; registrations in different files run
// in no defined order, so a model_type's rules belong in one file.
struct FamilyRecipeRules {
  std::vector<std::string> model_types;
  std::vector<FamilyRecipeRule> rules;
};

void register_family_recipe_rules(FamilyRecipeRules rules);
// The rules of `model_type`, first match first (empty for most families).
std::vector<const FamilyRecipeRule*> family_recipe_rules(const std::string& model_type);
// Every registration, ordered by its first model type (for the recipe's description and the layering test).
std::vector<const FamilyRecipeRules*> all_family_recipe_rules();

// The two rules every sparse-MoE family takes, in a checkpoint holding a tensor that contains `experts`:
//  - under q8_0 / q4_0 the router (the tensor ending in `router_suffix`, E x n_embd) keeps its source dtype: a
//    rounding error there moves a token to another expert, a discrete jump rather than a small error, and it is E
//    rows per layer;
//  - under q4_0 the attention is q8_0: a few % of the weights, but it runs for every token while each expert runs for
//    a few; on the qwen3_moe test checkpoint it carried most of the q4 error (relative RMS of the logits 0.168 ->
//    0.027).
inline std::vector<FamilyRecipeRule> moe_recipe_rules(const char* router_suffix, const char* experts) {
  return {{.label = "MoE router", .suffix = {router_suffix}, .only_with = {experts}, .quants = {"q8_0", "q4_0"},
           .gives = RuleGives::kSource},
          {.label = "MoE attention", .contains = {".self_attn."}, .only_with = {experts}, .quants = {"q4_0"},
           .gives = RuleGives::kQ8_0}};
}

struct FamilyRecipeRegistrar {
  // A family's own rules, then `more` (e.g. moe_recipe_rules()), in that order.
  FamilyRecipeRegistrar(std::initializer_list<const char*> model_types, std::initializer_list<FamilyRecipeRule> rules,
                        std::vector<FamilyRecipeRule> more = {}) {
    std::vector<FamilyRecipeRule> all(rules);
    all.insert(all.end(), more.begin(), more.end());
    register_family_recipe_rules({std::vector<std::string>(model_types.begin(), model_types.end()), std::move(all)});
  }
};

}  // namespace pipit
