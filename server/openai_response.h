// Response bodies in OpenAI's shapes: chat.completion / text_completion objects, their streamed chunks
// (chat.completion.chunk: a first chunk with the role, content deltas, a last chunk with finish_reason and, when
// asked, a usage chunk with no choices), and the SSE framing "data: <json>\n\n" ... "data: [DONE]\n\n".
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/generator.h"
#include "server/tool_calls.h"

namespace pipit {
class Tokenizer;
}

namespace pipit::server {

struct ResponseMeta {
  std::string id;     // "chatcmpl-..." or "cmpl-..."
  std::string model;  // what the client asked for, else the served model's name
  int64_t created = 0;
  bool chat = true;
  bool include_usage = false;  // streaming: every chunk carries "usage": null, then a usage chunk
  bool logprobs = false;       // choices carry logprobs (chat: {"content": [...]}, completions: the legacy lists)
  const Tokenizer* tok = nullptr;  // token strings for logprobs
  bool tokens_as_ids = false;      // vLLM's return_tokens_as_token_ids: logprobs name tokens "token_id:N"
  // chat with tools: answers are parsed for calls in this syntax (kNone: not parsed)
  ToolSyntax tool_syntax = ToolSyntax::kNone;
  std::vector<std::string> tool_names;
  bool parallel_tool_calls = true;
  bool legacy_functions = false;  // the request used `functions`: the call is message.function_call
  // chat: <think>...</think> goes to reasoning_content (server/reasoning.h); `reasoning_opened`: the prompt opened it
  bool reasoning = false;
  bool reasoning_opened = false;
};

// With speculative decoding (spec.drafted > 0), completion_tokens_details.accepted_prediction_tokens /
// rejected_prediction_tokens: the guesses the model accepted / rejected (OpenAI's fields for predicted outputs).
nlohmann::json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens = 0, const SpecStats& spec = {});

// OpenAI's finish_reason for a stop: "stop" or "length". An answer cut short by the server's shutdown (the only
// cancellation a client lives to see) reports "stop": OpenAI has no value for it and strict clients reject others.
const char* finish_reason(StopReason r);

// The whole answer (stream: false): one choice per result, usage over them all (the prompt counted once).
nlohmann::json completion_json(const ResponseMeta& m, const GenerateResult& r);
nlohmann::json completion_json(const ResponseMeta& m, std::span<const GenerateResult> rs);

// Log-probabilities in OpenAI's shapes. Chat: {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}.
// Completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}, offsets from text_offset0.
nlohmann::json chat_logprobs_json(const Tokenizer& tok, std::span<const TokenLogprob> lps, bool as_ids = false);
nlohmann::json completion_logprobs_json(const Tokenizer& tok, std::span<const TokenLogprob> lps, size_t text_offset0,
                                        bool as_ids = false);

// One streamed chunk: `text` as the delta; `role` adds "role": "assistant" (chat's first chunk); a non-null
// `finish_reason` ends the choice.
nlohmann::json chunk_json(const ResponseMeta& m, const std::string& text, bool role, const char* finish_reason);
// The same for choice `index`, with its log-probabilities (null: none) as a chunk carries them.
nlohmann::json chunk_json(const ResponseMeta& m, int index, const std::string& text, bool role,
                          const char* finish_reason, nlohmann::json logprobs);
// A streamed tool call of choice `index`, as OpenAI sends one: a chunk with its id, type and name (arguments ""),
// then a chunk with the arguments. `call_index`: the call's place among the choice's calls.
nlohmann::json tool_call_chunk_json(const ResponseMeta& m, int index, const ToolCall& c, int call_index, bool head);
// A streamed piece of choice `index`'s thinking: delta.reasoning_content.
nlohmann::json reasoning_chunk_json(const ResponseMeta& m, int index, const std::string& text, nlohmann::json logprobs);
// llama-server's "timings" of one request: prompt_n (evaluated) / cache_n (from the prompt cache), prompt_ms (its
// admission to its first token), predicted_n, predicted_ms (after the first token), per-token ms and per-second.
nlohmann::json timings_json(const GenerateResult& r);
// The last chunk when stream_options.include_usage: no choices, the counts.
nlohmann::json usage_chunk_json(const ResponseMeta& m, const GenerateResult& r);
nlohmann::json usage_chunk_json(const ResponseMeta& m, int prompt_tokens, int completion_tokens,
                                int cached_tokens = 0, const SpecStats& spec = {});

// JSON text; invalid UTF-8 (which should never reach here) is replaced rather than thrown on.
std::string to_text(const nlohmann::json& j);
std::string sse_data(const nlohmann::json& j);  // "data: {...}\n\n"
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// "chatcmpl-" + 24 random hex digits.
std::string make_id(const char* prefix);

}  // namespace pipit::server
