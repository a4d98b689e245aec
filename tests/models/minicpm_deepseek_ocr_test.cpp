// MiniCPM and DeepSeek-OCR's decoder beyond the shared golden tests (golden_text_test.cpp): the golden_batch prompts
// run as two sequences of one batch (two KV slots, one forward) equal each prompt run alone; configs and
// checkpoints that are wrong in a way these families care about give one error naming what is wrong.
#include <gtest/gtest.h>

#include <cstring>

#include "format/safetensors.h"
#include "runtime/session.h"
#include "tests/models/model_test_util.h"

namespace pipit {
namespace {

constexpr double kTol = 1e-3;

class NextWaveBatch : public ::testing::TestWithParam<std::string> {};

// Both golden_batch prompts in one Batch (as the Engine packs them), interleaved with a second forward that decodes
// one more token of each: the first forward's logits are the goldens, and each sequence only sees its own slot.
TEST_P(NextWaveBatch, TwoSequencesInOneForwardEqualEachAlone) {
  auto lm = load_model(test::model_dir(GetParam()));
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  Model& m = *lm->model;
  auto g = SafetensorsFile::open(test::model_dir(GetParam()) + "/golden_batch.safetensors");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  std::vector<int32_t> ids[2];
  Tensor want[2];
  for (int i = 0; i < 2; ++i) {
    Tensor t = *g->get("input_ids_" + std::to_string(i));
    ids[i].assign(t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel());
    want[i] = *g->get("logits_" + std::to_string(i));
  }
  const int64_t V = m.info().n_vocab;
  Batch b;
  for (int i = 0; i < 2; ++i) {
    const int64_t begin = b.n_tokens();
    for (size_t t = 0; t < ids[i].size(); ++t) {
      b.tokens.push_back(ids[i][t]);
      b.pos.push_back(int32_t(t));
      b.logits_rows.push_back(begin + int64_t(t));
    }
    b.seqs.push_back({/*slot=*/1 - i, begin, int64_t(ids[i].size())});  // slots swapped: slot != sequence index
  }
  KvCache kv(m.info().kv, 2, 64, DType::F32);
  Arena arena(size_t(1) << 22);
  ThreadPool pool(2);
  Ctx ctx;
  ctx.arena = &arena;
  ctx.pool = &pool;
  ctx.k = &kernels();
  Tensor logits;
  ASSERT_TRUE(m.forward(ctx, b, kv, &logits).is_ok());
  ASSERT_EQ(logits.dim(0), int64_t(ids[0].size() + ids[1].size()));
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>(), want[0].ptr<float>(), want[0].numel()).max_abs, kTol);
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>() + ids[0].size() * V, want[1].ptr<float>(), want[1].numel()).max_abs,
            kTol);
  // one more token for each sequence, batched, equals the same token after each prompt alone
  const int32_t next = 77;
  Batch d;
  for (int i = 0; i < 2; ++i) {
    d.tokens.push_back(next);
    d.pos.push_back(int32_t(ids[i].size()));
    d.seqs.push_back({1 - i, i, 1});
    d.logits_rows.push_back(i);
  }
  arena.reset();
  Tensor step;
  ASSERT_TRUE(m.forward(ctx, d, kv, &step).is_ok());
  const std::vector<float> batched(step.ptr<float>(), step.ptr<float>() + step.numel());
  for (int i = 0; i < 2; ++i) {
    Session s(m, SessionOptions{.n_ctx = 64, .n_threads = 2});
    ASSERT_TRUE(s.eval(ids[i]).is_ok());
    auto r = s.eval(std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_LE(test::max_abs_diff(r->ptr<float>(), batched.data() + i * V, V).max_abs, kTol) << "sequence " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, NextWaveBatch, ::testing::Values("minicpm", "deepseek_ocr_lm"));

struct BadConfig {
  const char* model;
  const char* named;  // the error must contain this
  std::function<void(nlohmann::json&)> edit;
};

class NextWaveBadConfig : public ::testing::TestWithParam<BadConfig> {};

TEST_P(NextWaveBadConfig, OneErrorNamingIt) {
  const BadConfig& c = GetParam();
  test::EditedCheckpoint ckpt(c.model, c.edit);
  auto m = load_model(ckpt.dir());
  ASSERT_FALSE(m.is_ok()) << c.model << " loaded a config that should fail on " << c.named;
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find(c.named), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
}

// DeepSeek-OCR's fields live both at the top level and in language_config (the top level wins): edit both.
auto both(std::function<void(nlohmann::json&)> f) {
  return [f](nlohmann::json& j) {
    f(j);
    f(j["language_config"]);
  };
}

INSTANTIATE_TEST_SUITE_P(
    Families, NextWaveBadConfig,
    ::testing::Values(
        BadConfig{"minicpm", "hidden_size", [](nlohmann::json& j) { j.erase("hidden_size"); }},
        BadConfig{"minicpm", "long_factor", [](nlohmann::json& j) { j["rope_scaling"].erase("long_factor"); }},
        BadConfig{"minicpm", "short_factor",
                  [](nlohmann::json& j) { j["rope_scaling"]["short_factor"] = {1.0, 1.0, 1.0}; }},
        BadConfig{"minicpm", "original_max_position_embeddings",
                  [](nlohmann::json& j) { j["rope_scaling"].erase("original_max_position_embeddings"); }},
        BadConfig{"minicpm", "yarn", [](nlohmann::json& j) { j["rope_scaling"]["rope_type"] = "yarn"; }},
        BadConfig{"minicpm", "sparse_config", [](nlohmann::json& j) { j["sparse_config"] = {{"dense_len", 8192}}; }},
        // a wrong expert count: more than the checkpoint has, fewer, and top-k beyond it
        BadConfig{"deepseek_ocr_lm", "routes over 8 experts, the config says 9",
                  both([](nlohmann::json& j) { j["n_routed_experts"] = 9; })},
        BadConfig{"deepseek_ocr_lm", "routes over 8 experts, the config says 7",
                  both([](nlohmann::json& j) { j["n_routed_experts"] = 7; })},
        BadConfig{"deepseek_ocr_lm", "n_routed_experts 8",
                  both([](nlohmann::json& j) { j["num_experts_per_tok"] = 9; })},
        BadConfig{"deepseek_ocr_lm", "num_experts_per_tok",
                  both([](nlohmann::json& j) { j.erase("num_experts_per_tok"); })},
        BadConfig{"deepseek_ocr_lm", "moe_intermediate_size",
                  both([](nlohmann::json& j) { j.erase("moe_intermediate_size"); })},
        // a shared expert of the wrong width
        BadConfig{"deepseek_ocr_lm", "shared_experts.gate_proj.weight",
                  both([](nlohmann::json& j) { j["n_shared_experts"] = 3; })},
        BadConfig{"deepseek_ocr_lm", "use_mla", both([](nlohmann::json& j) { j["use_mla"] = true; })},
        BadConfig{"deepseek_ocr_lm", "topk_method",
                  both([](nlohmann::json& j) { j["topk_method"] = "group_limited_greedy"; })},
        BadConfig{"deepseek_ocr_lm", "hidden_size", both([](nlohmann::json& j) { j.erase("hidden_size"); })},
        // the dense first layer needs intermediate_size
        BadConfig{"deepseek_ocr_lm", "intermediate_size", both([](nlohmann::json& j) { j.erase("intermediate_size"); })}),
    [](const ::testing::TestParamInfo<BadConfig>& i) {
      return std::string(i.param.model) + "_" + std::to_string(i.index);
    });

TEST(MiniCpm, PositionPastTheRopeTableIsNamed) {
  // max_position_embeddings 256: the remote code's cos/sin table ends there
  auto lm = load_model(test::model_dir("minicpm"));
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  Session s(*lm->model, SessionOptions{.n_ctx = 300, .n_threads = 1});
  std::vector<int32_t> ids(257, 5);
  auto r = s.eval(ids);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("max_position_embeddings 256"), std::string::npos) << r.status().message();
  Session ok(*lm->model, SessionOptions{.n_ctx = 300, .n_threads = 1});
  ids.resize(256);
  EXPECT_TRUE(ok.eval(ids).is_ok());
}

TEST(DeepseekOcr, MissingSharedExpertTensorIsNamed) {
  auto set = SafetensorsSet::open_dir(test::model_dir("deepseek_ocr_lm"));
  ASSERT_TRUE(set.is_ok()) << set.status().message();
  auto cfg = HfConfig::load(test::model_dir("deepseek_ocr_lm") + "/config.json");
  ASSERT_TRUE(cfg.is_ok());
  for (const char* name : {"model.layers.2.mlp.shared_experts.down_proj.weight",
                           "model.layers.1.mlp.experts.7.up_proj.weight", "model.layers.0.mlp.gate_proj.weight"}) {
    auto tensors = set->tensors();
    ASSERT_EQ(tensors.erase(name), 1u) << name;
    MapWeightSource w(tensors);
    auto m = create_model(*cfg, w);
    ASSERT_FALSE(m.is_ok()) << name;
    EXPECT_NE(m.status().message().find(name), std::string::npos) << m.status().message();
  }
}

}  // namespace
}  // namespace pipit
