// The generation endpoints: request JSON -> prompt tokens (chat template + tokenizer) -> Engine request -> one
// JSON answer, or an SSE stream fed from the engine thread through a TokenChannel. A stream whose client has
// gone (a write fails) returns false to httplib, and the response's releaser cancels the engine request, which
// frees its slot at the next step; a non-streaming answer that takes long is written the same way (PendingAnswer).
#include <chrono>

#include "runtime/multimodal.h"
#include "server/handlers.h"
#include "server/openai_response.h"
#include "server/token_channel.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pipit::server {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr auto kPollInterval = 100ms;   // how often a waiting handler looks at shutdown / the connection

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The request's text as token ids: chat through the model's template, completions raw (with BOS as the
// tokenizer's post-processor adds it).
std::optional<ApiError> tokenize_prompt(const ServerState& st, const ParsedRequest& pr, std::vector<int32_t>& ids) {
  if (!pr.prompt_ids.empty()) {
    ids = pr.prompt_ids;
    return std::nullopt;
  }
  const Tokenizer& tok = *st.lm.tokenizer;
  Result<std::vector<int32_t>> r = std::vector<int32_t>{};
  if (pr.chat) {
    if (tok.config().chat_template.empty())
      return bad_request("this model has no chat template; use /v1/completions with a raw prompt", "messages");
    auto text = apply_chat_template(tok, pr.messages, /*add_generation_prompt=*/true, pr.template_kwargs);
    if (!text.is_ok()) return bad_request(text.status().message(), "messages");
    r = tok.encode(*text, /*add_special_tokens=*/false);
  } else {
    r = tok.encode(pr.prompt, /*add_special_tokens=*/true);
  }
  if (!r.is_ok()) return bad_request(r.status().message(), pr.chat ? "messages" : "prompt");
  ids = std::move(r).value();
  if (ids.empty()) return bad_request("the prompt is empty after tokenization", pr.chat ? "messages" : "prompt");
  return std::nullopt;
}

// The request's images decoded, preprocessed and encoded by the vision tower, and the prompt's image
// placeholders expanded to one token per feature. Every failure here comes from the request's images.
Result<MultimodalPrompt> encode_images(ServerState& st, std::span<const int32_t> ids,
                                       const std::vector<std::string>& sources) {
  std::lock_guard<std::mutex> lk(st.image_mu);
  return prepare_multimodal_prompt(st.lm, ids, sources, ImageOptions{}, *st.image_pool);
}

// A streamed answer: called by httplib again and again until it calls sink.done() or returns false.
struct Stream {
  ServerState* st;
  std::shared_ptr<TokenChannel> ch;
  uint64_t id = 0;
  ResponseMeta meta;
  bool started = false;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();

  bool write(httplib::DataSink& sink, const std::string& s) {
    last_write = std::chrono::steady_clock::now();
    return sink.write(s.data(), s.size());
  }

  bool pump(httplib::DataSink& sink) {
    if (!started) {
      started = true;
      if (meta.chat && !write(sink, sse_data(chunk_json(meta, "", /*role=*/true, nullptr)))) return false;
    }
    TokenChannel::News n = ch->wait(kPollInterval);
    if (!n.text.empty() && !write(sink, sse_data(chunk_json(meta, n.text, false, nullptr)))) return false;
    if (n.done) {
      const Result<GenerateResult>& r = ch->result();
      if (!r.is_ok()) {
        write(sink, sse_data(from_status(r.status()).body()));
      } else {
        write(sink, sse_data(chunk_json(meta, "", false, finish_reason(r->reason))));
        if (meta.include_usage) write(sink, sse_data(usage_chunk_json(meta, *r)));
      }
      write(sink, kSseDone);
      sink.done();
      return true;
    }
    if (st->stopping) return false;
    if (std::chrono::steady_clock::now() - last_write > st->opt.keepalive && !write(sink, ": keep-alive\n\n"))
      return false;
    return true;
  }
};

// A non-streaming answer that took longer than --keepalive: the status line and headers (200, JSON) have gone,
// and the body is written when the answer is ready, preceded by a space every --keepalive (JSON allows leading
// whitespace). Those writes are how a client that left is noticed, as for streams; the releaser then cancels.
// An error found this late can only be an error object in a 200 body (OpenAI's shape, which clients check for).
struct PendingAnswer {
  ServerState* st;
  std::shared_ptr<TokenChannel> ch;
  uint64_t id = 0;
  ResponseMeta meta;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();

  bool pump(httplib::DataSink& sink) {
    if (ch->wait(kPollInterval).done) {
      const Result<GenerateResult>& r = ch->result();
      const std::string body = to_text(r.is_ok() ? completion_json(meta, *r) : from_status(r.status()).body());
      sink.write(body.data(), body.size());
      sink.done();
      return true;
    }
    if (st->stopping) st->engine.cancel(id);  // the answer so far follows, finish_reason "stop"
    if (std::chrono::steady_clock::now() - last_write > st->opt.keepalive) {
      last_write = std::chrono::steady_clock::now();
      if (!sink.write(" ", 1)) return false;
    }
    return true;
  }
};

}  // namespace

