// Conversation (runtime/conversation.h): each turn's prompt is the whole conversation, evaluated from where the
// context differs. The answer must be the one a fresh session gives for the same prompt (penalties and sampling see
// the whole conversation, whatever was reused), for text and for prompts with images (M-RoPE positions of the part
// evaluated after the kept prefix), with the prompt cache shared by two sessions.
#include <gtest/gtest.h>

#include "runtime/conversation.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "runtime/prompt_cache.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

LoadedModel load(const std::string& arch) {
  auto m = load_model(test::model_dir(arch));
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return std::move(m).value();
}

// Sampled with penalties over the history: any part of the conversation missing from it would change the tokens.
GenerateParams sampled(int n) {
  GenerateParams p;
  p.max_tokens = n;
  p.ignore_eos = true;
  p.sampler.temperature = 0.8f;
  p.sampler.top_k = 0;
  p.sampler.top_p = 1.0f;
  p.sampler.min_p = 0.0f;
  p.sampler.repetition_penalty = 1.3f;
  p.sampler.seed = 7;
  p.logprobs = 0;
  return p;
}

SessionOptions options() { return SessionOptions{.n_ctx = 256, .n_threads = 2, .n_batch = 8}; }

void expect_same_answer(const GenerateResult& got, const GenerateResult& want) {
  EXPECT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
  for (size_t i = 0; i < got.logprobs.size(); ++i) EXPECT_NEAR(got.logprobs[i].logprob, want.logprobs[i].logprob, 1e-4);
}

TEST(Conversation, LaterTurnsReuseTheContextAndAnswerAsAFreshSession) {
  LoadedModel lm = load("qwen2");
  Session s(*lm.model, options());
  Conversation conv(s);
  const std::vector<int32_t> turn1 = {5, 17, 88, 301, 42, 9, 77, 120, 64, 3, 250};
  auto a1 = conv.generate(nullptr, turn1, sampled(6));
  ASSERT_TRUE(a1.is_ok()) << a1.status().message();
  EXPECT_EQ(conv.n_reused(), 0);
  // the context holds the prompt and the answer but its last token
  EXPECT_EQ(conv.tokens().size(), turn1.size() + a1->tokens.size() - 1);
  EXPECT_EQ(s.n_past(), int(conv.tokens().size()));

  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), a1->tokens.begin(), a1->tokens.end());
  turn2.insert(turn2.end(), {11, 23, 99, 140});
  auto a2 = conv.generate(nullptr, turn2, sampled(8));
  ASSERT_TRUE(a2.is_ok()) << a2.status().message();
  EXPECT_EQ(conv.n_reused(), int(turn1.size() + a1->tokens.size() - 1));
  EXPECT_EQ(a2->n_cached, conv.n_reused());

  Session fresh(*lm.model, options());
  auto want = generate(fresh, nullptr, turn2, sampled(8));
  ASSERT_TRUE(want.is_ok());
  expect_same_answer(*a2, *want);

  // an earlier turn rewritten (a template that changes history): evaluated again from the first difference
  std::vector<int32_t> turn3 = turn2;
  turn3[4] = 43;
  auto a3 = conv.generate(nullptr, turn3, sampled(4));
  ASSERT_TRUE(a3.is_ok());
  EXPECT_EQ(conv.n_reused(), 4);
  Session fresh3(*lm.model, options());
  auto want3 = generate(fresh3, nullptr, turn3, sampled(4));
  ASSERT_TRUE(want3.is_ok());
  expect_same_answer(*a3, *want3);

  // the same prompt again: all but its last token kept, the same answer
  auto again = conv.generate(nullptr, turn3, sampled(4));
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(conv.n_reused(), int(turn3.size()) - 1);
  expect_same_answer(*again, *want3);

  // eval() of a longer sequence keeps the prefix too; the logits are those of a fresh session
  std::vector<int32_t> longer = turn3;
  longer.insert(longer.end(), {7, 8});
  auto l = conv.eval(longer);
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(conv.n_reused(), int(turn3.size()));  // the answer's tokens after it differ from {7, 8}
  Session fresh4(*lm.model, options());
  auto lw = fresh4.eval(longer);
  ASSERT_TRUE(lw.is_ok());
  const int64_t V = lm.model->info().n_vocab;
  EXPECT_LE(test::max_abs_diff(l->ptr<float>(), lw->ptr<float>(), V).max_abs, 1e-4);
}

TEST(Conversation, ASessionUsedDirectlyStartsOver) {
  LoadedModel lm = load("qwen2");
  Session s(*lm.model, options());
  Conversation conv(s);
  const std::vector<int32_t> p = {5, 17, 88, 301, 42};
  ASSERT_TRUE(conv.generate(nullptr, p, sampled(2)).is_ok());
  const int32_t extra = 9;
  ASSERT_TRUE(s.eval(std::span<const int32_t>(&extra, 1)).is_ok());  // behind the conversation's back
  auto r = conv.generate(nullptr, p, sampled(2));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(conv.n_reused(), 0);
}

