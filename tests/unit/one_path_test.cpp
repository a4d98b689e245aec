// The two drivers of one generation path give the same answers. Every front end steps its requests through one
// Sequence (sampling, penalties, grammar, logprobs, stop strings, the speculative rule): generate() drives its
// forward passes over one Session (pipit run / chat / bench, the C API, Python), the Engine over KV slots (the
// server, and the C API's in-process server). This test sends the same request to both, for each option a client can
// set, and wants the same tokens, text, finish reason and log-probabilities: what a user sees must not depend on the
// front end. Models: stories260k (a tokenizer: stop strings, a grammar), qwen3_5 (a recurrent state: speculation
// rewinds it), gemma3_text (sliding-window layers).
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/grammar.h"
#include "runtime/loader.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

struct Case {
  std::string name;
  GenerateParams params;
  bool needs_tokenizer = false;
  bool draft_model = false;  // speculative decoding with a draft model (the arch's, see the test)
  bool must_draft = false;   // the case must make guesses (a grammar's answer may end before lookup finds any)
};

std::vector<Case> cases() {
  std::vector<Case> out;
  auto base = [] {
    GenerateParams p;
    p.max_tokens = 40;
    p.ignore_eos = true;
    return p;
  };
  {
    Case c{"greedy", base()};
    c.params.sampler.temperature = 0;
    out.push_back(c);
  }
  {
    Case c{"seeded (the C++ defaults: top-k 40, top-p 0.95, min-p 0.05)", base()};
    c.params.sampler.seed = 11;
    out.push_back(c);
  }
  {
    // what an OpenAI client sends: no top_k, top_p 1, with presence / frequency penalties and a logit bias
    Case c{"OpenAI defaults + penalties + logit_bias", base()};
    c.params.sampler = SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                                     .presence_penalty = 0.5f, .frequency_penalty = 0.3f, .seed = 3};
    c.params.logit_bias = {{5, -100.0f}, {7, 2.0f}, {300, 1.5f}};
    out.push_back(c);
  }
  {
    Case c{"repetition penalty + no_repeat_ngram_size", base()};
    c.params.sampler = SamplerParams{.temperature = 0.7f, .top_k = 20, .repetition_penalty = 1.3f, .seed = 5};
    c.params.no_repeat_ngram_size = 3;
    out.push_back(c);
  }
  {
    Case c{"logprobs", base()};
    c.params.sampler = SamplerParams{.temperature = 0.9f, .top_k = 0, .top_p = 0.9f, .seed = 17};
    c.params.logprobs = 3;
    out.push_back(c);
  }
  {
    Case c{"prompt lookup, greedy", base()};
    c.params.sampler.temperature = 0;
    c.params.spec.n_draft = 6;
    c.must_draft = true;
    out.push_back(c);
  }
  {
    Case c{"prompt lookup, seeded, logprobs", base()};
    c.params.sampler = SamplerParams{.temperature = 1.0f, .top_k = 20, .seed = 23};
    c.params.spec.n_draft = 4;
    c.params.logprobs = 2;
    c.must_draft = true;
    out.push_back(c);
  }
  {
    Case c{"draft model, seeded", base()};
    c.params.sampler = SamplerParams{.temperature = 0.8f, .top_k = 0, .top_p = 0.95f, .seed = 29};
    c.params.spec.n_draft = 3;
    c.draft_model = true;
    c.must_draft = true;
    out.push_back(c);
  }
  {
    Case c{"stop strings + EOS", base()};
    c.params.ignore_eos = false;
    c.params.sampler.seed = 31;
    c.params.stop = {" the", "."};
    c.needs_tokenizer = true;
    out.push_back(c);
  }
  {
    Case c{"grammar, seeded, with lookup", base()};
    auto g = Grammar::parse(R"(root ::= [a-z]+ (" " [a-z]+)* ".")");
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    if (g.is_ok()) c.params.grammar = *g;
    c.params.ignore_eos = false;
    c.params.sampler.seed = 37;
    c.params.spec.n_draft = 3;
    c.needs_tokenizer = true;
    out.push_back(c);
  }
  return out;
}

// The request through generate() on a fresh Session (and, for a draft model, a Session of `draft`).
GenerateResult by_session(Model& m, Model* draft, const Tokenizer* tok, const std::vector<int32_t>& prompt,
                          const Case& c) {
  Session s(m, SessionOptions{.n_ctx = 128, .n_threads = 2});
  GenerateParams p = c.params;
  std::unique_ptr<Session> ds;
  Draft d{};
  if (c.draft_model) {
    ds = std::make_unique<Session>(*draft, SessionOptions{.n_ctx = 128, .n_threads = 2});
    d = Draft{ds.get(), {}};
    p.spec.draft = &d;
  }
  auto r = generate(s, tok, prompt, p);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : GenerateResult{};
}

