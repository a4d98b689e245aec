// The HTTP side: cpp-httplib setup (threads, limits, timeouts), routes, the API key check, OpenAI-shaped bodies
// for the errors httplib produces itself (404, 413, malformed HTTP), /health and /v1/models.
#include "server/server.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>

#include "models/media_note.h"
#include "models/vision/video_file.h"
#include "models/vision/vision_model.h"
#include "runtime/audio_input.h"
#include "runtime/multimodal.h"
#include "runtime/multimodal_video.h"
#include "server/connection.h"
#include "server/handlers.h"
#include "server/openai_response.h"
#include "server/origin_policy.h"
#include "tokenizer/tokenizer.h"

namespace pipit::server {

// The chat page and its scripts: build/generated/web_k*.cpp (cmake/embed_file.cmake, from server/web/ and Debian's
// libjs-marked and node-dompurify)
extern const unsigned char kIndexHtml[], kChatJs[], kMarkedJs[], kPurifyJs[];
extern const size_t kIndexHtml_size, kChatJs_size, kMarkedJs_size, kPurifyJs_size;

using json = nlohmann::json;

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(to_text(e.body()), "application/json");
}

namespace {

// Compares in time independent of where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(i < b.size() ? b[i] : 0);
  return diff == 0;
}

bool authorized(const ServerState& st, const httplib::Request& req, httplib::Response& res) {
  if (st.opt.api_key.empty()) return true;
  if (same_secret(req.get_header_value("Authorization"), "Bearer " + st.opt.api_key)) return true;
  send_error(res, ApiError{401, "Incorrect or missing API key: send 'Authorization: Bearer <key>'", "",
                           "invalid_request_error", "invalid_api_key"});
  return false;
}

ApiError too_large(const ServerState& st) {
  return ApiError{413, fmt("the request body is larger than this server's limit of {} bytes (--max-body)",
                           st.opt.max_body),
                  "", "invalid_request_error", "request_too_large"};
}

ApiError out_of_memory() {
  return ApiError{500, "the server ran out of memory for this request", "", "server_error", "out_of_memory"};
}

ApiError unknown_route(const httplib::Request& req) {
  return ApiError{404, fmt("unknown route: {} {}", req.method, req.path.substr(0, 200)), "", "invalid_request_error",
                  "not_found"};
}

// The generation routes, once: the handlers are registered from this list and the head checks look paths up in it.
constexpr const char* kGenerationRoutes[] = {"/v1/chat/completions", "/chat/completions", "/v1/completions",
                                             "/completions"};

bool is_generation_route(const std::string& path) {
  for (const char* r : kGenerationRoutes)
    if (path == r) return true;
  return is_extra_body_route(path);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The Host and Origin checks (server/origin_policy.h), the CORS headers of an allowed cross-origin request, and
// the answer to a preflight (OPTIONS). Returns true when the request has been answered (refused or preflight).
bool answer_by_origin(const ServerState& st, const httplib::Request& req, httplib::Response& res) {
  if (req.get_header_value_count("Host") > 1 || req.get_header_value_count("Origin") > 1) {
    send_error(res, ApiError{400, "repeated Host or Origin headers"});
    return true;
  }
  const OriginVerdict v = judge_request(st.origin, req.get_header_value("Host"), req.has_header("Origin"),
                                        req.get_header_value("Origin"));
  if (!st.origin.cors_origins.empty()) res.set_header("Vary", "Origin");  // answers differ by Origin: no caching
  if (v.status) {
    send_error(res, ApiError{v.status, v.message, "", "invalid_request_error", v.code});
    return true;
  }
  if (!v.allow_origin.empty()) res.set_header("Access-Control-Allow-Origin", v.allow_origin);
  if (req.method != "OPTIONS") return false;
  res.status = 204;
  res.set_header("Allow", "GET, POST, OPTIONS");
  if (!v.allow_origin.empty()) {
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers",
                   preflight_allow_headers(req.get_header_value("Access-Control-Request-Headers")));
    res.set_header("Access-Control-Max-Age", "600");
  }
  return true;
}

