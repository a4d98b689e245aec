// pipit's OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
// GET /health, on cpp-httplib, serving one loaded model through the continuous-batching Engine.
//
// Goals: what OpenAI clients (the official SDKs, curl) send works, streamed or not; every bad request gets an
// OpenAI-shaped 4xx and never takes the server down; a client that goes away mid-stream frees its slot.
// Safety defaults: loopback only, answering only localhost Host names and same-origin browser requests unless
// --allow-host / --cors say otherwise (server/origin_policy.h), optional bearer key, a body size limit, remote
// image URLs never fetched and local image files read only from a directory the operator names; slow or idle
// clients are cut off per request phase and capped per address (server/connection.h). Also: n > 1, logprobs,
// tool calls, structured output (grammars), /v1/embeddings, /tokenize, /detokenize, a chat page at /.
// Non-goals: TLS (put a proxy in front), several models.
#pragma once

#include <memory>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "server/reasoning.h"

namespace pipit {

class Engine;
struct LoadedModel;

namespace server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (port() tells which)
  std::string api_key;            // "" : no authentication
  // Browsers (server/origin_policy.h): Host names a loopback server also answers, and the origins whose pages may
  // call it (CORS); both lowercase as parse_allow_hosts / parse_cors_origins give them, "*" for any.
  std::vector<std::string> allow_hosts;
  std::vector<std::string> cors_origins;
  size_t max_body = size_t(32) << 20;   // bytes of a request body as received (compressed bodies are refused)
  std::string local_files_dir;          // image_url may name files under this directory ("": none)
  int max_prompt_tokens = 0;            // longer prompts get a 400 (0: what the context holds)
  // A request's head must arrive within this time from its first byte, its body within this time plus 1 s per
  // MiB declared; an idle keep-alive connection is closed after 5 s.
  std::chrono::milliseconds read_timeout{10000};
  int max_conns_per_client = 0;         // open connections per client address (0: HTTP threads - 8)
  std::string model_name;          // the id /v1/models lists
  int n_http_threads = 0;          // 0: one per slot and per queued request, plus 16
  int n_image_threads = 0;         // threads of /v1/embeddings' session (0: physical cores); images are encoded
                                   // on the engine's encode pool (EngineOptions::n_encode_threads)
  bool log_requests = false;       // one line per request, on stderr or to `log`
  // Where the request lines go (null: stderr): the C API's in-process server hands them to the app's log callback.
  std::function<void(const std::string& line)> log;
  int n_draft = 0;                 // --lookup / --draft: speculative guesses per decode step (0: off)
  // After this much silence a stream gets an SSE comment and a long non-streaming answer a space: the writes that
  // find clients which have left (their requests are cancelled, their slots freed).
  std::chrono::milliseconds keepalive{5000};
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;  // --reasoning-format (a request's reasoning_format wins)
};

class Server {
 public:
  Server(const LoadedModel& lm, Engine& engine, ServerOptions opt);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Status bind();     // opens the listening socket
  int port() const;  // after bind()
  bool listening() const;  // run()'s listening loop has started (stop() before that does nothing to it)
  Status run();      // serves until stop()
  void stop();       // from any thread: in-flight requests are cancelled, run() returns

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace server
}  // namespace pipit