// The same request through an Engine with one slot (`draft` as EngineOptions::draft for a draft model).
GenerateResult by_engine(Model& m, Model* draft, const Tokenizer* tok, const std::vector<int32_t>& prompt,
                         const Case& c) {
  Engine eng(m, tok,
             EngineOptions{.n_slots = 1, .n_ctx = 128, .n_batch = 16, .n_threads = 2,
                           .draft = c.draft_model ? draft : nullptr});
  std::promise<GenerateResult> done;
  EngineRequest r;
  r.prompt = prompt;
  r.params = c.params;
  r.on_done = [&done](const Result<GenerateResult>& res) {
    EXPECT_TRUE(res.is_ok()) << res.status().message();
    done.set_value(res.is_ok() ? *res : GenerateResult{});
  };
  auto id = eng.submit(std::move(r));
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  if (!id.is_ok()) return {};
  return done.get_future().get();
}

TEST(OnePath, EngineAndGenerateGiveTheSameAnswers) {
  struct Arch {
    const char *name, *draft;  // a recurrent model cannot be a draft (Engine::check_draft): qwen3_5 gets another
  };
  for (Arch arch_draft : {Arch{"stories260k", "stories260k"}, Arch{"qwen3_5", "stories260k"},
                          Arch{"gemma3_text", "gemma3_text"}}) {
    const char* arch = arch_draft.name;
    auto lm = load_model(test::model_dir(arch));
    ASSERT_TRUE(lm.is_ok()) << lm.status().message();
    Model& m = *lm->model;
    auto dm = load_model(test::model_dir(arch_draft.draft));
    ASSERT_TRUE(dm.is_ok()) << dm.status().message();
    ASSERT_TRUE(Engine::check_draft(m, *dm->model).is_ok());
    const Tokenizer* tok = lm->tokenizer.get();
    // repetitive, so that prompt lookup finds n-grams and penalties have something to act on
    std::vector<int32_t> prompt = {1};
    if (tok) {
      auto ids = tok->encode("Once upon a time, there was a little girl. Once upon a time, there was a little", false);
      ASSERT_TRUE(ids.is_ok());
      prompt.insert(prompt.end(), ids->begin(), ids->end());
    } else {
      for (int i = 0; i < 24; ++i) prompt.push_back(int32_t(40 + i % 7));
    }
    int64_t drafted = 0;
    for (const Case& c : cases()) {
      if (c.needs_tokenizer && !tok) continue;
      SCOPED_TRACE(std::string(arch) + ": " + c.name);
      const GenerateResult a = by_session(m, dm->model.get(), tok, prompt, c),
                           b = by_engine(m, dm->model.get(), tok, prompt, c);
      EXPECT_FALSE(a.tokens.empty());
      EXPECT_EQ(a.tokens, b.tokens);
      EXPECT_EQ(a.text, b.text);
      EXPECT_EQ(stop_reason_name(a.reason), stop_reason_name(b.reason));
      EXPECT_EQ(int(a.reason), int(b.reason));
      ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
      if (c.params.logprobs >= 0) {
        EXPECT_EQ(a.logprobs.size(), a.tokens.size());
      }
      for (size_t i = 0; i < a.logprobs.size(); ++i) {
        EXPECT_EQ(a.logprobs[i].token, b.logprobs[i].token) << "token " << i;
        EXPECT_FLOAT_EQ(a.logprobs[i].logprob, b.logprobs[i].logprob) << "token " << i;
        EXPECT_EQ(a.logprobs[i].top.size(), b.logprobs[i].top.size());
        for (size_t j = 0; j < std::min(a.logprobs[i].top.size(), b.logprobs[i].top.size()); ++j)
          EXPECT_EQ(a.logprobs[i].top[j].first, b.logprobs[i].top[j].first);
      }
      if (c.must_draft) {  // both drivers speculated (the point of the case)
        EXPECT_GT(a.spec.drafted, 0);
        EXPECT_GT(b.spec.drafted, 0);
      }
      if (c.params.spec.n_draft > 0) {  // and neither made the answer differ from the plain one
        drafted += b.spec.drafted;
        Case plain = c;
        plain.params.spec.n_draft = 0;
        plain.draft_model = false;
        EXPECT_EQ(by_session(m, nullptr, tok, prompt, plain).tokens, a.tokens);
      }
      if (c.params.grammar && a.reason != StopReason::kLength) {
        EXPECT_EQ(a.text.back(), '.') << a.text;  // ended by the grammar's completion
      }
      if (!c.params.stop.empty()) {
        for (const auto& s : c.params.stop) EXPECT_EQ(a.text.find(s), std::string::npos) << a.text;
      }
    }
    std::printf("%s: the engine drafted %lld tokens over the speculative cases\n", arch, (long long)drafted);
  }
}

}  // namespace
}  // namespace pipit