// Runs when a request's head has been read, before any of its body: everything that can be refused from the head
// alone is refused here, so that a refused body is never read (the connection is closed after the answer
// instead). Returns true when the request has been answered.
bool refuse_from_head(const ServerState& st, const httplib::Request& req, httplib::Response& res) {
  auto refuse = [&](const ApiError& e) {
    send_error(res, e);
    GuardedHttpServer::close_after_response();
    return true;
  };
  if (answer_by_origin(st, req, res)) {
    // a body that came with the request is not read: close rather than parse it as the next request
    if (res.status != 204 || req.has_header("Content-Length") || req.has_header("Transfer-Encoding"))
      GuardedHttpServer::close_after_response();
    else
      GuardedHttpServer::begin_body(0);
    return true;
  }
  const bool has_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                        req.method == "DELETE" || req.has_header("Content-Length") ||
                        req.has_header("Transfer-Encoding");
  if (!has_body) {
    GuardedHttpServer::begin_body(0);
    return false;
  }
  if (req.get_header_value_count("Transfer-Encoding") > 1 || req.get_header_value_count("Content-Length") > 1 ||
      req.get_header_value_count("Content-Encoding") > 1)
    return refuse(ApiError{400, "repeated Transfer-Encoding, Content-Length or Content-Encoding headers"});
  const std::string te = lower(req.get_header_value("Transfer-Encoding"));
  const bool chunked = te == "chunked";
  if (!te.empty() && !chunked)
    return refuse(ApiError{400, fmt("Transfer-Encoding '{}' is not supported (only chunked)", te.substr(0, 40))});
  // httplib would inflate gzip / deflate / br bodies with no limit on the inflated size (a 1 MB body of zeros
  // becomes 1 GB); OpenAI clients send plain JSON, so compressed bodies are refused rather than capped.
  if (const std::string ce = lower(req.get_header_value("Content-Encoding")); !ce.empty() && ce != "identity")
    return refuse(ApiError{415, fmt("request bodies with Content-Encoding '{}' are not accepted; send the JSON "
                                    "uncompressed", ce.substr(0, 40)),
                           "", "invalid_request_error", "unsupported_media_type"});
  if (lower(req.get_header_value("Content-Type")).rfind("multipart/", 0) == 0)
    return refuse(ApiError{415, "multipart bodies are not accepted; send JSON", "", "invalid_request_error",
                           "unsupported_media_type"});
  size_t declared = 0;
  if (req.has_header("Content-Length")) {
    if (chunked) return refuse(ApiError{400, "both Content-Length and Transfer-Encoding: chunked"});
    const std::string v = req.get_header_value("Content-Length");
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) {
      if (!v.empty() && v.size() > 19 && v.find_first_not_of("0123456789") == std::string::npos)
        return refuse(too_large(st));  // more digits than any size
      return refuse(ApiError{400, "malformed Content-Length"});
    }
    declared = size_t(std::stoull(v));
    if (declared > st.opt.max_body) return refuse(too_large(st));  // at once, without reading (or draining) it
  } else if (!chunked && req.method != "DELETE") {
    return refuse(ApiError{411, "a request body needs a Content-Length (or Transfer-Encoding: chunked)", "",
                           "invalid_request_error", "length_required"});
  }
  if (!is_generation_route(req.path)) {
    if (chunked || declared > 0) return refuse(unknown_route(req));  // a body nobody will read
    GuardedHttpServer::begin_body(0);
    return false;
  }
  if (!authorized(st, req, res)) {
    GuardedHttpServer::close_after_response();  // an unauthenticated body is never read
    return true;
  }
  GuardedHttpServer::begin_body(declared);
  return false;
}

// httplib's own errors reach the error handler with an empty body; ours already carry JSON.
void fill_error_body(const ServerState& st, const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  switch (res.status) {
    case 404:
      send_error(res, unknown_route(req));
      break;
    case 413:
      send_error(res, too_large(st));
      break;
    case 400:
      send_error(res, ApiError{400, "malformed HTTP request"});
      break;
    default:
      send_error(res, ApiError{res.status, fmt("HTTP error {}", res.status), "",
                               res.status >= 500 ? "server_error" : "invalid_request_error"});
  }
}

int http_threads(const ServerOptions& opt, const Engine& engine) {
  return opt.n_http_threads > 0 ? opt.n_http_threads : engine.n_slots() + 64 + 16;
}

ConnectionLimits connection_limits(const ServerOptions& opt, const Engine& engine) {
  ConnectionLimits l;
  l.head_timeout = opt.read_timeout;
  l.body_timeout = opt.read_timeout;
  l.write_timeout = std::max(opt.read_timeout, std::chrono::milliseconds(30000));
  // One address may take every worker but 8: what it holds beyond its slots and queue places is refused, and
  // others (a health check, another user) always find a worker.
  l.max_per_client = opt.max_conns_per_client > 0 ? opt.max_conns_per_client
                                                  : std::max(1, http_threads(opt, engine) - 8);
  l.workers = http_threads(opt, engine);
  return l;
}

}  // namespace

