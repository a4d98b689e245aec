// Model::ops_used is what device placement trusts (backends/device.h first_missing_op): for every test checkpoint,
// a CPU forward over its golden prompt (all logits) records the ops it calls (Ctx::ops_seen), and each of them must
// be in the model's declared set. A model that starts calling an op it does not declare fails here, before a device
// that lacks the op meets it.
#include <gtest/gtest.h>

#include "backends/device.h"
#include "format/safetensors.h"
#include "runtime/session.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

// The golden's text prompt: input_ids, or text.input_ids / the first <case>.input_ids of a multimodal golden (its
// ids, image placeholders included, through the text path).
std::vector<int32_t> prompt_ids(const std::string& model) {
  auto f = SafetensorsFile::open(test::model_dir(model) + "/golden.safetensors");
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  if (!f.is_ok()) return {};
  std::string key = f->has("input_ids") ? "input_ids" : f->has("text.input_ids") ? "text.input_ids" : "";
  for (auto& [name, t] : f->tensors())
    if (key.empty() && name.ends_with(".input_ids")) key = name;
  EXPECT_FALSE(key.empty()) << model << ": no input_ids in its golden";
  if (key.empty()) return {};
  Tensor t = *f->get(key);
  return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
}

class OpsUsed : public ::testing::TestWithParam<std::string> {};

TEST_P(OpsUsed, ForwardCallsOnlyDeclaredOps) {
  LoadedModel lm = test::load_or_fail(test::model_dir(GetParam()));
  ASSERT_TRUE(lm.model);
  const auto ids = prompt_ids(GetParam());
  ASSERT_FALSE(ids.empty());
  OpSet seen;
  Session s(*lm.model, SessionOptions{.n_ctx = int(ids.size()) + 8, .n_threads = 2});
  s.ctx().ops_seen = &seen;
  auto r = s.eval(ids, /*all_logits=*/true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const OpSet declared = lm.model->ops_used();
  EXPECT_TRUE((seen.test(size_t(Op::kLinear)) && seen.test(size_t(Op::kAttention))) || GetParam() == "qwen3_5")
      << "the recorder saw no matmul / attention: is Ctx::ops_seen still set by every op?";
  for (size_t i = 0; i < size_t(Op::kCount); ++i)
    EXPECT_FALSE(seen.test(i) && !declared.test(i)) << GetParam() << " calls " << op_name(Op(i))
                                                     << " but its ops_used() does not list it";
}

INSTANTIATE_TEST_SUITE_P(Models, OpsUsed,
                         ::testing::Values("llama", "stories260k", "qwen2", "qwen3", "smollm3", "minicpm", "qwen3_moe",
                                           "deepseek_ocr_lm", "gemma3_text", "gemma4", "gpt_oss", "qwen3_5", "llava",
                                           "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5_vl"));

// What a device lacks is named by op at load (the loader's message comes from first_missing_op).
TEST(OpsUsed, FirstMissingOpNamesTheOp) {
  class SmallDevice final : public Device {
   public:
    std::string name() const override { return "small"; }
    std::shared_ptr<DeviceStorage> alloc(size_t) override { return nullptr; }
    void write(const Tensor&, const void*, size_t) override {}
    void read(const Tensor&, void*, size_t) override {}
    Result<Tensor> upload_weight(const Tensor& h) override { return h; }
    bool supports(Op op) const override { return op != Op::kGatedDeltaRule && op != Op::kHostLoops; }
  } dev;
  EXPECT_EQ(first_missing_op(dev, op_set({Op::kLinear, Op::kAttention, Op::kRope})), Op::kCount);
  EXPECT_EQ(first_missing_op(dev, op_set({Op::kLinear, Op::kGatedDeltaRule})), Op::kGatedDeltaRule);
  EXPECT_STREQ(op_name(Op::kGatedDeltaRule), "gated_delta_rule");
  EXPECT_EQ(first_missing_op(cpu_device(), OpSet().set()), Op::kCount);  // the CPU has every op
}

}  // namespace
}  // namespace pipit
