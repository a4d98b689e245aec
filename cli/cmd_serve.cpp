// `pipit serve`: the OpenAI-compatible HTTP server (server/) for one model. Loads the model, starts the
// continuous-batching Engine with --parallel slots, and serves until SIGINT / SIGTERM. Prints
// "listening on http://HOST:PORT" on stderr once the socket is open (with --port 0, the port it got).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "cli/command.h"
#include "cli/common.h"
#include "models/audio/audio_model.h"
#include "models/mtp.h"
#include "runtime/engine.h"
#include "server/local_files.h"
#include "server/origin_policy.h"
#include "server/server.h"

namespace pipit::cli {

namespace {

// The served model's id: --alias, else the checkpoint's folder or file name.
std::string model_id(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "models/qwen3/" -> "qwen3"
  std::string name = p.filename().string();
  return name.empty() ? "model" : name;
}

void add_serve_options(Args& a) {
  add_model_options(a);
  a.option({"--host"}, "address to listen on", "127.0.0.1");
  a.option({"--port"}, "port (0: any free port)", "8080");
  a.option({"-np", "--parallel"}, "sequences served at once (KV cache slots)", "4");
  a.option({"--queue"}, "requests that may wait for a slot; more get 503", "64");
  a.option({"--batch"}, "tokens per forward pass (decode steps + a prompt chunk)", "512");
  a.option({"--cache-ram"}, "MiB of RAM for the prompt cache: finished requests' KV, reused by later requests that "
           "share a prefix with them, least recently used first out (0: off)", "1024");
  a.option({"--prefill-chunk"}, "prompt tokens per forward pass while other requests decode, so a long prompt "
           "(an image) does not hold their streams for its whole prefill (0: up to --batch)", "64");
  a.option({"--image-threads"}, "vision models: threads that encode images; the decode steps keep the other -t "
           "threads meanwhile (default: half of -t, at least 1; -t or more: both use all)");
  a.flag({"--lookup"}, "speculative decoding by prompt lookup: each decode step also checks guesses copied from "
         "earlier in the conversation (same tokens, greedy or sampled)");
  a.option({"--draft"}, "speculative decoding with a draft model of the same vocabulary (a small model of the same "
           "family, not a recurrent one): its greedy guesses are checked in the decode steps (same tokens, greedy "
           "or sampled)");
  a.option({"--draft-max"}, "with --lookup or --draft: guesses per step", "8");
  a.flag({"--mtp"}, "speculative decoding with the model's own multi-token-prediction head (Qwen3.5's mtp.* layer): "
         "its guesses are checked in the decode steps (same tokens, greedy or sampled)");
  a.option({"--mtp-n"}, "with --mtp: guesses per step (the head is trained for 1)", "1");
  a.option({"--api-key"}, "require 'Authorization: Bearer KEY' (default: the PIPIT_API_KEY variable, else none)");
  a.multi({"--allow-host"}, "with a loopback --host: another Host name to answer (repeatable or a comma list; * "
          "for any); by default only localhost names are answered, against DNS rebinding");
  a.multi({"--cors"}, "origins whose web pages may call the server (CORS), e.g. http://localhost:3000 (repeatable "
          "or a comma list; * for any); by default cross-origin browser requests are refused");
  a.option({"--max-body"}, "largest request body in bytes (compressed bodies are refused)", "33554432");
  a.option({"--max-prompt-tokens"}, "longest prompt in tokens; longer ones get a 400 (default: the context - 1)");
  a.option({"--read-timeout"}, "seconds a client has to send a request's head, and its body (+1 s per MiB)", "10");
  a.option({"--max-conns-per-client"}, "open connections one client address may hold (default: HTTP threads - 8)");
  a.option({"--alias"}, "model id to report (default: the model's folder or file name)");
  a.option({"--http-threads"}, "HTTP worker threads (default: parallel + queue + 16)");
  a.option({"--allow-local-files"}, "let image_url name image files under this directory (DIR)");
  a.flag({"--log"}, "print one line per request on stderr");
  a.option({"--keepalive"}, "seconds of silence before a stream gets a keep-alive comment and a long non-streaming "
           "answer a space (how clients that left are found)", "5");
  a.option({"--reasoning-format"}, "auto: a <think> part goes to reasoning_content when the chat template writes one; "
           "deepseek: always split it off; none: keep it inline in content", "auto");
}

// The server's and the engine's options from the command line (checked before the model is loaded).
struct ServeConfig {
  server::ServerOptions server;
  EngineOptions engine;
};

Result<ServeConfig> serve_config(const Args& a, const SessionOptions& so) {
  auto num = [&](const char* name, int64_t lo, int64_t hi) -> Result<int64_t> {
    PIPIT_ASSIGN_OR_RETURN(int64_t v, a.get_int(name));
    if (v < lo || v > hi) return Error::invalid_argument("{} {}: expected a value in [{}, {}]", name, v, lo, hi);
    return v;
  };
  ServeConfig c;
  server::ServerOptions& opt = c.server;
  EngineOptions& eo = c.engine;
  {
    auto port = num("--port", 0, 65535);
    auto parallel = num("--parallel", 1, 1024);
    auto queue = num("--queue", 1, 1 << 20);
    auto batch = num("--batch", 1, 1 << 16);
    auto body = num("--max-body", 1024, int64_t(1) << 34);
    auto cache = num("--cache-ram", 0, int64_t(1) << 24);
    auto chunk = num("--prefill-chunk", 0, 1 << 16);
    for (auto* r : {&port, &parallel, &queue, &batch, &body, &cache, &chunk})
      if (!r->is_ok()) return r->status();
    opt.port = int(*port);
    opt.max_body = size_t(*body);
    eo.n_slots = int(*parallel);
    eo.max_queue = int(*queue);
    eo.n_batch = int(*batch);
    eo.cache_bytes = size_t(*cache) << 20;
    eo.n_prefill_chunk = int(*chunk);
    if (a.has("--image-threads")) {
      auto t = num("--image-threads", 1, 4096);
      if (!t) return t.status();
      eo.n_encode_threads = int(*t);
    }
    if (a.has("--http-threads")) {
      auto t = num("--http-threads", 1, 4096);
      if (!t) return t.status();
      opt.n_http_threads = int(*t);
    } else {
      // one per slot and queue place, 8 more for other requests of the same clients (health, models), and 8 that
      // no single address may take (--max-conns-per-client defaults to threads - 8)
      opt.n_http_threads = eo.n_slots + eo.max_queue + 16;
    }
  }
  eo.n_ctx = so.n_ctx;
  eo.n_threads = so.n_threads;
  eo.kv_dtype = so.kv_dtype;
  opt.n_image_threads = so.n_threads;
  opt.host = a.get("--host");
  opt.api_key = a.get("--api-key");
  if (opt.api_key.empty())
    if (const char* k = std::getenv("PIPIT_API_KEY")) opt.api_key = k;
  {
    auto hosts = server::parse_allow_hosts(a.get_all("--allow-host"));
    if (!hosts) return hosts.status();
    auto origins = server::parse_cors_origins(a.get_all("--cors"));
    if (!origins) return origins.status();
    opt.allow_hosts = *hosts;
    opt.cors_origins = *origins;
  }
  if (a.has("--allow-local-files")) {
    auto dir = server::shared_directory(a.get("--allow-local-files"));
    if (!dir) return dir.status();
    opt.local_files_dir = *dir;
  }
  if (a.has("--max-prompt-tokens")) {
    auto n = num("--max-prompt-tokens", 1, 1 << 30);
    if (!n) return n.status();
    opt.max_prompt_tokens = int(*n);
  }
  if (a.has("--max-conns-per-client")) {
    auto n = num("--max-conns-per-client", 1, 1 << 20);
    if (!n) return n.status();
    opt.max_conns_per_client = int(*n);
  }
  {
    auto t = a.get_float("--read-timeout");
    if (!t) return t.status();
    if (!(*t >= 0.1 && *t <= 3600)) return Error::invalid_argument("{}", fmt("--read-timeout {}: expected seconds in [0.1, 3600]", *t));
    opt.read_timeout = std::chrono::milliseconds(int64_t(*t * 1000));
  }
  opt.log_requests = a.get_flag("--log");
  if (a.get_flag("--lookup") && a.has("--draft")) return Error::invalid_argument("--draft and --lookup: choose one");
  if (a.get_flag("--mtp")) {
    if (a.get_flag("--lookup") || a.has("--draft")) return Error::invalid_argument("--mtp with --draft or --lookup: choose one");
    auto k = num("--mtp-n", 1, 16);
    if (!k) return k.status();
    opt.n_draft = int(*k);
  }
  if (a.get_flag("--lookup") || a.has("--draft")) {
    auto k = num("--draft-max", 1, 16);
    if (!k) return k.status();
    opt.n_draft = int(*k);
  }
  {
    auto k = a.get_float("--keepalive");
    if (!k) return k.status();
    if (!(*k >= 0.01 && *k <= 3600)) return Error::invalid_argument("{}", fmt("--keepalive {}: expected seconds in [0.01, 3600]", *k));
    opt.keepalive = std::chrono::milliseconds(int64_t(*k * 1000));
  }
  if (auto f = server::parse_reasoning_format(a.get("--reasoning-format"))) opt.reasoning_format = *f;
  else return Error::invalid_argument("{}", fmt("--reasoning-format {}: expected auto, deepseek or none", a.get("--reasoning-format")));
  opt.model_name = a.has("--alias") ? a.get("--alias") : model_id(a.get("-m"));

  return c;
}

// SIGINT/SIGTERM go to one thread that stops the server (run_server); every other thread (engine, pools, HTTP
// workers: all started after this) inherits the blocked mask. A write to a closed socket must not kill the process.
sigset_t block_stop_signals() {
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  return sigs;
}

// The banner, then run() until a signal of `sigs` (block_stop_signals) stops the server.
int run_server(Args& a, LoadedModel& lm, Engine& engine, const server::ServerOptions& opt, sigset_t sigs) {
  server::Server srv(lm, engine, opt);
  if (auto st = srv.bind(); !st) return fail(a, st.message());
  std::atomic<bool> signalled{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    signalled = true;
    srv.stop();
  });
  std::fprintf(stderr, "pipit serve: %s on http://%s:%d (%d slots x %d tokens, %s)%s\n", opt.model_name.c_str(),
               opt.host.c_str(), srv.port(), engine.n_slots(), engine.n_ctx(),
               (std::string("text") + (lm.model->vision() ? " + images" : "") +
                (takes_audio(lm.config.model_type()) ? " + audio" : "")).c_str(),
               opt.api_key.empty() ? "" : ", API key required");
  if (std::count(opt.cors_origins.begin(), opt.cors_origins.end(), "*") && opt.api_key.empty())
    std::fprintf(stderr, "pipit serve: warning: --cors * with no API key: any web page you visit can use this "
                 "server; set --api-key (or PIPIT_API_KEY)\n");
  std::fprintf(stderr, "pipit serve: listening on http://%s:%d\n", opt.host.c_str(), srv.port());
  std::fflush(stderr);
  Status st = srv.run();
  if (!signalled) pthread_kill(waiter.native_handle(), SIGTERM);  // run() ended on its own: wake the waiter
  waiter.join();
  if (!st) return fail(a, st.message());
  std::fprintf(stderr, "pipit serve: stopped\n");
  return 0;
}

int cmd_serve(Args& a) {
  add_serve_options(a);
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || !a.has("-m")) {
    std::printf("usage: pipit serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [options]\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  auto so = session_options(a);
  if (!so) return fail(a, so.status().message());
  auto cfg = serve_config(a, *so);
  if (!cfg) return fail(a, cfg.status().message());
  server::ServerOptions& opt = cfg->server;
  EngineOptions& eo = cfg->engine;

  auto lo = load_options(a, true);
  if (!lo) return fail(a, lo.status().message());
  auto lm = load_model(a.get("-m"), *lo);
  if (!lm) return fail(a, lm.status().message());
  if (auto st = check_kv_type(*lm->model, so->kv_dtype); !st) return fail(a, st.message());
  if (a.get_flag("--mtp")) {
    if (auto h = mtp_of(*lm->model); !h) return fail(a, fmt("--mtp: {}", h.status().message()));
    if (lm->model->info().device) return fail(a, "--mtp: the MTP head runs on the CPU only");
    eo.mtp = true;
  }
  std::optional<LoadedModel> draft;
  if (a.has("--draft")) {
    auto dm = load_model(a.get("--draft"));
    if (!dm) return fail(a, fmt("--draft: {}", dm.status().message()));
    Status st = Engine::check_draft(*lm->model, *dm->model);
    if (st.is_ok()) st = check_kv_type(*dm->model, so->kv_dtype);
    if (!st) return fail(a, fmt("--draft {}: {}", a.get("--draft"), st.message()));
    draft = std::move(dm).value();
    eo.draft = draft->model.get();
  }

  const sigset_t sigs = block_stop_signals();  // before the engine's threads start
  Engine engine(*lm->model, lm->tokenizer.get(), eo);
  return run_server(a, *lm, engine, opt, sigs);
}

}  // namespace

PIPIT_REGISTER_COMMAND("serve", "OpenAI-compatible HTTP server", cmd_serve);

}  // namespace pipit::cli
