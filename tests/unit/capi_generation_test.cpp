// The C API's generation options on the one generation path (runtime/sequence.h): seeded sampling with speculative
// decoding (prompt lookup, a draft model) gives the plain tokens over conversation turns; a grammar or JSON schema
// constrains the answer; log-probabilities are recorded per generated token. On stories260k (raw prompts).
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "include/pipit/pipit.h"
#include "tests/test_util.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

struct Out {
  std::vector<int32_t> tokens;
  std::string text;
};

class CapiGeneration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pipit_model_load(test::model_dir("stories260k").c_str(), nullptr, &model_), PIPIT_OK)
        << pipit_last_error();
  }
  void TearDown() override { pipit_model_destroy(model_); }

  pipit_session* session() {
    pipit_session* s = nullptr;
    pipit_session_options so;
    pipit_session_options_default(&so);
    so.n_threads = 2;
    so.kv_type = PIPIT_KV_F32;
    EXPECT_EQ(pipit_session_create(model_, &so, &s), PIPIT_OK) << pipit_last_error();
    return s;
  }
  static Out gen(pipit_session* s, const std::string& prompt, const pipit_generate_options& o) {
    Out out;
    auto cb = [](const char* piece, size_t len, int32_t tok, void* user) -> int32_t {
      auto* o = static_cast<Out*>(user);
      if (tok >= 0) o->tokens.push_back(tok);
      o->text.append(piece, len);
      return 1;
    };
    EXPECT_EQ(pipit_session_generate(s, prompt.c_str(), 0, &o, cb, &out), PIPIT_OK) << pipit_last_error();
    return out;
  }
  pipit_model* model_ = nullptr;
};

// Options left at their defaults: a new seed per generation (pipit_session_last_seed repeats it) and the model's
// generation_config.json sampling (here: none, so 0.8 / 40 / 0.95 / 0.05; a copy saying do_sample false: greedy).
TEST_F(CapiGeneration, DefaultsAreANewSeedAndTheModelsSampling) {
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  EXPECT_TRUE(std::isnan(o.temperature));
  EXPECT_EQ(o.top_k, PIPIT_MODEL_DEFAULT_INT);
  EXPECT_EQ(o.seed, PIPIT_SEED_RANDOM);
  o.max_tokens = 32;
  pipit_session* s = session();
  EXPECT_EQ(pipit_session_last_seed(s), 0u);
  const Out a = gen(s, "Once upon a time", o);
  const uint64_t seed_a = pipit_session_last_seed(s);
  pipit_session_reset(s);
  const Out b = gen(s, "Once upon a time", o);
  EXPECT_NE(pipit_session_last_seed(s), seed_a);
  pipit_session_reset(s);
  o.seed = seed_a;
  EXPECT_EQ(gen(s, "Once upon a time", o).tokens, a.tokens);
  EXPECT_EQ(pipit_session_last_seed(s), seed_a);
  pipit_session_destroy(s);

  test::ScratchDir d("capi_gencfg");
  const std::string src = test::model_dir("stories260k");
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    test::write_bytes(d.path(f), test::read_bytes(src + "/" + f));
  test::write_bytes(d.path("generation_config.json"), R"({"bos_token_id": 1, "eos_token_id": 2, "do_sample": false})");
  pipit_model* greedy_model = nullptr;
  ASSERT_EQ(pipit_model_load(d.dir().c_str(), nullptr, &greedy_model), PIPIT_OK) << pipit_last_error();
  pipit_session* g = nullptr;
  ASSERT_EQ(pipit_session_create(greedy_model, nullptr, &g), PIPIT_OK);
  pipit_generate_options_default(&o);
  o.max_tokens = 32;
  const Out by_default = gen(g, "Once upon a time", o);
  pipit_session_reset(g);
  o.temperature = 0;
  EXPECT_EQ(gen(g, "Once upon a time", o).tokens, by_default.tokens);
  pipit_session_reset(g);
  o.temperature = 1.0f;  // set: it wins over the file
  o.seed = 2;
  EXPECT_NE(gen(g, "Once upon a time", o).tokens, by_default.tokens);
  pipit_session_destroy(g);
  pipit_model_destroy(greedy_model);
}

