// The quantization recipe's family rules (models/recipe_rules.h): a rule registered for a model_type is applied by
// plan_conversion to that model_type's checkpoints only, under the quantizations it names, in its place among the
// general rules (after a user's --recipe rule, the 1-D rule and the output head; before the default), and listed in
// the recipe's description. Every family's registration is checked for well-formed records.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "convert/recipe.h"
#include "models/model.h"
#include "models/recipe_rules.h"

namespace pipit {
namespace {

constexpr const char* kTestFamily = "recipe_rules_test_family";  // registered by no model

// Test-only rules: the order here is the order they are tried.
const FamilyRecipeRegistrar kTestRules(
    {kTestFamily},
    {{.label = "test: gate suffix", .suffix = {".mlp.gate_proj.weight"}, .quants = {"q4_0", "q8_0"},
      .gives = RuleGives::kSource},
     {.label = "test: attention", .contains = {".self_attn."}, .only_with = {".mlp.experts."}, .quants = {"q4_0"},
      .gives = RuleGives::kQ8_0},
     {.label = "test: stacked", .contains = {".mlp.experts."}, .ndim = 3, .quants = {"q4_0"},
      .gives = RuleGives::kMxfp4},
     {.label = "test: tower", .prefix = {"model.tower."}, .ndim = 2, .quants = {"q4_0", "q4_k_m"},
      .gives = RuleGives::kQ8_0},
     {.label = "test: half", .suffix = {".up_proj.weight"}, .quants = {"q4_0"}, .gives = RuleGives::kHalf},
     // shadowed by "test: gate suffix" for the same name: the first registered wins
     {.label = "test: shadowed", .suffix = {"gate_proj.weight"}, .quants = {"q4_0"}, .gives = RuleGives::kQ8_0}});

// A small checkpoint with the names the rules above look for (no data: planning reads names, shapes and dtypes).
Checkpoint make_checkpoint(const std::string& model_type, bool with_experts) {
  Checkpoint c;
  c.path = "test";
  c.format = "safetensors";
  c.config = {{"model_type", model_type}, {"num_hidden_layers", 2}};
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    c.tensors[name] = Tensor::empty(DType::BF16, shape);
  };
  add("model.embed_tokens.weight", {64, 64});
  add("lm_head.weight", {64, 64});
  add("model.norm.weight", {64});
  for (int il = 0; il < 2; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    add(p + "self_attn.q_proj.weight", {64, 64});
    add(p + "self_attn.v_proj.weight", {64, 64});
    add(p + "self_attn.q_norm.weight", {64});
    add(p + "mlp.gate_proj.weight", {64, 64});
    add(p + "mlp.up_proj.weight", {64, 64});
    add(p + "mlp.down_proj.weight", {64, 64});
    if (with_experts) add(p + "mlp.experts.gate_up_proj", {4, 64, 64});
  }
  add("model.tower.proj.weight", {64, 64});
  add("model.tower.proj.bias", {64});
  return c;
}

const TensorPlan& plan_of(const std::vector<TensorPlan>& plans, const std::string& name) {
  static const TensorPlan none;
  for (const auto& p : plans)
    if (p.name == name) return p;
  ADD_FAILURE() << "no plan for " << name;
  return none;
}

std::vector<TensorPlan> plan_or_fail(const Checkpoint& c, const std::string& q, const Recipe& user = Recipe{}) {
  auto plans = plan_conversion(c, q, user);
  EXPECT_TRUE(plans.is_ok()) << plans.status().message();
  return plans.is_ok() ? *plans : std::vector<TensorPlan>{};
}

TEST(FamilyRecipeRules, AppliedToTheirModelTypeUnderTheirQuants) {
  const auto plans = plan_or_fail(make_checkpoint(kTestFamily, true), "q4_0");
  const TensorPlan& gate = plan_of(plans, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(gate.rule, "test: gate suffix");  // registered before "test: shadowed", which matches too
  EXPECT_EQ(gate.dst, DType::BF16);           // kSource
  const TensorPlan& q = plan_of(plans, "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(q.rule, "test: attention");
  EXPECT_EQ(q.dst, DType::Q8_0);
  const TensorPlan& ex = plan_of(plans, "model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(ex.rule, "test: stacked");
  EXPECT_EQ(ex.dst, DType::MXFP4);
  EXPECT_EQ(plan_of(plans, "model.tower.proj.weight").rule, "test: tower");
  EXPECT_EQ(plan_of(plans, "model.tower.proj.weight").dst, DType::Q8_0);
  const TensorPlan& up = plan_of(plans, "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(up.rule, "test: half");
  EXPECT_EQ(up.dst, DType::BF16);  // kHalf of a bf16 source
  EXPECT_EQ(plan_of(plans, "model.layers.0.mlp.down_proj.weight").rule, "default");
  EXPECT_EQ(plan_of(plans, "model.layers.0.mlp.down_proj.weight").dst, DType::Q4_0);

  // under q8_0 only the rules that name it: the gate suffix; the attention stays at the default
  const auto q8 = plan_or_fail(make_checkpoint(kTestFamily, true), "q8_0");
  EXPECT_EQ(plan_of(q8, "model.layers.0.mlp.gate_proj.weight").rule, "test: gate suffix");
  EXPECT_EQ(plan_of(q8, "model.layers.1.self_attn.q_proj.weight").rule, "default");
  EXPECT_EQ(plan_of(q8, "model.layers.0.mlp.experts.gate_up_proj").dst, DType::Q8_0);
  EXPECT_EQ(plan_of(q8, "model.tower.proj.weight").rule, "default");
  // f16 names none of them
  for (const auto& p : plan_or_fail(make_checkpoint(kTestFamily, true), "f16"))
    EXPECT_EQ(p.rule.rfind("test:", 0), std::string::npos) << p.name << ": " << p.rule;
}

TEST(FamilyRecipeRules, UnderAKQuantMixAfterTheOutputHead) {
  const auto plans = plan_or_fail(make_checkpoint(kTestFamily, false), "q4_k_m");
  EXPECT_EQ(plan_of(plans, "model.tower.proj.weight").rule, "test: tower");
  EXPECT_EQ(plan_of(plans, "model.tower.proj.weight").dst, DType::Q8_0);
  EXPECT_EQ(plan_of(plans, "lm_head.weight").rule, "output head");
  EXPECT_EQ(plan_of(plans, "model.layers.0.mlp.gate_proj.weight").rule, "default");  // its rule names q4_0, q8_0
  // not under q4_k_s, which the tower's rule does not name
  EXPECT_EQ(plan_of(plan_or_fail(make_checkpoint(kTestFamily, false), "q4_k_s"), "model.tower.proj.weight").rule,
            "default");
}

TEST(FamilyRecipeRules, OnlyWithAndRankConditions) {
  // no tensor named like the experts: the attention rule is off, the other rules are not
  const auto plans = plan_or_fail(make_checkpoint(kTestFamily, false), "q4_0");
  EXPECT_EQ(plan_of(plans, "model.layers.1.self_attn.q_proj.weight").rule, "default");
  EXPECT_EQ(plan_of(plans, "model.layers.1.self_attn.q_proj.weight").dst, DType::Q4_0);
  EXPECT_EQ(plan_of(plans, "model.layers.0.mlp.gate_proj.weight").rule, "test: gate suffix");
  // a 2-D tensor under the stacked rule's name is not stacked: the 3-D rule passes it by
  Checkpoint c = make_checkpoint(kTestFamily, true);
  c.tensors["model.layers.0.mlp.experts.router"] = Tensor::empty(DType::BF16, {4, 64});
  EXPECT_EQ(plan_of(plan_or_fail(c, "q4_0"), "model.layers.0.mlp.experts.router").rule, "default");
}

TEST(FamilyRecipeRules, GeneralRulesAndUserRulesComeFirst) {
  const Checkpoint c = make_checkpoint(kTestFamily, true);
  auto user = Recipe::parse(R"({"rules": [{"pattern": "model.layers.0.mlp.gate_proj.weight", "dtype": "q4"},
                                          {"pattern": "model.layers.*.self_attn.q_proj.*", "dtype": "f16"}]})",
                               "test");
  ASSERT_TRUE(user.is_ok()) << user.status().message();
  const auto plans = plan_or_fail(c, "q4_0", *user);
  EXPECT_EQ(plan_of(plans, "model.layers.0.mlp.gate_proj.weight").rule,
            "recipe: model.layers.0.mlp.gate_proj.weight -> q4_0");
  EXPECT_EQ(plan_of(plans, "model.layers.0.mlp.gate_proj.weight").dst, DType::Q4_0);
  EXPECT_EQ(plan_of(plans, "model.layers.1.mlp.gate_proj.weight").rule, "test: gate suffix");  // not the user's
  EXPECT_EQ(plan_of(plans, "model.layers.1.self_attn.q_proj.weight").dst, DType::F16);
  EXPECT_EQ(plan_of(plans, "model.layers.1.self_attn.q_proj.weight").rule.rfind("recipe: ", 0), 0u);
  // the 1-D rule before the family's: a bias and a norm under a matching name stay f32
  EXPECT_EQ(plan_of(plans, "model.tower.proj.bias").dst, DType::F32);
  EXPECT_EQ(plan_of(plans, "model.layers.0.self_attn.q_norm.weight").dst, DType::F32);
  // "auto" keeps everything
  for (const auto& p : plan_or_fail(c, "auto")) EXPECT_EQ(p.dst, p.src) << p.name;
}

TEST(FamilyRecipeRules, OtherModelTypesDoNotGetThem) {
  for (const char* other : {"llama", "", "recipe_rules_test_family_2"}) {
    for (const auto& p : plan_or_fail(make_checkpoint(other, true), "q4_0"))
      EXPECT_EQ(p.rule.rfind("test:", 0), std::string::npos) << other << " " << p.name << ": " << p.rule;
  }
  Checkpoint c = make_checkpoint(kTestFamily, true);
  c.config["model_type"] = 3;  // not a string: no family
  for (const auto& p : plan_or_fail(c, "q4_0")) EXPECT_EQ(p.rule.rfind("test:", 0), std::string::npos) << p.name;
}

TEST(FamilyRecipeRules, ListedInTheDescription) {
  auto has = [](const std::vector<std::string>& lines, const std::string& part) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(part) != l.npos; });
  };
  const auto mine = default_rule_descriptions("q4_0", kTestFamily);
  EXPECT_TRUE(has(mine, "test: attention (*.self_attn.* in a checkpoint with *.mlp.experts.*) -> q8_0"));
  EXPECT_TRUE(has(mine, "test: tower (2-D model.tower.*) -> q8_0"));
  EXPECT_TRUE(has(mine, "test: stacked (3-D *.mlp.experts.*) -> mxfp4"));
  EXPECT_TRUE(has(mine, "test: gate suffix (*.mlp.gate_proj.weight) -> source dtype"));
  EXPECT_TRUE(has(mine, "test: half (*.up_proj.weight) -> bf16 if the source is bf16, else f16"));
  // the family's lines stand before the default, in registration order
  auto at = [&](const std::string& part) {
    return std::find_if(mine.begin(), mine.end(), [&](const std::string& l) { return l.find(part) != l.npos; });
  };
  EXPECT_LT(at("test: gate suffix"), at("test: attention"));
  EXPECT_LT(at("test: shadowed"), at("* -> q4_0"));
  EXPECT_LT(at("model.embed_tokens.weight"), at("test: gate suffix"));
  EXPECT_FALSE(has(default_rule_descriptions("q8_0", kTestFamily), "test: attention"));
  EXPECT_TRUE(has(default_rule_descriptions("q4_k_m", kTestFamily), "test: tower (2-D model.tower.*) -> q8_0"));
  EXPECT_FALSE(has(default_rule_descriptions("q4_0", "llama"), "test:"));
  // with no model type: every family's rules, each with the model types it is registered for
  EXPECT_TRUE(has(default_rule_descriptions("q4_0"), std::string("test: tower [") + kTestFamily + "] (2-D"));
}