struct Server::Impl {
  ServerState st;
  GuardedHttpServer http;
  int port = -1;

  Impl(const LoadedModel& lm, Engine& engine, ServerOptions opt)
      : st{lm, engine, std::move(opt)}, http(connection_limits(st.opt, engine)) {}
  void setup();
  json models_json() const;
  json health_json() const;
  // POST to a generation route: reads the body (at most --max-body), then handle_generate.
  void body_route(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read,
                  const BodyHandler& handle);
};

json Server::Impl::models_json() const {
  // context_length: what one request may hold (prompt + answer); max_model_len is vLLM's name for it
  json m = {{"id", st.opt.model_name}, {"object", "model"}, {"created", st.started}, {"owned_by", "pipit"},
            {"context_length", st.engine.n_ctx()}, {"max_model_len", st.engine.n_ctx()},
            {"meta", {{"n_ctx", st.engine.n_ctx()}, {"n_ctx_train", st.lm.model->info().max_ctx},
                      {"n_vocab", st.policy.n_vocab}, {"n_embd", st.lm.model->info().n_embd},
                      {"parallel", st.engine.n_slots()}, {"vision", st.policy.accepts_images},
                      {"video", st.policy.accepts_videos},
                      {"embeddings", st.pooling.mode != PoolingConfig::Mode::kNone},
                      {"pooling", pooling_name(st.pooling.mode)}}}};
  return {{"object", "list"}, {"data", json::array({m})}};
}

json Server::Impl::health_json() const {
  const Engine::Stats s = st.engine.stats();
  json h = {{"status", "ok"},       {"model", st.opt.model_name},        {"slots", st.engine.n_slots()},
            {"slots_busy", s.active}, {"queued", s.queued},              {"requests_completed", s.completed},
            {"tokens_generated", s.tokens_generated}, {"connections", http.open_connections()},
            {"connections_refused", http.refused_connections()}};
  {
    const PromptCache::Stats c = st.engine.cache_stats();
    h["prompt_tokens_evaluated"] = s.prompt_tokens_evaluated;
    h["speculative"] = {{"drafted", s.spec_drafted}, {"accepted", s.spec_accepted}};
    h["prompt_cache"] = {{"budget_bytes", c.budget}, {"bytes", c.bytes},          {"entries", c.entries},
                         {"lookups", c.lookups},     {"hits", c.hits},            {"tokens_reused", c.tokens_reused},
                         {"evictions", c.evictions}};
  }
  if (st.policy.accepts_images) {
    h["image_requests"] = st.image_requests.load();
    h["images_encoded"] = st.images_encoded.load();
  }
  return h;
}

