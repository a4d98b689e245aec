// Session: one conversation with a model — its KV cache, activation arena, thread pool and position.
// eval() runs the prompt in chunks of up to n_batch tokens (whole-chunk matmuls, not token by token), then decode
// steps of one token. The arena is reset per forward pass, so decoding allocates nothing after the first step.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/threads.h"
#include "models/model.h"

namespace pipit {

struct SessionOptions {
  int n_ctx = 0;        // 0: min(model max_position_embeddings, 4096)
  int n_threads = 0;    // 0: physical cores
  int n_batch = 512;    // prefill chunk
  DType kv_dtype = DType::F32;
};

class Session {
 public:
  Session(Model& model, const SessionOptions& opt, std::shared_ptr<ThreadPool> pool = nullptr);

  // Appends tokens and returns logits: [1, n_vocab] for the last token, or [n_tokens, n_vocab] when all_logits.
  // The returned tensor stays valid until the next eval(). Errors when the context would overflow.
  Result<Tensor> eval(std::span<const int32_t> tokens, bool all_logits = false);
  void reset() { n_past_ = 0; }
  // Forget everything after position n (n <= n_past): for re-using a shared prompt prefix. When a sliding-window
  // ring no longer holds the keys position n needs, the session starts over instead: check n_past() after.
  void truncate(int n) { n_past_ = n < kv_.min_rewind(n_past_) ? 0 : std::min(n_past_, n); }

  int n_past() const { return n_past_; }
  int n_ctx() const { return kv_.n_ctx(); }
  Model& model() { return model_; }
  Ctx& ctx() { return ctx_; }
  ThreadPool& pool() { return *pool_; }
  size_t kv_bytes() const { return kv_.bytes(); }

 private:
  Model& model_;
  SessionOptions opt_;
  std::shared_ptr<ThreadPool> pool_;
  Arena arena_;
  KvCache kv_;
  Ctx ctx_;
  int n_past_ = 0;
  std::vector<float> all_logits_;  // gathered across chunks when all_logits
};

int default_ctx(const Model& model, int requested);

}  // namespace pipit
