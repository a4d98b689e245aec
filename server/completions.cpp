// The generation endpoints: request JSON -> prompt tokens (chat template + tokenizer) -> Engine request -> one
// JSON answer, or an SSE stream fed from the engine thread through a TokenChannel. A stream whose client has
// gone (a write fails, or the socket reads as closed: GuardedHttpServer::client_gone, looked at every
// kPollInterval) returns false to httplib, and the response's releaser cancels the engine request, which frees its
// slot at the next step; a non-streaming answer that takes long is written the same way (PendingAnswer), and one
// still waiting for its first --keepalive is cancelled by the handler itself.
#include <chrono>

#include "models/vision/video_file.h"
#include "runtime/audio_input.h"
#include "runtime/multimodal.h"
#include "runtime/multimodal_video.h"
#include "server/connection.h"
#include "server/handlers.h"
#include "server/local_files.h"
#include "server/openai_response.h"
#include "server/reasoning.h"
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

// The template a request with tools is rendered with: the config's "tool_use" one if it has one.
const std::string& tool_template(const ServerState& st) {
  static const std::string kNone;
  if (!st.lm.tokenizer) return kNone;
  const auto& cfg = st.lm.tokenizer->config();
  auto it = cfg.chat_templates.find("tool_use");
  return it != cfg.chat_templates.end() ? it->second : cfg.chat_template;
}

}  // namespace

// A chat request's messages (and tools) through the model's template, under the same byte cap as its tokens.
std::optional<ApiError> render_chat(const ServerState& st, const ParsedRequest& pr, std::string& out) {
  const size_t max_bytes = 2 * size_t(st.prompt_limit) * st.max_token_bytes;
  const Tokenizer& tok = *st.lm.tokenizer;
  if (tok.config().chat_template.empty())
    return bad_request("this model has no chat template; use /v1/completions with a raw prompt", "messages");
  if (const size_t n = chat_text_bytes(pr); n > max_bytes)
    return prompt_too_long(st, pr, fmt("{} bytes of text, more than {} tokens can hold", n, st.prompt_limit));
  nlohmann::ordered_json kwargs = pr.template_kwargs;
  if (!pr.tools.is_null()) {
    kwargs["tools"] = pr.tools;
    // SmolLM3's template reads its tool list from xml_tools
    if (tool_template(st).find("xml_tools") != std::string::npos) kwargs["xml_tools"] = pr.tools;
  }
  // The template adds its own text around the messages; what it writes is capped at the same bound (plus room
  // for that frame) while it renders.
  auto text = apply_chat_template(tok, pr.messages, /*add_generation_prompt=*/true, kwargs,
                                  max_bytes + (size_t(64) << 10));
  if (!text.is_ok()) {
    if (text.status().code() == Code::kOutOfRange)
      return prompt_too_long(st, pr, "a rendered text longer than its tokens could be");
    return bad_request(text.status().message(), "messages");
  }
  out = std::move(text).value();
  return std::nullopt;
}

namespace {

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
    std::string text;
    if (auto e = render_chat(st, pr, text)) return e;
    r = tok.encode(text, /*add_special_tokens=*/false);
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

// The request's images decoded, preprocessed and encoded by the vision tower. One image at a time per server (the
// tower uses every encode thread: Engine::encode), taken in turns per image, so a request with many images does not
// hold the others for all of them; the work stops between images when the client has left. Every failure here
// comes from the request's images.
Result<std::vector<EncodedImage>> encode_image_list(ServerState& st, const std::vector<std::string>& sources) {
  if (sources.empty()) return std::vector<EncodedImage>{};
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
    // on the engine's encode pool: the running streams keep decoding on the threads it leaves them
    auto e = st.engine.encode([&](ThreadPool& pool) { return encode_image(*st.lm.model, *st.image_proc, *img, pool); });
    if (!e.is_ok()) return e.status().with_context(fmt("[image] image {}", i + 1));
    images.push_back(std::move(e).value());
    ++st.images_encoded;
  }
  return images;
}

