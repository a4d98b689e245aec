// Qwen3.5's multi-token-prediction head (models/mtp.h, runtime/mtp_draft.h) against the goldens of
// ../shared/testdata/models/qwen3_5_vl (README.md there: vLLM semantics, reference/qwen3_5_mtp.py): the target's
// final-norm hidden states, the head's fc / layer / logits over every pair of each case, and the greedy speculative
// trace (drafts, accept flags, bonus and emitted ids) replayed through MtpDraft with the KV cache and the recurrent
// state rolled back after each rejection. Then generate() with the head gives the plain tokens, greedy and seeded,
// and a file without mtp.* refuses it with a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "format/safetensors.h"
#include "models/mtp.h"
#include "models/vision/vision_model.h"
#include "runtime/generator.h"
#include "runtime/loader.h"
#include "runtime/mtp_draft.h"
#include "runtime/multimodal.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/models/model_test_util.h"
#include "tests/test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

using nlohmann::json;

constexpr double kTol = 1e-3;
const char* const kArch = "qwen3_5_vl";

std::vector<int32_t> ids_of(const Tensor& t) { return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()}; }

class Qwen35Mtp : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { test::load_suite_model(kArch, &lm_, &golden_); }
  static void TearDownTestSuite() { test::free_suite_model(&lm_, &golden_); }
  static Tensor get(const std::string& key) { return test::golden_tensor(*golden_, GetParam() + "." + key); }
  static std::vector<int32_t> ids(const std::string& key) { return ids_of(get(key)); }
  int64_t V() const { return lm_->model->info().n_vocab; }

  // The case's prompt as the engine builds it (images through the processor and tower); text: the ids.
  MultimodalPrompt prompt() const {
    MultimodalPrompt p;
    std::ifstream in(test::model_dir(kArch) + "/report.json");
    const json r = json::parse(in, nullptr, false);
    std::vector<std::string> files;
    for (const auto& item : r["cases"][GetParam()]["items"]) files.push_back(item.at(1).get<std::string>());
    if (files.empty()) {
      p.tokens = ids("input_ids");
      return p;
    }
    auto pp = preprocessor_config_of(*lm_);
    EXPECT_TRUE(pp.is_ok());
    auto proc = image_processor_for(*lm_->model, *pp);
    EXPECT_TRUE(proc.is_ok());
    ThreadPool pool(2);
    std::vector<EncodedImage> imgs;
    for (const auto& f : files) {
      auto img = load_image(test::model_dir(kArch) + "/" + f);
      EXPECT_TRUE(img.is_ok());
      auto e = encode_image(*lm_->model, *proc, *img, pool);
      EXPECT_TRUE(e.is_ok()) << e.status().message();
      imgs.push_back(std::move(e).value());
    }
    auto b = build_multimodal_prompt(*lm_->model, ids("input_ids_unexpanded"), imgs);
    EXPECT_TRUE(b.is_ok()) << b.status().message();
    return b.is_ok() ? std::move(b).value() : p;
  }
  Result<Tensor> eval(Session& s, const MultimodalPrompt& p) const {
    return p.embd_row.empty() && p.mrope_pos.empty() ? s.eval(p.tokens) : s.eval(p);
  }

  static LoadedModel* lm_;
  static SafetensorsFile* golden_;
};
LoadedModel* Qwen35Mtp::lm_ = nullptr;
SafetensorsFile* Qwen35Mtp::golden_ = nullptr;

// The head alone on the golden's inputs (all pairs in one causal pass): fc output, layer output, logits.
TEST_P(Qwen35Mtp, HeadMatchesGolden) {
  auto head = mtp_of(*lm_->model);
  ASSERT_TRUE(head.is_ok()) << head.status().message();
  const auto in_ids = ids("mtp.input_ids"), pos = ids("mtp.position_ids");
  const int64_t L = int64_t(in_ids.size()), E = lm_->model->info().n_embd;
  Tensor embeds = get("mtp.inputs_embeds"), hidden = get("mtp.hidden_in");
  Batch b = Batch::single(in_ids, 0, 0, /*all_logits=*/true);
  // the embedding of x_{i+1} as the golden has it (image features at placeholders): every row from `embd`
  b.media.embd = embeds.reshape({L, E});
  for (int64_t i = 0; i < L; ++i) b.media.row.push_back(int32_t(i));
  b.pos_streams.pos = pos;
  KvCache kv((*head)->mtp_kv_spec(), 1, 256, DType::F32);
  Arena arena;
  ThreadPool pool(2);
  Ctx ctx{&arena, &pool, &kernels()};
  std::map<std::string, std::vector<float>> trace;
  ctx.on_tensor = [&](const std::string& n, int, const Tensor& t) {
    trace[n].assign(t.ptr<float>(), t.ptr<float>() + t.numel());
  };
  Tensor logits;
  ASSERT_TRUE((*head)->forward_mtp(ctx, b, hidden.reshape({L, E}), kv, &logits, nullptr).is_ok());
  for (const auto& [ours, theirs] : std::vector<std::pair<std::string, std::string>>{
           {"mtp_fc_out", "mtp.fc_out"}, {"mtp_layer_out", "mtp.layer_out"}, {"mtp_logits", "mtp.logits"}}) {
    Tensor want = get(theirs);
    ASSERT_EQ(int64_t(trace[ours].size()), want.numel()) << ours;
    auto d = test::max_abs_diff(trace[ours].data(), want.ptr<float>(), want.numel());
    std::printf("[ measure  ] %s %s max |diff| %.3g\n", GetParam().c_str(), theirs.c_str(), d.max_abs);
    EXPECT_LE(d.max_abs, kTol) << theirs << " worst at " << d.worst;
  }
}

