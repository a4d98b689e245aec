// Configs in the form transformers >= 5 writes: rope_theta and rope_scaling folded into "rope_parameters" (one
// object, or one per layer type for Gemma 3). Each test model rewritten that way must give exactly the logits of
// its original config: llama (llama3 scaling), gemma3_text (linear scaling on global layers, its own base on
// sliding layers), qwen2_vl (mrope_section inside rope_parameters, text-only prompt).
#include <gtest/gtest.h>

#include <vector>

#include "format/safetensors.h"
#include "runtime/session.h"
#include "tests/models/model_test_util.h"

namespace pipit {
namespace {

using nlohmann::json;

std::vector<float> logits_of(const std::string& dir, const std::vector<int32_t>& ids) {
  auto lm = load_model(dir);
  EXPECT_TRUE(lm.is_ok()) << lm.status().message();
  if (!lm.is_ok()) return {};
  Session s(*lm->model, SessionOptions{.n_threads = 2});
  auto r = s.eval(ids, /*all_logits=*/true);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (!r.is_ok()) return {};
  return {r->ptr<float>(), r->ptr<float>() + r->numel()};
}

std::vector<int32_t> prompt_of(const std::string& arch) {
  if (arch == "qwen2_vl") return {100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111};  // text only
  auto g = SafetensorsFile::open(test::model_dir(arch) + "/golden.safetensors");
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  std::vector<int32_t> ids;
  if (auto t = g->get("input_ids"); t.is_ok()) ids.assign(t->ptr<int32_t>(), t->ptr<int32_t>() + t->numel());
  ids.resize(std::min<size_t>(ids.size(), 12));
  return ids;
}

// {rope_theta, rope_scaling} at the level of `c` -> rope_parameters there
void fold(json& c) {
  json p = json{{"rope_type", "default"}};
  if (c.contains("rope_scaling") && c["rope_scaling"].is_object()) p = c["rope_scaling"];
  if (p.contains("type") && !p.contains("rope_type")) p["rope_type"] = p["type"];
  p.erase("type");
  p["rope_theta"] = c.value("rope_theta", 10000.0);
  c.erase("rope_scaling");
  c.erase("rope_theta");
  c["rope_parameters"] = p;
}

void expect_same_logits(const std::string& arch, const std::function<void(json&)>& edit) {
  const auto ids = prompt_of(arch);
  const auto want = logits_of(test::model_dir(arch), ids);
  test::EditedCheckpoint v5(arch, edit);
  const auto got = logits_of(v5.dir(), ids);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(test::max_abs_diff(got.data(), want.data(), int64_t(want.size())).max_abs, 0.0) << arch;
}

TEST(RopeParameters, LlamaWithLlama3Scaling) {
  expect_same_logits("llama", [](json& c) {
    ASSERT_EQ(c["rope_scaling"]["rope_type"], "llama3");
    fold(c);
  });
}

TEST(RopeParameters, Gemma3PerLayerType) {
  expect_same_logits("gemma3_text", [](json& c) {
    const double local = c["rope_local_base_freq"].get<double>();
    fold(c);
    json full = c["rope_parameters"];
    ASSERT_EQ(full["rope_type"], "linear");
    c["rope_parameters"] = {{"full_attention", full},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", local}}}};
    c.erase("rope_local_base_freq");
  });
}

TEST(RopeParameters, Qwen2VlMropeSection) {
  expect_same_logits("qwen2_vl", [](json& c) {
    fold(c);
    if (c.contains("text_config")) fold(c["text_config"]);
    ASSERT_TRUE(c["rope_parameters"].contains("mrope_section"));
  });
}

TEST(RopeParameters, ChangedThetaChangesLogits) {  // the folded value is the one read, not a leftover default
  const auto ids = prompt_of("llama");
  const auto want = logits_of(test::model_dir("llama"), ids);
  test::EditedCheckpoint v5("llama", [](json& c) {
    fold(c);
    c["rope_parameters"]["rope_theta"] = 1000.0;
  });
  const auto got = logits_of(v5.dir(), ids);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_GT(test::max_abs_diff(got.data(), want.data(), int64_t(want.size())).max_abs, 1e-3);
}

TEST(RopeParameters, BadValuesAreNamed) {
  test::EditedCheckpoint bad("llama", [](json& c) {
    fold(c);
    c["rope_parameters"]["rope_theta"] = "big";
  });
  auto lm = load_model(bad.dir());
  ASSERT_FALSE(lm.is_ok());
  EXPECT_NE(lm.status().message().find("rope_theta"), std::string::npos) << lm.status().message();
}

}  // namespace
}  // namespace pipit
