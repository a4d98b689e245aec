// The HTTP side: cpp-httplib setup (threads, limits, timeouts), routes, the API key check, OpenAI-shaped bodies
// for the errors httplib produces itself (404, 413, malformed HTTP), /health and /v1/models.
#include "server/server.h"

#include <chrono>
#include <cstdio>

#include "server/handlers.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace pipit::server {

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

// httplib's own errors reach the error handler with an empty body; ours already carry JSON.
void fill_error_body(const ServerState& st, const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  switch (res.status) {
    case 404:
      send_error(res, ApiError{404, fmt("unknown route: {} {}", req.method, req.path.substr(0, 200)), "",
                               "invalid_request_error", "not_found"});
      break;
    case 413:
      send_error(res, ApiError{413, fmt("the request body is larger than this server's limit of {} bytes",
                                        st.opt.max_body),
                               "", "invalid_request_error", "request_too_large"});
      break;
    case 400:
      send_error(res, ApiError{400, "malformed HTTP request"});
      break;
    default:
      send_error(res, ApiError{res.status, fmt("HTTP error {}", res.status), "",
                               res.status >= 500 ? "server_error" : "invalid_request_error"});
  }
}

}  // namespace

struct Server::Impl {
  ServerState st;
  httplib::Server http;
  int port = -1;

  Impl(const LoadedModel& lm, Engine& engine, ServerOptions opt) : st{lm, engine, std::move(opt)} {}
  void setup();
  json models_json() const;
  json health_json() const;
};

json Server::Impl::models_json() const {
  json m = {{"id", st.opt.model_name}, {"object", "model"}, {"created", st.started}, {"owned_by", "pipit"},
            {"meta", {{"n_ctx", st.engine.n_ctx()}, {"n_vocab", st.policy.n_vocab}, {"parallel", st.engine.n_slots()},
                      {"vision", st.policy.accepts_images}}}};
  return {{"object", "list"}, {"data", json::array({m})}};
}

json Server::Impl::health_json() const {
  const Engine::Stats s = st.engine.stats();
  return {{"status", "ok"},       {"model", st.opt.model_name},        {"slots", st.engine.n_slots()},
          {"slots_busy", s.active}, {"queued", s.queued},              {"requests_completed", s.completed},
          {"tokens_generated", s.tokens_generated}};
}

void Server::Impl::setup() {
  const int n_threads = st.opt.n_http_threads > 0 ? st.opt.n_http_threads : st.engine.n_slots() + 64 + 8;
  http.new_task_queue = [n_threads] { return new httplib::ThreadPool(size_t(n_threads)); };
  http.set_payload_max_length(st.opt.max_body);
  http.set_tcp_nodelay(true);  // stream each token as it comes
  http.set_read_timeout(30);
  http.set_write_timeout(30);
  http.set_keep_alive_timeout(5);

  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) { fill_error_body(st, req, res); });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError{500, "internal error: " + what, "", "server_error"});
  });
  if (st.opt.log_requests)
    http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      std::fprintf(stderr, "[serve] %s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
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
  for (const char* path : {"/v1/chat/completions", "/chat/completions"})
    http.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
      if (authorized(st, req, res)) handle_generate(st, req, res, /*chat=*/true);
    });
  for (const char* path : {"/v1/completions", "/completions"})
    http.Post(path, [this](const httplib::Request& req, httplib::Response& res) {
      if (authorized(st, req, res)) handle_generate(st, req, res, /*chat=*/false);
    });
}

Server::Server(const LoadedModel& lm, Engine& engine, ServerOptions opt)
    : impl_(std::make_unique<Impl>(lm, engine, std::move(opt))) {
  ServerState& st = impl_->st;
  st.started = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count();
  st.policy.accepts_images = lm.model->vision() != nullptr;
  st.policy.allow_local_files = st.opt.allow_local_files;
  st.policy.n_ctx = engine.n_ctx();
  st.policy.n_vocab = int(lm.model->info().n_vocab);
  st.policy.defaults = default_sampling(lm.generation_config);
  if (st.policy.accepts_images)
    st.image_pool = std::make_unique<ThreadPool>(st.opt.n_image_threads > 0 ? st.opt.n_image_threads
                                                                            : ThreadPool::default_threads());
  impl_->setup();
}

Server::~Server() = default;

Status Server::bind() {
  auto& i = *impl_;
  if (i.st.opt.port == 0) {
    i.port = i.http.bind_to_any_port(i.st.opt.host);
    if (i.port <= 0) return Error::io("[serve] cannot listen on {} (any port)", i.st.opt.host);
  } else {
    if (!i.http.bind_to_port(i.st.opt.host, i.st.opt.port))
      return Error::io("[serve] cannot listen on {}:{} (in use, or not an address of this machine?)", i.st.opt.host,
                       i.st.opt.port);
    i.port = i.st.opt.port;
  }
  return Status::ok();
}

int Server::port() const { return impl_->port; }

Status Server::run() {
  if (impl_->port < 0) PIPIT_TRY(bind());
  if (!impl_->http.listen_after_bind() && !impl_->st.stopping)
    return Error::io("[serve] the listening socket failed");
  return Status::ok();
}

void Server::stop() {
  impl_->st.stopping = true;  // handlers cancel their requests and return
  impl_->http.stop();
}

}  // namespace pipit::server
