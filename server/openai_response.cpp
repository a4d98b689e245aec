// OpenAI response and chunk JSON (see openai_response.h).
#include "server/openai_response.h"

#include <random>

namespace pipit::server {

using json = nlohmann::json;

namespace {

const char* object_name(const ResponseMeta& m, bool chunk) {
  if (!m.chat) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json header(const ResponseMeta& m, bool chunk) {
  return {{"id", m.id}, {"object", object_name(m, chunk)}, {"created", m.created}, {"model", m.model},
          {"system_fingerprint", "pipit-" PIPIT_VERSION}};
}

}  // namespace

json usage_json(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

const char* finish_reason(StopReason r) { return r == StopReason::kCallback ? "stop" : stop_reason_name(r); }

json completion_json(const ResponseMeta& m, const GenerateResult& r) {
  json out = header(m, false);
  json choice = {{"index", 0}};
  if (m.chat) choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  else choice["text"] = r.text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason(r.reason);
  out["choices"] = json::array({std::move(choice)});
  out["usage"] = usage_json(r.n_prompt, int(r.tokens.size()));
  return out;
}

json chunk_json(const ResponseMeta& m, const std::string& text, bool role, const char* finish_reason) {
  json out = header(m, true);
  json choice = {{"index", 0}};
  if (m.chat) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (role || !text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason ? json(finish_reason) : json();
  out["choices"] = json::array({std::move(choice)});
  if (m.include_usage) out["usage"] = nullptr;
  return out;
}

json usage_chunk_json(const ResponseMeta& m, const GenerateResult& r) {
  json out = header(m, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(r.n_prompt, int(r.tokens.size()));
  return out;
}

std::string to_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_data(const json& j) { return "data: " + to_text(j) + "\n\n"; }

std::string make_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

}  // namespace pipit::server