// The request's images, then its videos (each a data URL or a local path under --allow-local-files) decoded as
// sampled and encoded the same way (in turns with other requests' media), and the prompt's placeholders expanded.
Result<MultimodalPrompt> encode_media(ServerState& st, std::span<const int32_t> ids,
                                      const std::vector<std::string>& image_sources,
                                      const std::vector<std::string>& video_sources) {
  PIPIT_ASSIGN_OR_RETURN(std::vector<EncodedImage> images, encode_image_list(st, image_sources));
  if (video_sources.empty()) return build_multimodal_prompt(*st.lm.model, ids, images);
  if (!st.video_proc || !st.lm.tokenizer) return Error::invalid_argument("[video] this server takes no videos");
  ImageWork counted(st.image_requests);
  std::vector<EncodedVideo> videos;
  for (size_t i = 0; i < video_sources.size(); ++i) {
    const std::string& src = video_sources[i];
    if (GuardedHttpServer::client_gone() || st.stopping) return Error::cancelled("[video] the client has left");
    std::lock_guard<FairTurns> turn(st.image_turns);
    if (GuardedHttpServer::client_gone() || st.stopping) return Error::cancelled("[video] the client has left");
    Result<std::unique_ptr<VideoFile>> file = Error::internal("unset");
    if (src.rfind("data:", 0) == 0) {
      file = open_video(src);
    } else {  // a local path (--allow-local-files DIR): every failure to read it is the one refusal message
      auto bytes = read_shared_file(st.opt.local_files_dir, src, st.opt.max_body);
      if (bytes.is_ok()) file = VideoFile::open_bytes(std::vector<uint8_t>(bytes->begin(), bytes->end()), "video");
      if (!bytes.is_ok() || !file.is_ok()) return Error::invalid_argument("{}", kLocalVideoRefused);
    }
    if (!file.is_ok()) return file.status();
    auto e = st.engine.encode(
        [&](ThreadPool& pool) { return encode_video_file(*st.lm.model, *st.video_proc, **file, pool); });
    if (!e.is_ok()) return e.status().with_context(fmt("[video] video {}", i + 1));
    videos.push_back(std::move(e).value());
  }
  const Tokenizer& tok = *st.lm.tokenizer;
  const TextEncoder encode = [&tok](const std::string& text) { return tok.encode(text, false); };
  return build_multimodal_prompt(*st.lm.model, ids, images, videos, encode);
}

// The request's audio clips decoded (libsndfile, resampled to 16 kHz), encoded by the audio tower in the images'
// turns, and spliced into `p` (a text prompt or one with images). Every failure here comes from the request's audio.
Status encode_audios(ServerState& st, MultimodalPrompt& p, const std::vector<ParsedRequest::Audio>& clips) {
  ImageWork counted(st.image_requests);
  std::vector<Tensor> soft;
  for (size_t i = 0; i < clips.size(); ++i) {
    if (GuardedHttpServer::client_gone() || st.stopping) return Error::cancelled("[audio] the client has left");
    const std::string what = fmt("input_audio {}", i + 1);
    auto clip = decode_audio_bytes(clips[i].bytes, clips[i].format, st.audio_enc->max_seconds(), what);
    if (!clip.is_ok()) return clip.status();
    std::lock_guard<FairTurns> turn(st.image_turns);
    if (GuardedHttpServer::client_gone() || st.stopping) return Error::cancelled("[audio] the client has left");
    auto e = st.engine.encode([&](ThreadPool& pool) { return encode_audio(*st.audio_enc, clip->samples, pool); });
    if (!e.is_ok()) return e.status().with_context("[audio] " + what);
    soft.push_back(std::move(e).value());
  }
  return splice_audio(p, st.audio_enc->tokens(), soft);
}

