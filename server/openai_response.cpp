// OpenAI response and chunk JSON (see openai_response.h).
#include "server/openai_response.h"

#include <algorithm>
#include <random>

#include "server/reasoning.h"
#include "tokenizer/tokenizer.h"

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

json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens, const SpecStats& spec) {
  // cached_tokens: prompt tokens whose KV came from the prompt cache (OpenAI's field for its own prompt caching)
  json u = {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
  if (spec.drafted > 0)
    u["completion_tokens_details"] = {{"accepted_prediction_tokens", spec.accepted},
                                      {"rejected_prediction_tokens", spec.drafted - spec.accepted}};
  return u;
}

const char* finish_reason(StopReason r) { return r == StopReason::kCallback ? "stop" : stop_reason_name(r); }

namespace {

json token_bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

std::string piece(const Tokenizer& tok, int32_t id, bool as_id) {
  if (as_id) return "token_id:" + std::to_string(id);
  return tok.decode(std::span<const int32_t>(&id, 1), false);
}

}  // namespace

json chat_logprobs_json(const Tokenizer& tok, std::span<const TokenLogprob> lps, bool as_ids) {
  json content = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string t = piece(tok, lp.token, as_ids);
    json top = json::array();
    for (auto& [id, v] : lp.top) {
      const std::string ti = piece(tok, id, as_ids);
      top.push_back({{"token", ti}, {"logprob", v}, {"bytes", token_bytes(ti)}});
    }
    content.push_back({{"token", t}, {"logprob", lp.logprob}, {"bytes", token_bytes(t)}, {"top_logprobs", top}});
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

json completion_logprobs_json(const Tokenizer& tok, std::span<const TokenLogprob> lps, size_t text_offset0,
                              bool as_ids) {
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  size_t off = text_offset0;
  for (const TokenLogprob& lp : lps) {
    const std::string t = piece(tok, lp.token, as_ids);
    tokens.push_back(t);
    values.push_back(lp.logprob);
    offsets.push_back(off);
    off += as_ids ? piece(tok, lp.token, false).size() : t.size();
    json top = json::object();
    for (auto& [id, v] : lp.top) top[piece(tok, id, as_ids)] = v;
    tops.push_back(std::move(top));
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json completion_json(const ResponseMeta& m, const GenerateResult& r) {
  return completion_json(m, std::span<const GenerateResult>(&r, 1));
}

json completion_json(const ResponseMeta& m, std::span<const GenerateResult> rs) {
  json out = header(m, false);
  out["choices"] = json::array();
  int n_completion = 0;
  SpecStats spec;
  for (size_t i = 0; i < rs.size(); ++i) {
    const GenerateResult& r = rs[i];
    json choice = {{"index", int(i)}};
    const char* reason = finish_reason(r.reason);
    ReasoningSplit::Out split;
    if (m.chat && m.reasoning) split = split_reasoning(r.text, m.reasoning_opened);
    else split.content = r.text;
    if (m.chat && m.tool_syntax != ToolSyntax::kNone) {
      ParsedAnswer pa = parse_tool_calls(m.tool_syntax, split.content, m.tool_names);
      if (!m.parallel_tool_calls && pa.calls.size() > 1) pa.calls.resize(1);
      json msg = {{"role", "assistant"}, {"content", pa.calls.empty() || !pa.content.empty() ? json(pa.content) : json()}};
      if (!pa.calls.empty() && m.legacy_functions) {  // the legacy shape: one function_call, no id
        msg["function_call"] = {{"name", pa.calls[0].name}, {"arguments", pa.calls[0].arguments}};
        if (r.reason != StopReason::kLength) reason = "function_call";
      } else if (!pa.calls.empty()) {
        json calls = json::array();
        for (size_t k = 0; k < pa.calls.size(); ++k) calls.push_back(tool_call_json(pa.calls[k], int(k), false));
        msg["tool_calls"] = std::move(calls);
        if (r.reason != StopReason::kLength) reason = "tool_calls";
      }
      choice["message"] = std::move(msg);
    } else if (m.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", split.content}};
    } else {
      choice["text"] = r.text;
    }
    if (m.chat && !split.reasoning.empty()) choice["message"]["reasoning_content"] = split.reasoning;
    choice["logprobs"] = nullptr;
    if (m.logprobs && m.tok)
      choice["logprobs"] = m.chat ? chat_logprobs_json(*m.tok, r.logprobs, m.tokens_as_ids)
                                  : completion_logprobs_json(*m.tok, r.logprobs, 0, m.tokens_as_ids);
    choice["finish_reason"] = reason;
    out["choices"].push_back(std::move(choice));
    n_completion += int(r.tokens.size());
    spec.drafted += r.spec.drafted, spec.accepted += r.spec.accepted;
  }
  out["usage"] = usage_json(rs.empty() ? 0 : rs[0].n_prompt, n_completion, rs.empty() ? 0 : rs[0].n_cached, spec);
  if (!rs.empty()) out["timings"] = timings_json(rs[0]);  // of the first choice
  return out;
}

json chunk_json(const ResponseMeta& m, const std::string& text, bool role, const char* finish_reason) {
  return chunk_json(m, 0, text, role, finish_reason, nullptr);
}

json chunk_json(const ResponseMeta& m, int index, const std::string& text, bool role, const char* finish_reason,
                json logprobs) {
  json out = header(m, true);
  json choice = {{"index", index}};
  if (m.chat) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (role || !text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish_reason ? json(finish_reason) : json();
  out["choices"] = json::array({std::move(choice)});
  if (m.include_usage) out["usage"] = nullptr;
  return out;
}

json timings_json(const GenerateResult& r) {
  const int n_pred = int(r.tokens.size());
  auto per_second = [](double n, double ms) { return ms > 0 ? 1000.0 * n / ms : 0.0; };
  auto per_token = [](double n, double ms) { return n > 0 ? ms / n : 0.0; };
  // tokens after the first are what predicted_ms measures
  const int n_after = std::max(n_pred - 1, 0);
  return {{"prompt_n", r.n_prefilled},
          {"cache_n", r.n_cached},
          {"prompt_ms", r.prompt_ms},
          {"prompt_per_token_ms", per_token(r.n_prefilled, r.prompt_ms)},
          {"prompt_per_second", per_second(r.n_prefilled, r.prompt_ms)},
          {"predicted_n", n_pred},
          {"predicted_ms", r.gen_ms},
          {"predicted_per_token_ms", per_token(n_after, r.gen_ms)},
          {"predicted_per_second", per_second(n_after, r.gen_ms)}};
}

json reasoning_chunk_json(const ResponseMeta& m, int index, const std::string& text, json logprobs) {
  json out = header(m, true);
  json choice = {{"index", index}, {"delta", {{"reasoning_content", text}}}, {"logprobs", std::move(logprobs)},
                 {"finish_reason", nullptr}};
  out["choices"] = json::array({std::move(choice)});
  if (m.include_usage) out["usage"] = nullptr;
  return out;
}

json tool_call_chunk_json(const ResponseMeta& m, int index, const ToolCall& c, int call_index, bool head) {
  json out = header(m, true);
  if (m.legacy_functions) {  // delta.function_call: the name first, then the arguments
    json fc = head ? json{{"name", c.name}, {"arguments", ""}} : json{{"arguments", c.arguments}};
    out["choices"] = json::array({{{"index", index}, {"delta", {{"function_call", std::move(fc)}}},
                                   {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    if (m.include_usage) out["usage"] = nullptr;
    return out;
  }
  json tc = {{"index", call_index}};
  if (head) {
    tc["id"] = c.id;
    tc["type"] = "function";
    tc["function"] = {{"name", c.name}, {"arguments", ""}};
  } else {
    tc["function"] = {{"arguments", c.arguments}};
  }
  json choice = {{"index", index}, {"delta", {{"tool_calls", json::array({std::move(tc)})}}}, {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  out["choices"] = json::array({std::move(choice)});
  if (m.include_usage) out["usage"] = nullptr;
  return out;
}

json usage_chunk_json(const ResponseMeta& m, const GenerateResult& r) {
  return usage_chunk_json(m, r.n_prompt, int(r.tokens.size()), r.n_cached, r.spec);
}

json usage_chunk_json(const ResponseMeta& m, int prompt_tokens, int completion_tokens, int cached_tokens,
                      const SpecStats& spec) {
  json out = header(m, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(prompt_tokens, completion_tokens, cached_tokens, spec);
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