void handle_generate(ServerState& st, const httplib::Request& req, httplib::Response& res, bool chat) {
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at line 1, ..."
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    return send_error(res, bad_request("the request body is not valid JSON: " + what));
  }
  ParsedRequest pr;
  if (auto e = chat ? parse_chat_request(body, st.policy, pr) : parse_completion_request(body, st.policy, pr))
    return send_error(res, *e);

  std::vector<int32_t> ids;
  if (auto e = tokenize_prompt(st, pr, ids)) return send_error(res, *e);
  std::shared_ptr<const MultimodalPrompt> images;
  if (!pr.images.empty()) {  // parse_chat_request lets images through only for vision models
    auto mm = encode_images(st, ids, pr.images);
    if (!mm.is_ok()) return send_error(res, bad_request(mm.status().message(), "messages"));
    ids = mm->tokens;
    images = std::make_shared<const MultimodalPrompt>(std::move(mm).value());
  }
  const int n_ctx = st.engine.n_ctx();
  if (int64_t(ids.size()) >= n_ctx)
    return send_error(res, ApiError{400,
                                    fmt("the prompt has {} tokens, but this server's context holds {} tokens "
                                        "(prompt + answer); send a shorter prompt or start the server with a "
                                        "larger --ctx",
                                        ids.size(), n_ctx),
                                    chat ? "messages" : "prompt", "invalid_request_error", "context_length_exceeded"});

  ResponseMeta meta;
  meta.chat = chat;
  meta.id = make_id(chat ? "chatcmpl-" : "cmpl-");
  meta.model = pr.model.empty() ? st.opt.model_name : pr.model;
  meta.created = unix_now();
  meta.include_usage = pr.stream && pr.include_usage;

  auto ch = std::make_shared<TokenChannel>();
  EngineRequest er;
  er.prompt = std::move(ids);
  er.images = std::move(images);
  er.params = pr.params;
  if (pr.stream) er.on_token = [ch](const std::string& piece, int32_t) { return ch->push(piece); };
  er.on_done = [ch](const Result<GenerateResult>& r) { ch->finish(r); };
  Result<uint64_t> id = st.engine.submit(std::move(er));
  if (!id.is_ok()) return send_error(res, from_status(id.status(), chat ? "messages" : "prompt"));

  if (!pr.stream) {
    // Most answers come within --keepalive and get a plain response (any late error with its own status);
    // a longer one becomes a PendingAnswer, so that a client that leaves still frees its slot.
    const auto t0 = std::chrono::steady_clock::now();
    bool done = false;
    while (!(done = ch->wait(kPollInterval).done) && std::chrono::steady_clock::now() - t0 < st.opt.keepalive)
      if (st.stopping) st.engine.cancel(*id);
    if (done) {
      const Result<GenerateResult>& r = ch->result();
      if (!r.is_ok()) return send_error(res, from_status(r.status()));
      res.set_content(to_text(completion_json(meta, *r)), "application/json");
      return;
    }
    auto pending = std::make_shared<PendingAnswer>(PendingAnswer{&st, ch, *id, meta});
    res.set_chunked_content_provider(
        "application/json", [pending](size_t, httplib::DataSink& sink) { return pending->pump(sink); },
        [pending](bool success) {
          if (success) return;
          pending->ch->abandon();  // the client left: stop generating for it
          pending->st->engine.cancel(pending->id);
        });
    return;
  }

  auto stream = std::make_shared<Stream>(Stream{&st, ch, *id, meta});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
      [stream](bool success) {
        if (success) return;
        stream->ch->abandon();  // the client left: stop generating for it
        stream->st->engine.cancel(stream->id);
      });
}

}  // namespace pipit::server