// The log-probabilities of one streamed chunk, in the endpoint's shape; null when not asked for.
json chunk_logprobs(const ResponseMeta& meta, std::span<const TokenLogprob> lps, size_t& text_offset) {
  if (!meta.logprobs || !meta.tok) return nullptr;
  if (meta.chat) return chat_logprobs_json(*meta.tok, lps, meta.tokens_as_ids);
  json j = completion_logprobs_json(*meta.tok, lps, text_offset, meta.tokens_as_ids);
  if (!lps.empty()) {
    const TokenLogprob& last = lps.back();
    const int32_t id = last.token;
    text_offset = j["text_offset"].back().get<size_t>() + meta.tok->decode(std::span<const int32_t>(&id, 1), false).size();
  }
  return j;
}

void cancel_all(ServerState& st, const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) st.engine.cancel(id);
}

// A streamed answer: called by httplib again and again until it calls sink.done() or returns false. Each of the
// n choices streams its own chunks (its "index"), as OpenAI interleaves them.
struct Stream {
  ServerState* st;
  std::shared_ptr<TokenChannel> ch;
  std::vector<uint64_t> ids;
  ResponseMeta meta;
  bool started = false;
  std::vector<size_t> text_offset;  // completions' logprobs: bytes of each choice's text so far
  std::vector<ToolCallStream> tools;  // chat with tools: each choice's text parsed for calls as it streams
  std::vector<ReasoningSplit> thinking;  // chat with a thinking format: each choice's <think> part split off
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();

  std::vector<int> calls_sent;
  int& n_calls_sent(int i) {
    if (calls_sent.size() <= size_t(i)) calls_sent.resize(size_t(i) + 1, 0);
    return calls_sent[size_t(i)];
  }

  bool write(httplib::DataSink& sink, const std::string& s) {
    last_write = std::chrono::steady_clock::now();
    return sink.write(s.data(), s.size());
  }