// pipit_session_set_logit_bias: -100 bans a token for the next generations, 0 entries clear it; bad ids / biases are
// INVALID_ARGUMENT naming the problem.
TEST_F(CapiGeneration, LogitBias) {
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 16;
  o.temperature = 0;
  pipit_session* s = session();
  const Out plain = gen(s, "Once upon a time", o);
  ASSERT_FALSE(plain.tokens.empty());
  const int32_t ban = plain.tokens[0];
  const float minus = -100;
  ASSERT_EQ(pipit_session_set_logit_bias(s, &ban, &minus, 1), PIPIT_OK);
  pipit_session_reset(s);
  for (int32_t t : gen(s, "Once upon a time", o).tokens) EXPECT_NE(t, ban);
  ASSERT_EQ(pipit_session_set_logit_bias(s, nullptr, nullptr, 0), PIPIT_OK);
  pipit_session_reset(s);
  EXPECT_EQ(gen(s, "Once upon a time", o).tokens, plain.tokens);
  const int32_t far = 512;
  const float big = 101;
  EXPECT_EQ(pipit_session_set_logit_bias(s, &far, &minus, 1), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pipit_last_error()).find("token id 512"), std::string::npos) << pipit_last_error();
  EXPECT_EQ(pipit_session_set_logit_bias(s, &ban, &big, 1), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pipit_session_set_logit_bias(s, nullptr, &big, 1), PIPIT_ERR_INVALID_ARGUMENT);
  pipit_session_destroy(s);
}

// Two raw turns of seeded sampling: with prompt lookup or the model as its own draft, the same tokens as without.
TEST_F(CapiGeneration, SeededSamplingWithSpeculationEqualsPlain) {
  const std::string turn1 = "Once upon a time, there was a little girl. Once upon a time, there was a";
  const std::string turn2 = " The little girl said";
  int64_t accepted_total = 0;
  for (uint64_t seed : {3u, 11u, 12345u}) {
    pipit_generate_options o;
    pipit_generate_options_default(&o);
    o.max_tokens = 40;
    o.temperature = 0.8f;
    o.top_k = 0;
    o.top_p = 0.95f;
    o.min_p = 0;
    o.seed = seed;
    pipit_session* plain = session();
    const Out p1 = gen(plain, turn1, o), p2 = gen(plain, turn2, o);
    for (pipit_model* draft : {static_cast<pipit_model*>(nullptr), model_}) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << (draft ? ", draft model" : ", prompt lookup"));
      pipit_session* s = session();
      ASSERT_EQ(pipit_session_set_speculation(s, draft, 4), PIPIT_OK) << pipit_last_error();
      const Out s1 = gen(s, turn1, o);
      int64_t drafted = 0, accepted = 0;
      ASSERT_EQ(pipit_session_speculation_stats(s, &drafted, &accepted), PIPIT_OK);
      accepted_total += accepted;
      const Out s2 = gen(s, turn2, o);
      EXPECT_EQ(s1.tokens, p1.tokens);
      EXPECT_EQ(s2.tokens, p2.tokens);
      EXPECT_EQ(s1.text + s2.text, p1.text + p2.text);
      EXPECT_EQ(pipit_session_n_past(s), pipit_session_n_past(plain));
      pipit_session_destroy(s);
    }
    pipit_session_destroy(plain);
  }
  EXPECT_GT(accepted_total, 0);
}