void Server::Impl::setup() {
  const int n_threads = http_threads(st.opt, st.engine);
  http.new_task_queue = [n_threads] { return new httplib::ThreadPool(size_t(n_threads)); };
  http.set_payload_max_length(st.opt.max_body);
  http.set_tcp_nodelay(true);  // stream each token as it comes
  // Reads and the keep-alive wait are timed by GuardedHttpServer's stream; this is the socket's send timeout, so
  // that one blocked send ends too.
  http.set_write_timeout(std::max<time_t>(30, time_t(st.opt.read_timeout.count() / 1000)));
  http.set_keep_alive_timeout(5);
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return refuse_from_head(st, req, res) ? httplib::Server::HandlerResponse::Handled
                                          : httplib::Server::HandlerResponse::Unhandled;
  });
  // "Expect: 100-continue": refuse before the client sends the body, or let it come.
  http.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    return refuse_from_head(st, req, res) ? res.status : 100;
  });
  http.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    if (!GuardedHttpServer::closing_after_response()) return;
    res.headers.erase("Keep-Alive");
    res.set_header("Connection", "close");
  });

  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) { fill_error_body(st, req, res); });
  // The server's exception boundary: whatever a handler throws is one OpenAI-shaped error for that request, and
  // the server goes on. Running out of memory (a request that needs more than the machine gives, under a memory
  // limit) is told apart: the request failed, not the server. What the handler held is freed by the unwinding, so
  // this answer (a few hundred bytes) can still be built.
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    GuardedHttpServer::close_after_response();  // the body may be partly unread
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::bad_alloc&) {
      res.body.clear();
      return send_error(res, out_of_memory());
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    res.body.clear();
    send_error(res, ApiError{500, "internal error: " + what, "", "server_error"});
  });
  if (st.opt.log_requests)
    http.set_logger([log = st.opt.log](const httplib::Request& req, const httplib::Response& res) {
      if (log) log("[serve] " + req.method + " " + req.path + " -> " + std::to_string(res.status));
      else std::fprintf(stderr, "[serve] %s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });

  // The chat page (server/web/index.html, embedded at build time). It needs no key itself: it asks for one and
  // sends it with its API calls. The policy keeps it to this server's own scripts (no inline ones: were a model's
  // answer ever to get markup past the page's sanitiser, an onerror= or <script> in it still would not run), inline
  // styles, and images from here or data: URLs (a model's ![](https://...) cannot send anything elsewhere).
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; "
                   "connect-src 'self'; object-src 'none'; base-uri 'none'");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(reinterpret_cast<const char*>(kIndexHtml), kIndexHtml_size, "text/html; charset=utf-8");
  });
  static const struct {
    const char* path;
    const unsigned char* data;
    const size_t* size;
  } kAssets[] = {{R"(/assets/chat\.js)", kChatJs, &kChatJs_size},  // (route patterns are regular expressions)
                 {R"(/assets/marked\.min\.js)", kMarkedJs, &kMarkedJs_size},
                 {R"(/assets/purify\.min\.js)", kPurifyJs, &kPurifyJs_size}};
  for (const auto& a : kAssets)
    http.Get(a.path, [&a](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");  // they change with the binary: never an old copy after an upgrade
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_content(reinterpret_cast<const char*>(a.data), *a.size, "text/javascript; charset=utf-8");
    });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(to_text(health_json()), "application/json");
  });
  http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (authorized(st, req, res)) res.set_content(to_text(models_json()), "application/json");
  });
  http.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(st, req, res)) return;
    if (req.matches[1] != st.opt.model_name)
      return send_error(res, ApiError{404, fmt("the model '{}' does not exist here; this server serves '{}'",
                                               req.matches[1].str().substr(0, 200), st.opt.model_name),
                                      "model", "invalid_request_error", "model_not_found"});
    res.set_content(to_text(models_json()["data"][0]), "application/json");
  });
  // The routes with a body (generation, embeddings, tokenize) read it themselves (after refuse_from_head has
  // accepted the head): at most --max-body bytes as they arrive, whatever the transfer encoding.
  auto post = [this](const char* path, BodyHandler handle) {
    http.Post(path, httplib::Server::HandlerWithContentReader(
                        [this, handle](const httplib::Request& req, httplib::Response& res,
                                       const httplib::ContentReader& read) {
                          try {
                            body_route(req, res, read, handle);
                          } catch (const std::bad_alloc&) {  // this request's memory, not the server's end
                            GuardedHttpServer::close_after_response();
                            res.body.clear();
                            send_error(res, out_of_memory());
                          }
                        }));
  };
  for (const char* path : kGenerationRoutes) {
    const bool chat = std::string(path).find("chat") != std::string::npos;
    post(path, [this, chat](const std::string& body, httplib::Response& res) { handle_generate(st, body, res, chat); });
  }
  add_extra_routes(st, post);
  add_probe_routes(st, http, [this](const httplib::Request& req, httplib::Response& res) {
    return authorized(st, req, res);
  });
}

