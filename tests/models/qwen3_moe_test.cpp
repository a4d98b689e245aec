// Qwen3-MoE beyond the goldens: a decode step reads only the experts its token is routed to (the others are
// poisoned with NaN and must not matter), a missing expert tensor is named, and for all three families of issue 8
// a config missing a field the family needs names that field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "format/safetensors.h"
#include "runtime/session.h"
#include "tests/models/model_test_util.h"

namespace pipit {
namespace {

HfConfig config_of(const std::string& name) { return *HfConfig::load(test::model_dir(name) + "/config.json"); }

std::map<std::string, Tensor> weights_of(const std::string& name) {
  auto set = SafetensorsSet::open_dir(test::model_dir(name));
  EXPECT_TRUE(set.is_ok()) << set.status().message();
  return set->tensors();
}

TEST(Qwen3Moe, DecodeReadsOnlyRoutedExperts) {
  const HfConfig cfg = config_of("qwen3_moe");
  auto tensors = weights_of("qwen3_moe");
  const int n_layer = 3, n_expert = 8, top_k = 2;
  const int32_t token = 1;  // BOS at position 0

  // the clean run, recording each layer's router logits
  MapWeightSource clean_w(tensors);
  auto clean = create_model(cfg, clean_w);
  ASSERT_TRUE(clean.is_ok()) << clean.status().message();
  std::vector<std::set<int>> used(n_layer);
  Session s(**clean, SessionOptions{.n_threads = 1});
  s.ctx().on_tensor = [&](const std::string& n, int layer, const Tensor& t) {
    if (n != "moe_router_logits") return;
    std::vector<float> l(t.ptr<float>(), t.ptr<float>() + n_expert);
    for (int k = 0; k < top_k; ++k) {
      int best = int(std::max_element(l.begin(), l.end()) - l.begin());
      used[size_t(layer)].insert(best);
      l[size_t(best)] = -INFINITY;
    }
  };
  auto r = s.eval(std::span<const int32_t>(&token, 1));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::vector<float> want(r->ptr<float>(), r->ptr<float>() + r->numel());

  // every expert the token is not routed to becomes NaN
  std::vector<Tensor> keep_alive;
  int poisoned = 0;
  for (int il = 0; il < n_layer; ++il)
    for (int e = 0; e < n_expert; ++e) {
      if (used[size_t(il)].count(e)) continue;
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
        const std::string name =
            "model.layers." + std::to_string(il) + ".mlp.experts." + std::to_string(e) + "." + proj + ".weight";
        const Tensor& orig = tensors.at(name);
        Tensor nan = Tensor::empty(orig.dtype(), orig.shape());
        std::memset(nan.data(), 0xff, nan.nbytes());  // all-ones bits: NaN in f32, f16 and bf16
        tensors[name] = nan;
        ++poisoned;
      }
    }
  ASSERT_EQ(poisoned, n_layer * (n_expert - top_k) * 3);
  MapWeightSource poisoned_w(tensors);
  auto sparse = create_model(cfg, poisoned_w);
  ASSERT_TRUE(sparse.is_ok()) << sparse.status().message();
  Session s2(**sparse, SessionOptions{.n_threads = 1});
  auto r2 = s2.eval(std::span<const int32_t>(&token, 1));
  ASSERT_TRUE(r2.is_ok()) << r2.status().message();
  EXPECT_EQ(test::max_abs_diff(r2->ptr<float>(), want.data(), int64_t(want.size())).max_abs, 0.0);
}

TEST(Qwen3Moe, MissingExpertTensorIsNamed) {
  const HfConfig cfg = config_of("qwen3_moe");
  for (const char* name : {"model.layers.1.mlp.experts.5.up_proj.weight", "model.layers.2.mlp.gate.weight"}) {
    auto tensors = weights_of("qwen3_moe");
    ASSERT_EQ(tensors.erase(name), 1u);
    MapWeightSource w(tensors);
    auto m = create_model(cfg, w);
    ASSERT_FALSE(m.is_ok());
    EXPECT_NE(m.status().message().find(name), std::string::npos) << m.status().message();
  }
}

struct ConfigCase {
  const char* model;
  const char* field;  // named in the error
  std::function<void(nlohmann::json&)> edit;
};

class FamilyConfigError : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(FamilyConfigError, NamesTheField) {
  const ConfigCase& c = GetParam();
  test::EditedCheckpoint ckpt(c.model, c.edit);
  auto m = load_model(ckpt.dir());
  ASSERT_FALSE(m.is_ok()) << c.model << " loaded without " << c.field;
  EXPECT_NE(m.status().message().find(c.field), std::string::npos) << m.status().message();
}

auto erase(const char* f) {
  return [f](nlohmann::json& j) { j.erase(f); };
}

INSTANTIATE_TEST_SUITE_P(
    Families, FamilyConfigError,
    ::testing::Values(
        ConfigCase{"gemma3_text", "hidden_size", erase("hidden_size")},
        ConfigCase{"gemma3_text", "num_attention_heads", erase("num_attention_heads")},
        ConfigCase{"gemma3_text", "intermediate_size", erase("intermediate_size")},
        ConfigCase{"gemma3_text", "layer_types", [](nlohmann::json& j) { j["layer_types"] = {"sliding_attention"}; }},
        ConfigCase{"gemma3_text", "hidden_activation", [](nlohmann::json& j) { j["hidden_activation"] = "relu"; }},
        ConfigCase{"smollm3", "num_hidden_layers", erase("num_hidden_layers")},
        ConfigCase{"smollm3", "vocab_size", erase("vocab_size")},
        ConfigCase{"smollm3", "no_rope_layers", [](nlohmann::json& j) { j["no_rope_layers"] = {1, 0}; }},
        ConfigCase{"qwen3_moe", "num_experts", erase("num_experts")},
        ConfigCase{"qwen3_moe", "num_experts_per_tok", erase("num_experts_per_tok")},
        ConfigCase{"qwen3_moe", "moe_intermediate_size", erase("moe_intermediate_size")},
        // a dense layer (mlp_only_layers) needs intermediate_size
        ConfigCase{"qwen3_moe", "intermediate_size", [](nlohmann::json& j) {
                     j.erase("intermediate_size");
                     j["mlp_only_layers"] = {1};
                   }}),
    [](const ::testing::TestParamInfo<ConfigCase>& i) {
      return std::string(i.param.model) + "_" + i.param.field + "_" + std::to_string(i.index);
    });

}  // namespace
}  // namespace pipit