TEST(Conversation, PromptCacheServesAnotherSession) {
  LoadedModel lm = load("qwen2");
  auto cache = std::make_shared<PromptCache>(size_t(64) << 20);
  Session a(*lm.model, options()), b(*lm.model, options());
  Conversation ca(a, cache), cb(b, cache);
  const std::vector<int32_t> system = {5, 17, 88, 301, 42, 9, 77, 120, 64, 3, 250, 31};
  std::vector<int32_t> pa = system, pb = system;
  pa.insert(pa.end(), {11, 12});
  pb.insert(pb.end(), {13, 14, 15});
  ASSERT_TRUE(ca.generate(nullptr, pa, sampled(3)).is_ok());
  auto rb = cb.generate(nullptr, pb, sampled(5));
  ASSERT_TRUE(rb.is_ok());
  EXPECT_EQ(cb.n_reused(), int(system.size()));  // the shared system prompt, from a's entry
  Session fresh(*lm.model, options());
  auto want = generate(fresh, nullptr, pb, sampled(5));
  ASSERT_TRUE(want.is_ok());
  expect_same_answer(*rb, *want);
}

EncodedImage encode(const LoadedModel& lm, const std::string& arch, const std::string& name, ThreadPool& pool) {
  auto pp = preprocessor_config_of(lm);
  EXPECT_TRUE(pp.is_ok());
  auto proc = image_processor_for(*lm.model, *pp);
  EXPECT_TRUE(proc.is_ok()) << proc.status().message();
  auto img = load_image(test::model_dir(arch) + "/" + name + ".png");
  EXPECT_TRUE(img.is_ok()) << img.status().message();
  auto e = encode_image(*lm.model, *proc, *img, pool);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return std::move(e).value();
}

class ConversationWithImages : public ::testing::TestWithParam<std::string> {};

// Turn 1 has an image; turn 2 adds text and a second image. The second turn keeps the first image's KV (and, for
// M-RoPE, continues from its positions) and answers as a fresh session given the whole prompt.
TEST_P(ConversationWithImages, SecondTurnKeepsTheImage) {
  const std::string arch = GetParam();
  LoadedModel lm = load(arch);
  ThreadPool pool(2);
  const bool q3 = arch == "qwen3_vl";
  std::vector<EncodedImage> imgs = {encode(lm, arch, q3 ? "img_150x90" : "img_100x75", pool),
                                    encode(lm, arch, q3 ? "img_256x160" : "img_300x200", pool)};
  const std::vector<int32_t> mark = image_placeholder_tokens(*lm.model);
  std::vector<int32_t> turn1 = {795, 413};
  turn1.insert(turn1.end(), mark.begin(), mark.end());
  turn1.insert(turn1.end(), {56, 376, 681});
  auto mm1 = build_multimodal_prompt(*lm.model, turn1, {imgs[0]});
  ASSERT_TRUE(mm1.is_ok()) << mm1.status().message();
  SessionOptions so = options();
  so.n_ctx = 512;
  Session s(*lm.model, so);
  Conversation conv(s);
  auto a1 = conv.generate(nullptr, *mm1, sampled(4));
  ASSERT_TRUE(a1.is_ok()) << a1.status().message();

  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), a1->tokens.begin(), a1->tokens.end());
  turn2.insert(turn2.end(), {60, 61});
  turn2.insert(turn2.end(), mark.begin(), mark.end());
  turn2.insert(turn2.end(), {62, 63, 64});
  auto mm2 = build_multimodal_prompt(*lm.model, turn2, imgs);
  ASSERT_TRUE(mm2.is_ok()) << mm2.status().message();
  auto a2 = conv.generate(nullptr, *mm2, sampled(6));
  ASSERT_TRUE(a2.is_ok()) << a2.status().message();
  EXPECT_EQ(conv.n_reused(), int(mm1->tokens.size() + a1->tokens.size() - 1));

  Session fresh(*lm.model, so);
  auto want = generate(fresh, nullptr, *mm2, sampled(6));
  ASSERT_TRUE(want.is_ok());
  expect_same_answer(*a2, *want);
  EXPECT_EQ(s.rope_delta(), fresh.rope_delta());

  // the first image replaced by the second: evaluated again from the image on
  auto swapped = build_multimodal_prompt(*lm.model, turn2, {imgs[1], imgs[1]});
  ASSERT_TRUE(swapped.is_ok());
  auto a3 = conv.generate(nullptr, *swapped, sampled(3));
  ASSERT_TRUE(a3.is_ok());
  EXPECT_LE(conv.n_reused(), 2 + (mark.size() > 1 ? 1 : 0));
  Session fresh3(*lm.model, so);
  auto want3 = generate(fresh3, nullptr, *swapped, sampled(3));
  ASSERT_TRUE(want3.is_ok());
  expect_same_answer(*a3, *want3);
}

INSTANTIATE_TEST_SUITE_P(VL, ConversationWithImages, ::testing::Values("qwen2_vl", "qwen3_vl", "llava"));

TEST(MultimodalSuffix, RefusesToStartInsideAnImage) {
  LoadedModel lm = load("qwen2_vl");
  ThreadPool pool(2);
  const std::vector<int32_t> ids = {1001, 795, 413, 1009, 1012, 1010, 56, 376, 681};
  auto p = build_multimodal_prompt(*lm.model, ids, {encode(lm, "qwen2_vl", "img_100x75", pool)});
  ASSERT_TRUE(p.is_ok());
  EXPECT_FALSE(multimodal_suffix(*p, 8).is_ok());  // the image spans [4, 16)
  auto after = multimodal_suffix(*p, 17);
  ASSERT_TRUE(after.is_ok());
  EXPECT_EQ(after->tokens.size(), p->tokens.size() - 17);
  EXPECT_EQ(after->rope_delta, 0);  // the offset is the context's already
}

}  // namespace
}  // namespace pipit