void Server::Impl::body_route(const httplib::Request& req, httplib::Response& res,
                              const httplib::ContentReader& read, const BodyHandler& handle) {
  if (!authorized(st, req, res)) return;
  std::string body;
  if (req.has_header("Content-Length"))  // checked by refuse_from_head: digits, at most --max-body
    body.reserve(std::min(st.opt.max_body, size_t(std::stoull(req.get_header_value("Content-Length")))));
  bool over = false;
  const bool ok = read([&](const char* data, size_t n) {
    if (n > st.opt.max_body - body.size()) {
      over = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (!ok) {
    GuardedHttpServer::close_after_response();
    return send_error(res, over ? too_large(st)
                                : ApiError{400, "the request body could not be read (cut short, too slow, or "
                                                "malformed chunks)"});
  }
  handle(body, res);
}

Server::Server(const LoadedModel& lm, Engine& engine, ServerOptions opt)
    : impl_(std::make_unique<Impl>(lm, engine, std::move(opt))) {
  ServerState& st = impl_->st;
  st.started = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count();
  st.origin.check_host = is_loopback_bind(st.opt.host);
  st.origin.allow_hosts = st.opt.allow_hosts;
  st.origin.cors_origins = st.opt.cors_origins;
  st.policy.accepts_images = lm.model->vision() != nullptr;
  st.policy.no_images_note = media_note_suffix(lm.model->info().arch);
  if (takes_audio(lm.config.model_type())) {  // a tower that cannot be built is an error at start, not per request
    auto enc = audio_encoder_of(lm);
    if (enc.is_ok()) st.audio_enc = std::shared_ptr<const AudioEncoder>(std::move(enc).value());
    else std::fprintf(stderr, "[pipit] audio input off: %s\n", enc.status().message().c_str());
  }
  st.policy.accepts_audio = st.audio_enc != nullptr;
  st.policy.local_files_dir = st.opt.local_files_dir;
  st.policy.n_ctx = engine.n_ctx();
  st.policy.n_vocab = int(lm.model->info().n_vocab);
  std::vector<std::string> ignored;
  st.policy.defaults = default_sampling(lm.generation_config, &ignored);
  for (const auto& name : ignored) {
    const std::string line = "[serve] generation_config.json: " + name + " " +
                             lm.generation_config.value(name, nlohmann::json()).dump() +
                             " is out of range; requests that do not set it use OpenAI's default";
    if (st.opt.log) st.opt.log(line);
    else std::fprintf(stderr, "%s\n", line.c_str());
  }
  st.prompt_limit = engine.n_ctx() - 1;
  if (st.opt.max_prompt_tokens > 0) st.prompt_limit = std::min(st.prompt_limit, st.opt.max_prompt_tokens);
  // The longest token's text bounds the bytes one token can stand for (a token's stored string is at least as
  // long as what it decodes to: byte-level and SentencePiece spellings only lengthen it).
  if (const Tokenizer* tok = lm.tokenizer.get())
    for (int32_t id = 0, n = tok->vocab_size(); id < n; ++id)
      st.max_token_bytes = std::max(st.max_token_bytes, tok->id_to_token(id).size());
  if (st.policy.accepts_images) {
    auto pp = preprocessor_config_of(lm);
    auto proc = pp.is_ok() ? image_processor_for(*lm.model, *pp) : Result<ImageProcessorConfig>(pp.status());
    if (proc.is_ok()) st.image_proc = std::move(proc).value();
    else st.image_proc_error = proc.status().message();
  }
  // videos: a model with video input (a video processor named by its vision tower), a build with FFmpeg
  if (takes_video(*lm.model)) {
    auto vpp = video_preprocessor_config_of(lm);
    auto vproc = vpp.is_ok() ? video_processor_for(*lm.model, *vpp) : Result<VideoProcessorConfig>(vpp.status());
    if (!video_files_supported()) st.policy.no_videos_note = " (this build of pipit decodes no video files)";
    else if (!vproc.is_ok()) st.policy.no_videos_note = " (" + vproc.status().message() + ")";
    else st.video_proc = std::move(vproc).value();
    st.policy.accepts_videos = st.video_proc.has_value();
  } else {
    st.policy.no_videos_note = fmt(" (model type '{}' takes no video input)", lm.model->info().arch);
  }
  impl_->setup();
}

Server::~Server() = default;

Status Server::bind() {
  auto& i = *impl_;
  // httplib's default sets SO_REUSEPORT, which lets a second server bind a port one already listens on (the kernel
  // then spreads connections over both). SO_REUSEADDR alone still allows a restart over TIME_WAIT connections.
  i.http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  errno = 0;
  if (i.st.opt.port == 0) {
    i.port = i.http.bind_to_any_port(i.st.opt.host);
    if (i.port <= 0) return Error::io("[serve] cannot listen on {} (any port)", i.st.opt.host);
  } else {
    if (!i.http.bind_to_port(i.st.opt.host, i.st.opt.port)) {
      if (errno == EADDRINUSE)  // what bind() left: httplib only closes the socket after it
        return Error::io("[serve] cannot listen on {}:{}: address already in use (another server? choose --port)",
                         i.st.opt.host, i.st.opt.port);
      return Error::io("[serve] cannot listen on {}:{}: {}", i.st.opt.host, i.st.opt.port,
                       errno ? std::strerror(errno) : "not an address of this machine?");
    }
    i.port = i.st.opt.port;
  }
  i.http.widen_backlog(1024);
  return Status::ok();
}

int Server::port() const { return impl_->port; }

bool Server::listening() const { return impl_->http.is_running(); }

Status Server::run() {
  if (impl_->port < 0) PIPIT_TRY(bind());
  if (impl_->st.stopping) return Status::ok();  // stopped before it listened
  if (!impl_->http.listen_after_bind() && !impl_->st.stopping)
    return Error::io("[serve] the listening socket failed");
  return Status::ok();
}

void Server::stop() {
  impl_->st.stopping = true;  // handlers cancel their requests and return
  impl_->http.stop();
}

}  // namespace pipit::server