// Every family's records: a label, a name to match, a rank of 0, 2 or 3, canonical quantization names, and model
// types that name a registered model.
TEST(FamilyRecipeRules, RegisteredRecordsAreWellFormed) {
  const auto models = registered_models();
  const std::set<std::string> known(models.begin(), models.end());
  int n_rules = 0;
  for (const FamilyRecipeRules* set : all_family_recipe_rules()) {
    ASSERT_FALSE(set->model_types.empty());
    for (const auto& t : set->model_types)
      EXPECT_TRUE(t == kTestFamily || known.count(t)) << "rules registered for unknown model_type '" << t << "'";
    for (const FamilyRecipeRule& r : set->rules) {
      ++n_rules;
      EXPECT_FALSE(r.label.empty());
      EXPECT_FALSE(r.prefix.empty() && r.suffix.empty() && r.contains.empty()) << r.label << ": matches nothing";
      for (const auto* list : {&r.prefix, &r.suffix, &r.contains, &r.only_with})
        for (const auto& s : *list) EXPECT_FALSE(s.empty()) << r.label << ": an empty name matches every tensor";
      EXPECT_TRUE(r.ndim == 0 || r.ndim == 2 || r.ndim == 3) << r.label;
      EXPECT_FALSE(r.quants.empty()) << r.label;
      for (const auto& q : r.quants) {
        auto canon = canonical_quant(q);
        EXPECT_TRUE(canon.is_ok() && *canon == q && q != "auto" && q != "source") << r.label << ": quant '" << q << "'";
      }
    }
  }
  EXPECT_GE(n_rules, 10);  // the families' (MoE routers and attention, stacked experts, towers, gates) and ours
}

}  // namespace
}  // namespace pipit
