// Generation: prefill the prompt, then sample token by token until max_tokens, an EOS id, a stop string, or the
// callback asks to stop. Text reaches the callback as valid UTF-8 pieces; text that could be the start of a stop
// string is held back until it is known not to be one (so a stop string never leaks into the output).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/logprobs.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace pipit {

class Tokenizer;
class StreamDecoder;
class Grammar;

struct GenerateParams {
  int max_tokens = 256;
  SamplerParams sampler;
  std::vector<std::string> stop;     // stop strings (not included in the output)
  std::vector<int32_t> eos_ids;      // stop tokens (default: the model's)
  bool ignore_eos = false;
  // HF generate()'s no_repeat_ngram_size: no n-gram of the prompt + answer occurs twice (the token that would
  // repeat one is banned). -1: the model's default (ModelInfo::no_repeat_ngram_size); 0: off.
  int no_repeat_ngram_size = -1;
  int logprobs = -1;                 // >= 0: record each generated token's log-probability and this many top ones
  // Added to a token's logit before sampling (OpenAI's logit_bias); a bias <= -100 bans the token outright. Log-
  // probabilities stay those of the model's own distribution (Sequence::emit).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Structured output (runtime/grammar.h): every token is one the grammar allows, and the answer ends when the
  // grammar is complete. Needs a tokenizer.
  std::shared_ptr<const Grammar> grammar;
  // Speculative decoding (runtime/speculative.h), checked by one rule everywhere (Sequence::verify): the output is
  // the plain one. generate() takes prompt lookup, a draft session (spec.draft) or the model's MTP head (spec.mtp);
  // the Engine takes prompt lookup, its EngineOptions::draft model or its EngineOptions::mtp head (spec.draft and
  // spec.mtp must be null there). Both rewind a recurrent state (Qwen3.5) to its snapshot after a rejection.
  SpecParams spec;
};

enum class StopReason { kLength, kEos, kStopString, kCallback, kContext };
const char* stop_reason_name(StopReason r);  // OpenAI finish_reason values: "length", "stop", ...

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (EOS excluded)
  std::string text;             // their text (stop string excluded)
  StopReason reason = StopReason::kLength;
  int n_prompt = 0;
  int n_cached = 0;     // prompt tokens whose KV came from the prompt cache (Engine)
  int n_prefilled = 0;  // prompt tokens evaluated by forward passes (Engine): n_prompt - n_cached
  double prompt_ms = 0, gen_ms = 0;  // prefill time; decode time after the first token
  std::vector<TokenLogprob> logprobs;  // one per generated token when GenerateParams::logprobs >= 0
  int grammar_masks = 0;  // tokens for which the grammar had to mask the whole vocabulary
  SpecStats spec;         // speculative decoding's counts (GenerateParams::spec)
};

// Turns generated tokens into output text: incremental UTF-8-safe detokenization (primed with the prompt so
// leading-space rules apply as they would to the whole sequence) plus stop-string detection and hold-back.
class TextStream {
 public:
  TextStream(const Tokenizer* tok, std::span<const int32_t> prompt, std::vector<std::string> stop);
  ~TextStream();
  struct Step {
    std::string text;  // safe to emit now
    bool stopped;      // a stop string was found (text ends before it)
  };
  Step push(int32_t token);
  std::string finish();  // held-back text at the end of generation (not after a stop)

 private:
  std::unique_ptr<StreamDecoder> dec_;
  std::vector<std::string> stop_;
  std::string pending_;
};

// Decides whether a sampled token ends generation (EOS).
bool is_eos(const GenerateParams& p, const Model& m, int32_t token);

// What a generation continues from: the prompt's tokens, its media (images, video, audio; null: text) and how many
// of its first tokens the session's context already holds (a conversation's earlier turns, runtime/conversation.h).
// Only the rest is evaluated, but the whole prompt is the request's history (penalties, n-gram bans, prompt lookup,
// the text stream), so the answer is the one a fresh session would give.
struct PromptInput {
  std::span<const int32_t> tokens;
  const MultimodalPrompt* media = nullptr;  // its tokens are `tokens`
  int n_held = 0;                           // < tokens.size(); the context ends with exactly these
};
Result<GenerateResult> generate(Session& s, const Tokenizer* tok, const PromptInput& prompt, const GenerateParams& p,
                                const std::function<bool(const std::string& piece, int32_t token)>& on_text = {});

// on_text(piece, token) returns false to stop. `tok` may be null (then no text, no stop strings).
Result<GenerateResult> generate(Session& s, const Tokenizer* tok, std::span<const int32_t> prompt,
                                const GenerateParams& p,
                                const std::function<bool(const std::string& piece, int32_t token)>& on_text = {});
// The same for a prompt with images (runtime/multimodal.h).
Result<GenerateResult> generate(Session& s, const Tokenizer* tok, const MultimodalPrompt& prompt,
                                const GenerateParams& p,
                                const std::function<bool(const std::string& piece, int32_t token)>& on_text = {});

}  // namespace pipit
