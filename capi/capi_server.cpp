// The OpenAI-compatible server inside the caller's process (pipit_server_start): the same Engine and HTTP server as
// `pipit serve`, over a model the app has already loaded, serving on a thread of its own until pipit_server_stop.
// Built without cpp-httplib (PIPIT_WITH_SERVER undefined), the entry points answer PIPIT_ERR_UNSUPPORTED.
#include "capi/capi_internal.h"

#include <atomic>
#include <chrono>
#include <thread>

#ifdef PIPIT_WITH_SERVER

#include <signal.h>

#include "models/mtp.h"
#include "runtime/engine.h"
#include "server/server.h"
#endif

using namespace pipit::capi;

#ifdef PIPIT_WITH_SERVER
struct pipit_server {
  std::unique_ptr<pipit::Engine> engine;
  std::unique_ptr<pipit::server::Server> http;
  std::thread thread;  // runs http->run()
  std::atomic<bool> finished{false};  // run() has returned
};
#else
struct pipit_server {};
#endif

extern "C" {

void pipit_server_options_init(pipit_server_options* o, size_t size) {
  pipit_server_options d{};
  d.struct_size = uint32_t(sizeof d);
  d.n_parallel = 2;
  d.kv_type = PIPIT_KV_DEFAULT;
  d.prompt_cache_mib = 256;
  init_options(o, size, d);
}

#ifdef PIPIT_WITH_SERVER

pipit_status pipit_server_start(pipit_model* model, const pipit_server_options* options, pipit_server** out) {
  return guard([&] {
    if (!model || !out) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_server_start: model and out must not be NULL");
    *out = nullptr;
    if (!model->lm.tokenizer)
      return fail(PIPIT_ERR_UNSUPPORTED, "pipit_server_start: the model has no tokenizer");
    pipit_server_options o;
    pipit_server_options_default(&o);
    if (auto st = read_options(options, &o, "pipit_server_options"); st != PIPIT_OK) return st;
    auto bad = [](const std::string& what) { return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_server_start: " + what); };
    if (o.port < 0 || o.port > 65535) return bad("port " + std::to_string(o.port) + " outside [0, 65535]");
    if (o.n_parallel < 1 || o.n_parallel > pipit::Limits::kMaxSlots)
      return bad("n_parallel " + std::to_string(o.n_parallel) + " outside [1, " +
                 std::to_string(pipit::Limits::kMaxSlots) + "]");
    if (o.n_ctx < 0 || o.n_ctx > pipit::Limits::kMaxCtx) return bad("n_ctx " + std::to_string(o.n_ctx) + " out of range");
    if (o.n_threads < 0 || o.n_threads > pipit::Limits::kMaxThreads)
      return bad("n_threads " + std::to_string(o.n_threads) + " out of range");
    auto kv = kv_dtype_of(o.kv_type, *model->lm.model, "pipit_server_start");
    if (!kv) return to_status(kv.status());
    if (o.prompt_cache_mib > (size_t(1) << 24)) return bad("prompt_cache_mib over 16 TiB");
    if (o.mtp < 0 || o.mtp > 16) return bad("mtp " + std::to_string(o.mtp) + " outside [0, 16]");
    if (o.mtp > 0) {
      if (auto h = pipit::mtp_of(*model->lm.model); !h) return to_status(h.status().with_context("pipit_server_start"));
      if (model->lm.model->info().device)
        return fail(PIPIT_ERR_UNSUPPORTED, "pipit_server_start: the MTP head runs on the CPU only");
    }

    pipit::EngineOptions eo;
    eo.n_slots = o.n_parallel;
    eo.n_ctx = o.n_ctx;
    eo.n_threads = o.n_threads;
    eo.kv_dtype = *kv;
    eo.cache_bytes = o.prompt_cache_mib << 20;
    eo.max_queue = 16;
    eo.mtp = o.mtp > 0;
    pipit::server::ServerOptions so;
    so.host = o.host && *o.host ? o.host : "127.0.0.1";
    so.port = o.port;
    so.api_key = o.api_key ? o.api_key : "";
    so.model_name = o.model_name && *o.model_name ? o.model_name : "pipit";
    so.n_http_threads = eo.n_slots + eo.max_queue + 16;
    so.n_image_threads = o.n_threads;
    so.n_draft = o.mtp;  // the requests' guesses per step (from the head: eo.mtp)
    so.log_requests = log_enabled();
    so.log = [](const std::string& line) { log_message(2, line); };

    auto srv = std::make_unique<pipit_server>();
    srv->engine = std::make_unique<pipit::Engine>(*model->lm.model, model->lm.tokenizer.get(), eo);
    // cpp-httplib's Server constructor sets SIGPIPE to SIG_IGN for the whole process (Debian's 0.11); the app's
    // disposition is put back (a JVM checks its own handler). The server's writes use MSG_NOSIGNAL, so it does not
    // need the change.
    struct sigaction app_pipe {};
    const bool saved = sigaction(SIGPIPE, nullptr, &app_pipe) == 0;
    srv->http = std::make_unique<pipit::server::Server>(model->lm, *srv->engine, so);
    if (saved) sigaction(SIGPIPE, &app_pipe, nullptr);
    if (auto st = srv->http->bind(); !st) return to_status(st);
    pipit::server::Server* http = srv->http.get();
    // No signal disposition is touched: the server's sockets are written with MSG_NOSIGNAL (server/connection.cpp),
    // so a client that left gives EPIPE, not a SIGPIPE; the process's handlers stay the app's (a JVM checks its own).
    std::atomic<bool>* finished = &srv->finished;
    srv->thread = std::thread([http, finished] {
      if (auto st = http->run(); !st) log_message(0, "pipit_server: " + st.message());
      finished->store(true);
    });
    log_message(2, "pipit_server: listening on http://" + so.host + ":" + std::to_string(http->port()));
    *out = srv.release();
    return PIPIT_OK;
  });
}

int32_t pipit_server_port(const pipit_server* server) { return server ? server->http->port() : 0; }

void pipit_server_stop(pipit_server* server) {
  if (!server) return;
  // httplib's stop() does nothing until the listening loop has begun: a stop right after the start would leave the
  // thread listening and the join waiting forever. run() returns without listening once `stopping` is set (stop()
  // sets it), so wait until it either listens or has returned, then stop.
  const bool was_listening = server->http->listening();
  server->http->stop();
  if (!was_listening) {
    while (!server->finished.load() && !server->http->listening())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!server->finished.load()) server->http->stop();  // it began to listen after the first stop
  }
  if (server->thread.joinable()) server->thread.join();
  delete server;  // the HTTP server (its threads joined), then the engine (its slots and KV caches)
}

#else  // built without the server

pipit_status pipit_server_start(pipit_model*, const pipit_server_options*, pipit_server** out) {
  if (out) *out = nullptr;
  return fail(PIPIT_ERR_UNSUPPORTED, "pipit_server_start: this build of pipit has no server (built without "
                                     "cpp-httplib, PIPIT_WITH_SERVER=OFF)");
}

int32_t pipit_server_port(const pipit_server*) { return 0; }
void pipit_server_stop(pipit_server* server) { delete server; }

#endif

}  // extern "C"
