// Response bodies in OpenAI's shapes: chat.completion / text_completion objects, their streamed chunks
// (chat.completion.chunk: a first chunk with the role, content deltas, a last chunk with finish_reason and, when
// asked, a usage chunk with no choices), and the SSE framing "data: <json>\n\n" ... "data: [DONE]\n\n".
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/generator.h"

namespace pipit::server {

struct ResponseMeta {
  std::string id;     // "chatcmpl-..." or "cmpl-..."
  std::string model;  // what the client asked for, else the served model's name
  int64_t created = 0;
  bool chat = true;
  bool include_usage = false;  // streaming: every chunk carries "usage": null, then a usage chunk
};

nlohmann::json usage_json(int prompt_tokens, int completion_tokens);

// OpenAI's finish_reason for a stop: "stop" or "length". An answer cut short by the server's shutdown (the only
// cancellation a client lives to see) reports "stop": OpenAI has no value for it and strict clients reject others.
const char* finish_reason(StopReason r);

// The whole answer (stream: false).
nlohmann::json completion_json(const ResponseMeta& m, const GenerateResult& r);

// One streamed chunk: `text` as the delta; `role` adds "role": "assistant" (chat's first chunk); a non-null
// `finish_reason` ends the choice.
nlohmann::json chunk_json(const ResponseMeta& m, const std::string& text, bool role, const char* finish_reason);
// The last chunk when stream_options.include_usage: no choices, the counts.
nlohmann::json usage_chunk_json(const ResponseMeta& m, const GenerateResult& r);

// JSON text; invalid UTF-8 (which should never reach here) is replaced rather than thrown on.
std::string to_text(const nlohmann::json& j);
std::string sse_data(const nlohmann::json& j);  // "data: {...}\n\n"
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// "chatcmpl-" + 24 random hex digits.
std::string make_id(const char* prefix);

}  // namespace pipit::server
