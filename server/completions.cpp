// The generation endpoints: request JSON -> prompt tokens (chat template + tokenizer) -> Engine request -> one
// JSON answer, or an SSE stream fed from the engine thread through a TokenChannel. A stream whose client has
// gone (a write fails) returns false to httplib, and the response's releaser cancels the engine request, which
// frees its slot at the next step; a non-streaming answer that takes long is written the same way (PendingAnswer).
#include <chrono>

#include "runtime/multimodal.h"
#include "server/connection.h"
#include "server/handlers.h"
#include "server/local_files.h"
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

ApiError prompt_too_long(const ServerState& st, const ParsedRequest& pr, const std::string& what) {
  const bool by_option = st.prompt_limit < st.engine.n_ctx() - 1;
  return ApiError{400,
                  fmt("the prompt has {}, but this server takes at most {} prompt tokens ({}); send a shorter "
                      "prompt",
                      what, st.prompt_limit,
                      by_option ? std::string("--max-prompt-tokens")
                                : fmt("its context holds {} tokens, prompt + answer; see --ctx", st.engine.n_ctx())),
                  pr.chat ? "messages" : "prompt", "invalid_request_error", "context_length_exceeded"};
}

// Bytes of the text a chat request brings to the template: message texts and template options.
size_t chat_text_bytes(const ParsedRequest& pr) {
  size_t n = 0;
  for (const auto& m : pr.messages) {
    const auto& c = m["content"];
    if (c.is_string()) {
      n += c.get_ref<const std::string&>().size();
    } else if (c.is_array()) {
      for (const auto& part : c)
        if (auto t = part.find("text"); t != part.end() && t->is_string()) n += t->get_ref<const std::string&>().size();
    }
  }
  for (const auto& kv : pr.template_kwargs.items())
    if (kv.value().is_string()) n += kv.value().get_ref<const std::string&>().size();
  return n;
}

// The request's text as token ids: chat through the model's template, completions raw (with BOS as the
// tokenizer's post-processor adds it). Text that certainly holds more tokens than the limit (more bytes than
// prompt_limit tokens can stand for) is refused before it is rendered or tokenized: tokenizing costs ~30 bytes of
// memory per byte of text.
std::optional<ApiError> tokenize_prompt(const ServerState& st, const ParsedRequest& pr, std::vector<int32_t>& ids) {
  // x2: normalizers (NFC, accent stripping) may shorten the text before it is split into tokens.
  const size_t max_bytes = 2 * size_t(st.prompt_limit) * st.max_token_bytes;
  if (!pr.prompt_ids.empty()) {
    if (int64_t(pr.prompt_ids.size()) > st.prompt_limit)
      return prompt_too_long(st, pr, fmt("{} tokens", pr.prompt_ids.size()));
    ids = pr.prompt_ids;
    return std::nullopt;
  }
  const Tokenizer& tok = *st.lm.tokenizer;
  Result<std::vector<int32_t>> r = std::vector<int32_t>{};
  if (pr.chat) {
    if (tok.config().chat_template.empty())
      return bad_request("this model has no chat template; use /v1/completions with a raw prompt", "messages");
    if (const size_t n = chat_text_bytes(pr); n > max_bytes)
      return prompt_too_long(st, pr, fmt("{} bytes of text, more than {} tokens can hold", n, st.prompt_limit));
    // The template adds its own text around the messages; what it writes is capped at the same bound (plus room
    // for that frame) while it renders.
    auto text = apply_chat_template(tok, pr.messages, /*add_generation_prompt=*/true, pr.template_kwargs,
                                    max_bytes + (size_t(64) << 10));
    if (!text.is_ok()) {
      if (text.status().code() == Code::kOutOfRange)
        return prompt_too_long(st, pr, "a rendered text longer than its tokens could be");
      return bad_request(text.status().message(), "messages");
    }
    r = tok.encode(*text, /*add_special_tokens=*/false);
  } else {
    if (pr.prompt.size() > max_bytes)
      return prompt_too_long(st, pr, fmt("{} bytes of text, more than {} tokens can hold", pr.prompt.size(),
                                         st.prompt_limit));
    r = tok.encode(pr.prompt, /*add_special_tokens=*/true);
  }
  if (!r.is_ok()) return bad_request(r.status().message(), pr.chat ? "messages" : "prompt");
  ids = std::move(r).value();
  if (ids.empty()) return bad_request("the prompt is empty after tokenization", pr.chat ? "messages" : "prompt");
  if (int64_t(ids.size()) > st.prompt_limit) return prompt_too_long(st, pr, fmt("{} tokens", ids.size()));
  return std::nullopt;
}