  bool pump(httplib::DataSink& sink) {
    const int n = ch->n_choices();
    if (!started) {
      started = true;
      text_offset.assign(size_t(n), 0);
      if (meta.tool_syntax != ToolSyntax::kNone)
        for (int i = 0; i < n; ++i) tools.emplace_back(meta.tool_syntax, meta.tool_names);
      if (meta.reasoning) thinking.assign(size_t(n), ReasoningSplit(meta.reasoning_opened));
      if (meta.chat)
        for (int i = 0; i < n; ++i)
          if (!write(sink, sse_data(chunk_json(meta, i, "", /*role=*/true, nullptr, nullptr)))) return false;
    }
    TokenChannel::News news = ch->wait(kPollInterval);
    for (int i = 0; i < n; ++i) {
      TokenChannel::ChoiceNews& c = news.choices[size_t(i)];
      std::string reasoning;
      if (!thinking.empty()) {  // the thinking part first: what follows it is content (and may hold tool calls)
        ReasoningSplit::Out o = thinking[size_t(i)].feed(c.text);
        if (c.finished) {
          ReasoningSplit::Out f = thinking[size_t(i)].finish();
          o.reasoning += f.reasoning;
          o.content += f.content;
        }
        reasoning = std::move(o.reasoning);
        c.text = std::move(o.content);
      }
      std::vector<ToolCall> calls;
      if (!tools.empty()) {  // content passes through the tool-call parser; completed calls come out
        ToolCallStream& ts = tools[size_t(i)];
        ToolCallStream::Out o = ts.feed(c.text);
        if (c.finished) {
          ToolCallStream::Out f = ts.finish();
          o.content += f.content;
          for (auto& call : f.calls) o.calls.push_back(std::move(call));
        }
        c.text = std::move(o.content);
        calls = std::move(o.calls);
      }
      // a piece's log-probabilities ride on its content chunk, or on its reasoning chunk when it has no content
      const bool content_chunk = !c.text.empty() || (!c.logprobs.empty() && reasoning.empty());
      json lp = content_chunk || !reasoning.empty() ? chunk_logprobs(meta, c.logprobs, text_offset[size_t(i)]) : json();
      if (!reasoning.empty() &&
          !write(sink, sse_data(reasoning_chunk_json(meta, i, reasoning, content_chunk ? json() : std::move(lp)))))
        return false;
      if (content_chunk && !write(sink, sse_data(chunk_json(meta, i, c.text, false, nullptr, std::move(lp)))))
        return false;
      for (auto& call : calls) {
        const int k = n_calls_sent(i)++;
        if (!meta.parallel_tool_calls && k > 0) continue;
        if (!write(sink, sse_data(tool_call_chunk_json(meta, i, call, k, true))) ||
            !write(sink, sse_data(tool_call_chunk_json(meta, i, call, k, false))))
          return false;
      }
      if (!c.finished) continue;
      const Result<GenerateResult>& r = ch->result(i);
      if (!r.is_ok()) {  // the stream ends with the error; the other choices are stopped
        cancel_all(*st, ids);
        write(sink, sse_data(from_status(r.status()).body()));
        write(sink, kSseDone);
        sink.done();
        return true;
      }
      const char* reason = finish_reason(r->reason);
      if (!tools.empty() && n_calls_sent(i) > 0 && r->reason != StopReason::kLength)
        reason = meta.legacy_functions ? "function_call" : "tool_calls";
      if (!write(sink, sse_data(chunk_json(meta, i, "", false, reason, nullptr)))) return false;
    }
    if (news.done) {
      if (meta.include_usage) {
        int n_completion = 0;
        SpecStats spec;
        for (int i = 0; i < n; ++i) {
          n_completion += int(ch->result(i)->tokens.size());
          spec.drafted += ch->result(i)->spec.drafted, spec.accepted += ch->result(i)->spec.accepted;
        }
        json usage = usage_chunk_json(meta, ch->result(0)->n_prompt, n_completion, ch->result(0)->n_cached, spec);
        usage["timings"] = timings_json(*ch->result(0));
        write(sink, sse_data(usage));
      }
      write(sink, kSseDone);
      sink.done();
      return true;
    }
    if (st->stopping || GuardedHttpServer::client_gone()) return false;
    if (std::chrono::steady_clock::now() - last_write > st->opt.keepalive && !write(sink, ": keep-alive\n\n"))
      return false;
    return true;
  }
};

// Every choice's result, or the first error.
Result<std::vector<GenerateResult>> all_results(const TokenChannel& ch) {
  std::vector<GenerateResult> rs;
  for (int i = 0; i < ch.n_choices(); ++i) {
    const Result<GenerateResult>& r = ch.result(i);
    if (!r.is_ok()) return r.status();
    rs.push_back(*r);
  }
  return rs;
}

// A non-streaming answer that took longer than --keepalive: the status line and headers (200, JSON) have gone,
// and the body is written when the answer is ready, preceded by a space every --keepalive (JSON allows leading
// whitespace). Those writes are how a client that left is noticed, as for streams; the releaser then cancels.
// An error found this late can only be an error object in a 200 body (OpenAI's shape, which clients check for).
struct PendingAnswer {
  ServerState* st;
  std::shared_ptr<TokenChannel> ch;
  std::vector<uint64_t> ids;
  ResponseMeta meta;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();