TEST_F(CapiGeneration, GrammarConstrainsTheAnswer) {
  pipit_session* s = session();
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 48;
  o.seed = 7;
  // without a grammar the story goes on in prose; with it: lower-case words, then a full stop that ends it
  ASSERT_EQ(pipit_session_set_grammar(s, R"(root ::= "yes" | "no" | [a-z]+ (" " [a-z]+)* ".")"), PIPIT_OK)
      << pipit_last_error();
  for (int i = 0; i < 3; ++i) {
    pipit_session_reset(s);
    const Out out = gen(s, "Once upon a time", o);
    EXPECT_TRUE(std::regex_match(out.text, std::regex("yes|no|[a-z]+( [a-z]+)*\\.?"))) << out.text;
    if (std::string(pipit_session_finish_reason(s)) == "stop") {
      EXPECT_TRUE(std::regex_match(out.text, std::regex("yes|no|[a-z]+( [a-z]+)*\\."))) << out.text;
    }
    o.seed += 1;
  }
  // malformed grammars and schemas: one message, the setting unchanged
  EXPECT_EQ(pipit_session_set_grammar(s, "root ::= ( \"a\""), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pipit_last_error()).find("pipit_session_set_grammar"), std::string::npos)
      << pipit_last_error();
  EXPECT_EQ(pipit_session_set_json_schema(s, "{\"type\": "), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pipit_last_error()).find("not valid JSON"), std::string::npos) << pipit_last_error();
  // off again: the plain greedy answer
  ASSERT_EQ(pipit_session_set_grammar(s, nullptr), PIPIT_OK);
  pipit_session_reset(s);
  o.temperature = 0;
  const Out free = gen(s, "Once upon a time", o);
  EXPECT_FALSE(std::regex_match(free.text, std::regex("[a-z .]*"))) << free.text;
  pipit_session_destroy(s);
}

TEST_F(CapiGeneration, JsonSchemaAnswerValidates) {
  pipit_session* s = session();
  const char* schema = R"({"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]},
                           "age": {"type": "integer"}}, "required": ["mood", "age"], "additionalProperties": false})";
  ASSERT_EQ(pipit_session_set_json_schema(s, schema), PIPIT_OK) << pipit_last_error();
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 200;
  int complete = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    o.seed = seed;
    pipit_session_reset(s);
    const Out out = gen(s, "Once upon a time", o);
    if (std::string(pipit_session_finish_reason(s)) != "stop") continue;  // a long integer ran out of tokens
    ++complete;
    const auto j = nlohmann::json::parse(out.text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out.text;
    ASSERT_TRUE(j.is_object()) << out.text;
    EXPECT_EQ(j.size(), 2u) << out.text;
    EXPECT_TRUE(j.value("mood", "") == "happy" || j.value("mood", "") == "sad") << out.text;
    EXPECT_TRUE(j.contains("age") && j["age"].is_number_integer()) << out.text;
  }
  EXPECT_GT(complete, 0);
  pipit_session_destroy(s);
}

// Logprobs: one record per generated token; greedy picks the most likely token; log-probabilities are <= 0, sorted,
// and exp() of all of them sums to at most 1.
TEST_F(CapiGeneration, LogprobsPerGeneratedToken) {
  pipit_session* s = session();
  EXPECT_EQ(pipit_session_set_logprobs(s, 21), PIPIT_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(pipit_session_set_logprobs(s, 5), PIPIT_OK);
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 12;
  o.temperature = 0;
  const Out out = gen(s, "Once upon a time", o);
  ASSERT_EQ(pipit_session_n_logprobs(s), int32_t(out.tokens.size()));
  for (int32_t i = 0; i < pipit_session_n_logprobs(s); ++i) {
    int32_t token = -1, n_top = 0, top[8];
    float lp = 1, top_lp[8];
    ASSERT_EQ(pipit_session_logprob(s, i, &token, &lp, top, top_lp, 8, &n_top), PIPIT_OK);
    EXPECT_EQ(token, out.tokens[size_t(i)]);
    ASSERT_EQ(n_top, 5);
    EXPECT_EQ(top[0], token);  // greedy
    EXPECT_FLOAT_EQ(top_lp[0], lp);
    double mass = 0;
    for (int k = 0; k < n_top; ++k) {
      EXPECT_LE(top_lp[k], 0.0f);
      if (k) {
        EXPECT_LE(top_lp[k], top_lp[k - 1]);
      }
      mass += std::exp(double(top_lp[k]));
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
  }
  EXPECT_EQ(pipit_session_logprob(s, int32_t(out.tokens.size()), nullptr, nullptr, nullptr, nullptr, 0, nullptr),
            PIPIT_ERR_OUT_OF_RANGE);
  // off: nothing recorded
  ASSERT_EQ(pipit_session_set_logprobs(s, -1), PIPIT_OK);
  gen(s, " The end.", o);
  EXPECT_EQ(pipit_session_n_logprobs(s), 0);
  pipit_session_destroy(s);
}

}  // namespace
}  // namespace pipit