// Counts a request in /health's image_requests while it decodes and encodes.
struct ImageWork {
  std::atomic<int>& n;
  explicit ImageWork(std::atomic<int>& c) : n(c) { ++n; }
  ~ImageWork() { --n; }
};

// The request's images decoded, preprocessed and encoded by the vision tower, and the prompt's image
// placeholders expanded to one token per feature. One image at a time per server (the tower uses every image
// thread), taken in turns per image, so a request with many images does not hold the others for all of them; the
// work stops between images when the client has left. Every failure here comes from the request's images.
Result<MultimodalPrompt> encode_images(ServerState& st, std::span<const int32_t> ids,
                                       const std::vector<std::string>& sources) {
  if (!st.image_proc) return Error::invalid_argument("[image] {}", st.image_proc_error);
  ImageWork counted(st.image_requests);
  std::vector<EncodedImage> images;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string& src = sources[i];
    if (GuardedHttpServer::client_gone() || st.stopping) return Error::cancelled("[image] the client has left");
    std::lock_guard<FairTurns> turn(st.image_turns);
    if (GuardedHttpServer::client_gone() || st.stopping) return Error::cancelled("[image] the client has left");
    Result<Image> img = Error::internal("unset");
    if (src.rfind("data:", 0) == 0) {
      img = load_image(src);
    } else {
      // A local path (only with --allow-local-files DIR): read from DIR only; every failure, decoding included,
      // is the one refusal message.
      auto bytes = read_shared_file(st.opt.local_files_dir, src, st.opt.max_body);
      if (bytes.is_ok())
        img = decode_image(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()),
                           "image");
      if (!bytes.is_ok() || !img.is_ok()) return Error::invalid_argument("{}", kLocalFileRefused);
    }
    if (!img.is_ok()) return img.status();
    auto e = encode_image(*st.lm.model, *st.image_proc, *img, *st.image_pool);
    if (!e.is_ok()) return e.status().with_context(fmt("[image] image {}", i + 1));
    images.push_back(std::move(e).value());
    ++st.images_encoded;
  }
  return build_multimodal_prompt(*st.lm.model, ids, images);
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


// JSON values in `s` (objects, arrays, strings, and one more per comma), counted without parsing. nlohmann's tree
// costs ~80 bytes per value (a 32 MiB body of "{}," would take ~1 GB), and an allocation failure while a tree is
// freed ends the process (its destructor allocates), so a body's parse is bounded before it starts.
size_t json_values(std::string_view s) {
  size_t n = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
      ++n;
    } else if (c == '{' || c == '[' || c == ',') {
      ++n;
    }
  }
  return n;
}

constexpr size_t kMaxJsonValues = size_t(1) << 18;

}  // namespace

void handle_generate(ServerState& st, const std::string& text, httplib::Response& res, bool chat) {
  if (json_values(text) > kMaxJsonValues)
    return send_error(res, ApiError{413, fmt("the request body holds more than {} JSON values", kMaxJsonValues), "",
                                    "invalid_request_error", "request_too_large"});
  json body;
  try {
    body = json::parse(text);
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
    if (!mm.is_ok()) {
      if (mm.status().code() == Code::kCancelled) GuardedHttpServer::close_after_response();
      return send_error(res, bad_request(mm.status().message(), "messages"));
    }
    ids = mm->tokens;
    images = std::make_shared<const MultimodalPrompt>(std::move(mm).value());
  }
  if (int64_t(ids.size()) > st.prompt_limit)  // with its images expanded
    return send_error(res, prompt_too_long(st, pr, fmt("{} tokens", ids.size())));

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