  bool pump(httplib::DataSink& sink) {
    if (ch->wait(kPollInterval).done) {
      auto rs = all_results(*ch);
      const std::string body = to_text(rs.is_ok() ? completion_json(meta, *rs) : from_status(rs.status()).body());
      sink.write(body.data(), body.size());
      sink.done();
      return true;
    }
    if (st->stopping) cancel_all(*st, ids);  // the answer so far follows, finish_reason "stop"
    if (GuardedHttpServer::client_gone()) return false;  // within kPollInterval, not at the next space
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

// A generation request's body, parsed and checked (the JSON-value cap, every field, tools and structured output).
std::optional<ApiError> parse_body(const ServerState& st, const std::string& text, bool chat, ParsedRequest& pr) {
  if (json_values(text) > kMaxJsonValues)
    return ApiError{413, fmt("the request body holds more than {} JSON values", kMaxJsonValues), "",
                    "invalid_request_error", "request_too_large"};
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at line 1, ..."
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    return bad_request("the request body is not valid JSON: " + what);
  }
  if (auto e = chat ? parse_chat_request(body, st.policy, pr) : parse_completion_request(body, st.policy, pr))
    return e;
  if (body.contains("tools") || body.contains("tool_choice") || body.contains("response_format") ||
      body.contains("grammar") || body.contains("parallel_tool_calls") || body.contains("functions")) {
    // again with the key order kept: tool definitions and schemas are printed in the order they were sent
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
    if (auto e = parse_structured(ordered, tool_template(st), pr)) return e;
    if (pr.params.grammar && !st.lm.tokenizer)
      return bad_request("structured output needs the model's tokenizer", pr.grammar_param);
  }
  return std::nullopt;
}

void handle_apply_template(ServerState& st, const std::string& text, httplib::Response& res) {
  ParsedRequest pr;
  if (auto e = parse_body(st, text, /*chat=*/true, pr)) return send_error(res, *e);
  if (!st.lm.tokenizer) return send_error(res, bad_request("this model has no tokenizer", "messages"));
  std::string prompt;
  if (auto e = render_chat(st, pr, prompt)) return send_error(res, *e);
  res.set_content(to_text(json{{"prompt", prompt}}), "application/json");
}

void handle_generate(ServerState& st, const std::string& text, httplib::Response& res, bool chat) {
  if (auto fs = st.files.check(); !fs) return send_error(res, ApiError{503, fs.message(), "", "server_error"});
  ParsedRequest pr;
  if (auto e = parse_body(st, text, chat, pr)) return send_error(res, *e);

  std::vector<int32_t> ids;
  if (auto e = tokenize_prompt(st, pr, ids)) return send_error(res, *e);
  std::shared_ptr<const MultimodalPrompt> images;
  if (!pr.images.empty() || !pr.videos.empty()) {  // parse_chat_request lets them through only for models taking them
    auto mm = encode_media(st, ids, pr.images, pr.videos);
    if (!mm.is_ok()) {
      if (mm.status().code() == Code::kCancelled) GuardedHttpServer::close_after_response();
      return send_error(res, bad_request(mm.status().message(), "messages"));
    }
    ids = mm->tokens;
    images = std::make_shared<const MultimodalPrompt>(std::move(mm).value());
  }
  if (!pr.audios.empty()) {  // parse_chat_request lets audio through only for models with an audio tower
    MultimodalPrompt mm = images ? *images : text_prompt(ids);
    if (auto s = encode_audios(st, mm, pr.audios); !s.is_ok()) {
      if (s.code() == Code::kCancelled) GuardedHttpServer::close_after_response();
      return send_error(res, bad_request(s.message(), "messages"));
    }
    ids = mm.tokens;
    images = std::make_shared<const MultimodalPrompt>(std::move(mm));
  }
  if (int64_t(ids.size()) > st.prompt_limit)  // with its images expanded
    return send_error(res, prompt_too_long(st, pr, fmt("{} tokens", ids.size())));

  ResponseMeta meta;
  meta.chat = chat;
  meta.id = make_id(chat ? "chatcmpl-" : "cmpl-");
  meta.model = pr.model.empty() ? st.opt.model_name : pr.model;
  meta.created = unix_now();
  meta.include_usage = pr.stream && pr.include_usage;

  meta.tool_syntax = pr.tool_syntax;
  meta.tool_names = pr.tool_names;
  meta.parallel_tool_calls = pr.parallel_tool_calls;
  meta.legacy_functions = pr.legacy_functions;
  meta.logprobs = pr.params.logprobs >= 0;
  meta.tokens_as_ids = pr.tokens_as_ids;
  meta.tok = st.lm.tokenizer.get();
  if (chat && meta.tok) {
    ReasoningFormat f = pr.reasoning_format.value_or(st.opt.reasoning_format);
    if (f == ReasoningFormat::kAuto)  // the model has a thinking format when its template writes <think>
      f = meta.tok->config().chat_template.find("<think>") != std::string::npos ? ReasoningFormat::kDeepseek
                                                                               : ReasoningFormat::kNone;
    meta.reasoning = f == ReasoningFormat::kDeepseek;
    if (meta.reasoning) {  // templates that open the block for the model (DeepSeek-R1, Qwen3 thinking-2507)
      const size_t n_tail = std::min<size_t>(ids.size(), 8);
      meta.reasoning_opened = prompt_opens_thinking(
          meta.tok->decode(std::span<const int32_t>(ids).last(n_tail), /*skip_special_tokens=*/false));
    }
  }

  // n choices: n engine requests over the same prompt, choice i sampled with seed + i.
  auto ch = std::make_shared<TokenChannel>(pr.n);
  std::vector<uint64_t> ids_submitted;
  for (int i = 0; i < pr.n; ++i) {
    EngineRequest er;
    er.prompt = ids;
    er.images = images;
    er.params = pr.params;
    er.params.sampler.seed = pr.params.sampler.seed + uint64_t(i);
    er.params.spec.n_draft = st.opt.n_draft;  // --lookup / --draft (EngineOptions::draft): guesses per step
    if (pr.stream) {
      er.on_token = [ch, i](const std::string& piece, int32_t) { return ch->push(i, piece); };
      if (meta.logprobs) er.on_logprob = [ch, i](const TokenLogprob& lp) { ch->push_logprob(i, lp); };
    }
    er.on_done = [ch, i](const Result<GenerateResult>& r) { ch->finish(i, r); };
    Result<uint64_t> id = st.engine.submit(std::move(er));
    if (!id.is_ok()) {
      cancel_all(st, ids_submitted);
      return send_error(res, from_status(id.status(), chat ? "messages" : "prompt"));
    }
    ids_submitted.push_back(*id);
  }

  if (!pr.stream) {
    // Most answers come within --keepalive and get a plain response (any late error with its own status);
    // a longer one becomes a PendingAnswer, so that a client that leaves still frees its slot.
    const auto t0 = std::chrono::steady_clock::now();
    bool done = false;
    while (!(done = ch->wait(kPollInterval).done) && std::chrono::steady_clock::now() - t0 < st.opt.keepalive) {
      if (st.stopping) cancel_all(st, ids_submitted);
      if (GuardedHttpServer::client_gone()) {  // no one to answer: stop its generation (or take it off the queue)
        ch->abandon();
        cancel_all(st, ids_submitted);
        GuardedHttpServer::close_after_response();
        return send_error(res, ApiError{499, "the client closed the connection", "", "invalid_request_error",
                                        "client_closed_request"});
      }
    }
    if (done) {
      auto rs = all_results(*ch);
      if (!rs.is_ok()) return send_error(res, from_status(rs.status()));
      res.set_content(to_text(completion_json(meta, *rs)), "application/json");
      return;
    }
    auto pending = std::make_shared<PendingAnswer>(PendingAnswer{&st, ch, ids_submitted, meta});
    res.set_chunked_content_provider(
        "application/json", [pending](size_t, httplib::DataSink& sink) { return pending->pump(sink); },
        [pending](bool success) {
          if (success) return;
          pending->ch->abandon();  // the client left: stop generating for it
          cancel_all(*pending->st, pending->ids);
        });
    return;
  }

  auto stream = std::make_shared<Stream>(Stream{&st, ch, ids_submitted, meta});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
      [stream](bool success) {
        if (success) return;
        stream->ch->abandon();  // the client left: stop generating for it
        cancel_all(*stream->st, stream->ids);
      });
}

}  // namespace pipit::server