// The target's final-norm hidden states (the head's input) through the session's sink, for the prompt + emitted
// tokens; and the head fed pair by pair by MtpDraft (a pass per step, as decoding does) lands on the golden logits.
TEST_P(Qwen35Mtp, TargetHiddenStatesAndIncrementalHead) {
  MultimodalPrompt p = prompt();
  Tensor want_h = get("mtp.hidden_in"), want_l = get("mtp.logits");
  const auto emitted = ids("spec.emitted_ids");
  const int64_t E = lm_->model->info().n_embd, L = want_h.dim(1), T = int64_t(p.tokens.size());
  Session s(*lm_->model, SessionOptions{.n_threads = 2, .n_batch = 16});  // chunks that cut the prompt
  std::vector<float> got;
  auto head = mtp_of(*lm_->model);
  ASSERT_TRUE(head.is_ok());
  s.set_hidden_sink(*head, [&](const Batch&, const Tensor& h) { got.insert(got.end(), h.ptr<float>(), h.ptr<float>() + h.numel()); });
  ASSERT_TRUE(eval(s, p).is_ok());
  for (size_t i = 0; i + 1 < emitted.size(); ++i) ASSERT_TRUE(s.eval(std::span<const int32_t>(&emitted[i], 1)).is_ok());
  s.set_hidden_sink(nullptr, nullptr);
  ASSERT_EQ(int64_t(got.size()), L * E);
  auto d = test::max_abs_diff(got.data(), want_h.ptr<float>(), L * E);
  std::printf("[ measure  ] %s mtp.hidden_in max |diff| %.3g\n", GetParam().c_str(), d.max_abs);
  EXPECT_LE(d.max_abs, kTol);

  // greedy decoding of the emitted ids, MtpDraft guessing after each step: guess 1 = argmax of mtp.logits[n - 2]
  Session s2(*lm_->model, SessionOptions{.n_threads = 2});
  auto draft = MtpDraft::create(s2);
  ASSERT_TRUE(draft.is_ok()) << draft.status().message();
  ASSERT_TRUE(eval(s2, p).is_ok());
  std::vector<int32_t> hist = p.tokens;
  for (size_t i = 0; i < emitted.size(); ++i) {
    hist.push_back(emitted[i]);
    auto g = (*draft)->propose(hist, 0, 1);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    ASSERT_EQ(g->size(), 1u);
    const int64_t pair = int64_t(hist.size()) - 2;
    const int32_t want = argmax(std::span<const float>(want_l.ptr<float>() + pair * V(), size_t(V())));
    EXPECT_EQ((*g)[0], want) << "guess after pair " << pair;
    if (i + 1 < emitted.size()) {
      ASSERT_TRUE(s2.eval(std::span<const int32_t>(&emitted[i], 1)).is_ok());
    }
  }
  EXPECT_EQ((*draft)->pairs_evaluated(), L) << "every pair once: T after the first token, then one per token";
  EXPECT_EQ(L, T + int64_t(emitted.size()) - 1);
}

