// Internal to server/: the state every route handler shares, and the handlers for the two generation endpoints.
#pragma once

#include <atomic>
#include <mutex>

#include <httplib.h>

#include "core/threads.h"
#include "runtime/engine.h"
#include "runtime/loader.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/server.h"

namespace pipit::server {

struct ServerState {
  const LoadedModel& lm;
  Engine& engine;
  ServerOptions opt;
  RequestPolicy policy;
  int64_t started = 0;  // unix time, the model's "created"
  std::atomic<bool> stopping{false};
  std::mutex image_mu;  // one image encode at a time, next to the engine's own threads
  std::unique_ptr<ThreadPool> image_pool;  // vision models only
};

void send_error(httplib::Response& res, const ApiError& e);

// POST /v1/chat/completions (chat = true) and POST /v1/completions.
void handle_generate(ServerState& st, const httplib::Request& req, httplib::Response& res, bool chat);

}  // namespace pipit::server
