// Internal to server/: the state every route handler shares, and the handlers for the two generation endpoints.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

#include <httplib.h>

#include "core/threads.h"
#include "models/audio/audio_model.h"
#include "models/vision/image_processor.h"
#include "models/vision/video_processor.h"
#include "runtime/engine.h"
#include "runtime/loader.h"
#include "runtime/session.h"
#include "server/api_error.h"
#include "runtime/file_watch.h"
#include "runtime/pooling.h"
#include "server/openai_request.h"
#include "server/origin_policy.h"
#include "server/server.h"

namespace pipit::server {

// A mutex that is handed over in arrival order. Image requests take it once per image: a request with many
// images then lets the others' images in between, where a plain mutex would mostly go back to the thread that
// just released it.
class FairTurns {
 public:
  void lock() {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t ticket = next_++;
    cv_.wait(lk, [&] { return serving_ == ticket; });
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++serving_;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0, serving_ = 0;
};

struct ServerState {
  const LoadedModel& lm;
  Engine& engine;
  ServerOptions opt;
  RequestPolicy policy;
  OriginPolicy origin;  // Host / Origin checks and CORS (from opt.host, opt.allow_hosts, opt.cors_origins)
  int64_t started = 0;  // unix time, the model's "created"
  std::atomic<bool> stopping{false};
  // Prompt limits: the most tokens a prompt may have, and the most bytes any one token stands for (so that a text
  // of more than prompt_limit * max_token_bytes bytes is refused before it is tokenized).
  int prompt_limit = 0;
  size_t max_token_bytes = 1;
  // Images: one image at a time is decoded and encoded (Engine::encode), in arrival order per image (FairTurns).
  FairTurns image_turns;
  std::optional<ImageProcessorConfig> image_proc;
  std::string image_proc_error;  // why image_proc is empty
  std::optional<VideoProcessorConfig> video_proc;  // models with video input, builds with FFmpeg
  std::atomic<int> image_requests{0};       // requests decoding or encoding images now
  std::atomic<uint64_t> images_encoded{0};  // since start
  // Audio (input_audio parts): the model's audio tower, built at start (null when it takes no audio); clips are
  // encoded in the same turns as images.
  std::shared_ptr<const AudioEncoder> audio_enc;
  // /v1/embeddings: the checkpoint's pooling, and a session made at the first request (one at a time)
  PoolingConfig pooling;
  // the model's mapped files, checked before each generation and embedding (runtime/file_watch.h)
  FileWatch files;
  std::mutex embed_mu;
  std::shared_ptr<ThreadPool> embed_pool;
  std::unique_ptr<Session> embed_session;
};

void send_error(httplib::Response& res, const ApiError& e);

// POST /v1/chat/completions (chat = true) and POST /v1/completions, with the request body already read.
void handle_generate(ServerState& st, const std::string& body, httplib::Response& res, bool chat);
// POST /apply-template: a chat request's messages (and tools) rendered by the model's template, {"prompt"}
// (llama-server's route), with the same checks and limits as a generation.
void handle_apply_template(ServerState& st, const std::string& body, httplib::Response& res);
std::optional<ApiError> render_chat(const ServerState& st, const ParsedRequest& pr, std::string& out);

// POST /tokenize, /detokenize, /v1/embeddings (server/extras.cpp), registered through `post`, which reads the
// body under the server's limits (and checks the key) before calling the handler.
using BodyHandler = std::function<void(const std::string& body, httplib::Response& res)>;
void add_extra_routes(ServerState& st, const std::function<void(const char* path, BodyHandler handle)>& post);
bool is_extra_body_route(const std::string& path);

// GET /props, /slots, /metrics (server/probes.cpp); `authorized` checks the API key (answering 401 itself).
using Authorizer = std::function<bool(const httplib::Request& req, httplib::Response& res)>;
void add_probe_routes(ServerState& st, httplib::Server& http, const Authorizer& authorized);

}  // namespace pipit::server