// The golden's speculative trace: one MTP guess per step, [x_{n-1}, guess] verified in one pass, the state rolled
// back to its checkpoint and x_{n-1} evaluated again after a rejection (Session::checkpoint / truncate).
TEST_P(Qwen35Mtp, SpeculativeTraceReplayed) {
  MultimodalPrompt p = prompt();
  const auto want_draft = ids("spec.draft_ids"), want_fed = ids("spec.fed_ids"), want_target = ids("spec.target_ids");
  const auto want_acc = ids("spec.accepted"), want_bonus = ids("spec.bonus_ids"), want_pos = ids("spec.step_pos");
  const auto want_emitted = ids("spec.emitted_ids");
  Tensor want_vl = get("spec.verify_logits");
  Session s(*lm_->model, SessionOptions{.n_threads = 2});
  auto draft = MtpDraft::create(s);
  ASSERT_TRUE(draft.is_ok()) << draft.status().message();
  auto r = eval(s, p);
  ASSERT_TRUE(r.is_ok());
  std::vector<int32_t> hist = p.tokens;
  hist.push_back(argmax(std::span<const float>(r->ptr<float>(), size_t(V()))));
  double worst = 0;
  for (size_t st = 0; st < want_draft.size(); ++st) {
    auto g = (*draft)->propose(hist, 0, 1);
    ASSERT_TRUE(g.is_ok() && g->size() == 1);
    const int32_t d = (*g)[0], fed = hist.back();
    EXPECT_EQ(d, want_draft[st]) << "step " << st;
    EXPECT_EQ(fed, want_fed[st]) << "step " << st;
    EXPECT_EQ(s.n_past(), want_pos[st]) << "step " << st;
    const int n0 = s.n_past();
    s.checkpoint();
    const int32_t batch[2] = {fed, d};
    auto v = s.eval(batch, /*all_logits=*/true);
    ASSERT_TRUE(v.is_ok());
    worst = std::max(worst, test::max_abs_diff(v->ptr<float>(), want_vl.ptr<float>() + st * 2 * V(), V()).max_abs);
    const int32_t t = argmax(std::span<const float>(v->ptr<float>(), size_t(V())));
    EXPECT_EQ(t, want_target[st]) << "step " << st;
    if (t == d) {
      worst = std::max(worst, test::max_abs_diff(v->ptr<float>() + V(), want_vl.ptr<float>() + (st * 2 + 1) * V(),
                                                 V()).max_abs);
      const int32_t bonus = argmax(std::span<const float>(v->ptr<float>() + V(), size_t(V())));
      EXPECT_EQ(1, want_acc[st]) << "step " << st;
      EXPECT_EQ(bonus, want_bonus[st]) << "step " << st;
      hist.push_back(d);
      hist.push_back(bonus);
    } else {
      EXPECT_EQ(0, want_acc[st]) << "step " << st;
      s.truncate(n0 + 1);  // the recurrent state goes back to the checkpoint: x_{n-1} again
      if (s.n_past() < n0 + 1) {
        ASSERT_TRUE(s.eval(std::span<const int32_t>(&fed, 1)).is_ok());
      }
      hist.push_back(t);
    }
  }
  std::printf("[ measure  ] %s spec.verify_logits max |diff| %.3g\n", GetParam().c_str(), worst);
  EXPECT_LE(worst, kTol);
  EXPECT_EQ(std::vector<int32_t>(hist.begin() + long(p.tokens.size()), hist.end()), want_emitted);
}

// generate() with the head as the draft source: the plain tokens, greedy and seeded, and the trace's acceptance.
TEST_P(Qwen35Mtp, GenerateGivesThePlainTokens) {
  MultimodalPrompt p = prompt();
  const bool mm = !p.embd_row.empty() || !p.mrope_pos.empty();
  for (float temp : {0.0f, 0.8f}) {
    for (int k : {1, 3}) {
      GenerateParams gp;
      gp.max_tokens = 40;
      gp.ignore_eos = true;
      gp.sampler.temperature = temp;
      gp.sampler.seed = 1234;
      Session plain(*lm_->model, SessionOptions{.n_threads = 2});
      auto want = mm ? generate(plain, nullptr, p, gp) : generate(plain, nullptr, p.tokens, gp);
      ASSERT_TRUE(want.is_ok()) << want.status().message();
      Session s(*lm_->model, SessionOptions{.n_threads = 2});
      auto draft = MtpDraft::create(s);
      ASSERT_TRUE(draft.is_ok());
      gp.spec.n_draft = k;
      gp.spec.mtp = draft->get();
      auto got = mm ? generate(s, nullptr, p, gp) : generate(s, nullptr, p.tokens, gp);
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      EXPECT_EQ(got->tokens, want->tokens) << "temperature " << temp << ", " << k << " guesses";
      EXPECT_GT(got->spec.drafted, 0);
      EXPECT_EQ(s.n_past(), plain.n_past()) << "the context ends where plain decoding's does";
      std::printf("[ measure  ] %s temp %.1f k %d: %lld of %lld guesses accepted in %lld steps\n", GetParam().c_str(),
                  temp, k, (long long)got->spec.accepted, (long long)got->spec.drafted, (long long)got->spec.steps);
      // greedy: the head's guesses are accepted where the model repeats a token (the golden's mtp.fc is biased to
      // repeat its input); fewer steps guess than in the trace, whose state rollback keeps every step guessing
      if (temp == 0.0f) {
        EXPECT_GT(got->spec.accepted, 0);
      }
    }
  }
}

