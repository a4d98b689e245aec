// Cost of structured output on the Qwen3 vocabulary (151,669 tokens), single thread, for a JSON-schema grammar:
//   BM_MaskFull/<state>   a whole-vocabulary mask (GrammarMatcher::mask) at a point of the document: after "{"
//                         (a key must follow), inside a string value, inside a number, between members;
//   BM_FollowDocument     the per-token work when the sampled token fits (the engine's common case): allows() on
//                         the token, then accept(), over a whole JSON answer tokenized by the real tokenizer;
//   BM_MaskEveryToken     the worst case: a full mask at every token of that answer (a model that never writes
//                         what the grammar wants); /uncached walks the vocabulary every time, /cached lets the
//                         grammar's mask cache serve repeated parser states (inside a string every token).
// Compare with decode time per token: Qwen3-0.6B Q4_0 decodes 86 tok/s on 2 threads (11.6 ms/token, README).
// Run: build/grammar_bench  (PIPIT_TESTDATA overrides the test data folder).
#include <benchmark/benchmark.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "runtime/grammar.h"
#include "runtime/json_schema.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace pipit;

std::string testdata() {
  if (const char* e = std::getenv("PIPIT_TESTDATA"); e && *e) return e;
  return PIPIT_TESTDATA_DIR;
}

struct Fixture {
  std::shared_ptr<Tokenizer> tok;
  std::shared_ptr<const TokenTable> table;
  std::shared_ptr<const Grammar> grammar;
  std::vector<int32_t> answer;  // a valid answer, tokenized
};

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string"},
  "tags": {"type": "array", "items": {"type": "string"}},
  "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                                               "zip": {"type": "string"}}, "required": ["street", "city"]},
  "score": {"type": "number"}, "active": {"type": "boolean"}},
  "required": ["name", "age", "tags", "address", "active"]})";

const char* kAnswer =
    "{\"name\": \"Ada Lovelace\", \"age\": 36, \"email\": \"ada@example.org\", \"tags\": [\"mathematics\", "
    "\"poetical science\", \"analytical engine\"], \"address\": {\"street\": \"12 St James's Square\", \"city\": "
    "\"London\", \"zip\": \"SW1Y 4JH\"}, \"score\": 98.5, \"active\": false}";

Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    auto t = Tokenizer::load_dir(testdata() + "/tokenizers/qwen3");
    if (!t) {
      std::fprintf(stderr, "grammar_bench: %s\n", t.status().message().c_str());
      std::exit(1);
    }
    x.tok = *t;
    x.table = TokenTable::get(*x.tok);
    auto src = json_schema_grammar(nlohmann::ordered_json::parse(kSchema));
    auto g = Grammar::parse(*src);
    if (!g) {
      std::fprintf(stderr, "grammar_bench: %s\n", g.status().message().c_str());
      std::exit(1);
    }
    x.grammar = *g;
    x.answer = *x.tok->encode(kAnswer, false);
    return x;
  }();
  return f;
}

void BM_MaskFull(benchmark::State& state, const char* prefix) {
  Fixture& f = fixture();
  GrammarMatcher m(f.grammar);
  if (!m.accept(prefix)) state.SkipWithError("prefix not accepted");
  std::vector<uint8_t> allowed;
  for (auto _ : state) {
    m.mask_uncached(*f.table, allowed);
    benchmark::DoNotOptimize(allowed.data());
  }
  size_t n = 0;
  for (uint8_t a : allowed) n += a;
  state.counters["allowed"] = double(n);
}
BENCHMARK_CAPTURE(BM_MaskFull, after_open_brace, "{")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskFull, in_string, "{\"name\": \"Ada Lo")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskFull, in_number, "{\"name\": \"A\", \"age\": 3")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskFull, after_value, "{\"name\": \"A\", \"age\": 36")->Unit(benchmark::kMillisecond);

void BM_FollowDocument(benchmark::State& state) {
  Fixture& f = fixture();
  for (auto _ : state) {
    GrammarMatcher m(f.grammar);
    for (int32_t id : f.answer) {
      const std::string& b = f.table->bytes(id);
      if (!m.allows(b) || !m.accept(b)) state.SkipWithError("the answer does not fit the grammar");
    }
    benchmark::DoNotOptimize(m.can_end());
  }
  state.counters["tokens"] = double(f.answer.size());
  state.counters["us_per_token"] = benchmark::Counter(double(f.answer.size()),
                                                      benchmark::Counter::kIsIterationInvariantRate |
                                                          benchmark::Counter::kInvert);
}
BENCHMARK(BM_FollowDocument)->Unit(benchmark::kMicrosecond);

// cached: the grammar's mask cache starts empty each time (a fresh parse), and fills as the answer goes
void BM_MaskEveryToken(benchmark::State& state, bool cached) {
  Fixture& f = fixture();
  std::vector<uint8_t> allowed;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = Grammar::parse(*json_schema_grammar(nlohmann::ordered_json::parse(kSchema)));
    state.ResumeTiming();
    GrammarMatcher m(*g);
    for (int32_t id : f.answer) {
      if (cached) m.mask(*f.table, allowed);
      else m.mask_uncached(*f.table, allowed);
      if (!allowed[size_t(id)]) state.SkipWithError("the mask forbids the answer's token");
      m.accept(f.table->bytes(id));
    }
  }
  state.counters["tokens"] = double(f.answer.size());
  state.counters["ms_per_token"] = benchmark::Counter(double(f.answer.size()) / 1000.0,
                                                      benchmark::Counter::kIsIterationInvariantRate |
                                                          benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(BM_MaskEveryToken, uncached, false)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_MaskEveryToken, cached, true)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