std::vector<std::string> mtp_cases() {
  std::vector<std::string> v;
  auto g = SafetensorsFile::open(test::model_dir(kArch) + "/golden.safetensors");
  if (!g.is_ok()) return v;
  auto it = g->metadata().find("cases");
  if (it == g->metadata().end()) return v;
  std::stringstream ss(it->second);
  for (std::string c; std::getline(ss, c, ',');)
    if (g->has(c + ".mtp.logits") && c != "video") v.push_back(c);  // video prompts: tests/models/qwen3_5_vl_test
  return v;
}

INSTANTIATE_TEST_SUITE_P(Golden, Qwen35Mtp, ::testing::ValuesIn(mtp_cases()));

// A file without the mtp.* tensors loads (the head is optional) and refuses the head with a message that says why.
TEST(Qwen35MtpModel, MissingHeadIsAClearError) {
  auto text = load_model(test::model_dir("qwen3_5"));
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  auto h = mtp_of(*text->model);
  ASSERT_FALSE(h.is_ok());
  EXPECT_NE(h.status().message().find("no mtp.* tensors"), std::string::npos) << h.status().message();
  Session s(*text->model, SessionOptions{.n_threads = 1});
  auto d = MtpDraft::create(s);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("mtp"), std::string::npos);
  auto llama = load_model(test::model_dir("qwen3"));
  if (llama.is_ok()) {
    auto hl = mtp_of(*llama->model);
    ASSERT_FALSE(hl.is_ok());
    EXPECT_NE(hl.status().message().find("no multi-token-prediction head"), std::string::npos);
  }
}

// A q8 .pipit file keeps mtp.* (2-D weights quantized by the decoder layers' rule, norms f32): the head's logits on
// the golden's text pairs stay within a bound of the f32 ones with the same argmax for most pairs, and generate()
// with it gives the file's plain tokens.
TEST(Qwen35MtpModel, ConvertedFileKeepsTheHead) {
  test::ScratchDir d("qwen35_mtp_q8");
  const std::string out = d.path("q8.pipit");
  test::convert_or_fail(test::model_dir(kArch), out, "q8");
  LoadedModel lq = test::load_or_fail(out);
  auto h = mtp_of(*lq.model);
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  auto g = SafetensorsFile::open(test::model_dir(kArch) + "/golden.safetensors");
  const auto in_ids = ids_of(*g->get("text.mtp.input_ids"));
  const int64_t L = int64_t(in_ids.size()), E = lq.model->info().n_embd, V = lq.model->info().n_vocab;
  Batch b = Batch::single(in_ids, 0, 0, /*all_logits=*/true);
  KvCache kv((*h)->mtp_kv_spec(), 1, 256, DType::F32);
  Arena arena;
  ThreadPool pool(2);
  Ctx ctx{&arena, &pool, &kernels()};
  Tensor logits;
  ASSERT_TRUE((*h)->forward_mtp(ctx, b, g->get("text.mtp.hidden_in")->reshape({L, E}), kv, &logits, nullptr).is_ok());
  Tensor want = *g->get("text.mtp.logits");
  const std::vector<float> got_v(logits.ptr<float>(), logits.ptr<float>() + logits.numel());
  const std::vector<float> want_v(want.ptr<float>(), want.ptr<float>() + want.numel());
  int same = 0;
  for (int64_t i = 0; i < L; ++i)
    same += argmax(std::span<const float>(got_v.data() + i * V, size_t(V))) ==
            argmax(std::span<const float>(want_v.data() + i * V, size_t(V)));
  const double e = test::rel_rms(got_v, want_v);
  std::printf("[ measure  ] q8 head: logits relative RMS %.4f, argmax as f32 on %d of %lld pairs\n", e, same,
              (long long)L);
  EXPECT_LE(e, 0.05);
  EXPECT_GE(same, int(0.9 * double(L)));
  const auto prompt = ids_of(*g->get("text.input_ids"));
  GenerateParams gp;
  gp.max_tokens = 24;
  gp.ignore_eos = true;
  Session plain(*lq.model, SessionOptions{.n_threads = 2});
  auto want_t = generate(plain, nullptr, prompt, gp);
  Session s(*lq.model, SessionOptions{.n_threads = 2});
  auto draft = MtpDraft::create(s);
  ASSERT_TRUE(draft.is_ok());
  gp.spec.n_draft = 1;
  gp.spec.mtp = draft->get();
  auto got_t = generate(s, nullptr, prompt, gp);
  ASSERT_TRUE(want_t.is_ok() && got_t.is_ok());
  EXPECT_EQ(got_t->tokens, want_t->tokens);
  EXPECT_GT(got_t->spec.drafted, 0);
}

}  // namespace
}  // namespace pipit
