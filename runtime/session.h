// Session: one conversation with a model — its KV cache, activation arena, thread pool and position.
// eval() runs the prompt in chunks of up to n_batch tokens (whole-chunk matmuls, not token by token), then decode
// steps of one token. The arena is reset per forward pass, so decoding allocates nothing after the first step.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/threads.h"
#include "models/model.h"

namespace pipit {

struct MultimodalPrompt;  // runtime/multimodal.h
class MtpModel;           // models/mtp.h
class PromptCache;        // runtime/prompt_cache.h

struct SessionOptions {
  int n_ctx = 0;        // 0: min(model max_position_embeddings, 4096)
  int n_threads = 0;    // 0: physical cores
  int n_batch = 512;    // prefill chunk
  // The C++ default is the exact f32 cache that the goldens are checked on; the front ends (CLI, server, C API,
  // Python) default to f16 as llama.cpp does.
  DType kv_dtype = DType::F32;
  // Models with a recurrent state (Qwen3.5): snapshots of it kept for truncate() (see there). Each costs the
  // model's state size (Qwen3.5-0.8B: ~19 MB).
  int n_state_snapshots = 4;
};

class Session {
 public:
  // Allocates at once (the KV cache): for sizes a caller chose itself (tests, tools). Sizes from a user go through
  // create(), which checks them first.
  Session(Model& model, const SessionOptions& opt, std::shared_ptr<ThreadPool> pool = nullptr);
  // Checks the options against runtime/memory_plan.h (limits, the memory the machine has) before allocating, and
  // turns an allocation failure into an error. `ctx_flag` names the context setting in messages ("-c", "n_ctx").
  static Result<std::unique_ptr<Session>> create(Model& model, const SessionOptions& opt,
                                                 std::shared_ptr<ThreadPool> pool = nullptr,
                                                 const char* ctx_flag = "-c");

  // Called after each prefill chunk of a multi-chunk eval() with the tokens done and the total; returning false
  // stops the eval with a kCancelled error (Ctrl-C). Positions done so far stay in the context.
  using Progress = std::function<bool(int64_t done, int64_t total)>;
  void set_progress(Progress p) { progress_ = std::move(p); }

  // Appends tokens and returns logits: [1, n_vocab] for the last token, or [n_tokens, n_vocab] when all_logits.
  // The returned tensor stays valid until the next eval(). Errors when the context would overflow.
  Result<Tensor> eval(std::span<const int32_t> tokens, bool all_logits = false);
  // A prompt with images: their features replace the image tokens' embeddings, and for M-RoPE models (Qwen2-VL)
  // the model's positions for it (Model::media_positions) continue from the last one; the tokens evaluated after it
  // keep that offset (rope_delta()).
  Result<Tensor> eval(const MultimodalPrompt& prompt, bool all_logits = false);
  void reset() { truncate(0); }
  // Forget everything after position n (n <= n_past): for re-using a shared prompt prefix. When a sliding-window
  // ring no longer holds the keys position n needs, or n falls inside an image, the session goes back further
  // (to 0, or to the image's start): check n_past() after, and evaluate the tokens from there.
  // A recurrent state (Qwen3.5's linear attention) summarises all tokens and cannot be cut back. The session
  // snapshots it at the end of every prefill chunk of more than one token (the end of each prompt, and every
  // n_batch tokens inside a long one; the latest n_state_snapshots are kept, decode steps take none) and
  // truncate(n) goes back to the latest snapshot at or before n (or to 0): the caller re-prefills the rest.
  void truncate(int n);
  // A snapshot of the recurrent state at n_past() now, whatever the last eval was (speculative decoding takes one
  // before each verification, to come back to after a rejection). No-op without a state.
  void checkpoint() { snapshot_state(); }

  // Speculative decoding with the model's own MTP head (runtime/mtp_draft.h): every forward pass from now on also
  // computes the final-norm hidden state of its tokens and hands it to `sink` with the batch ([n_tokens, n_embd]
  // f32, valid during the call; the logits are unchanged). `head` is this session's model's head; null removes it.
  using HiddenSink = std::function<void(const Batch& batch, const Tensor& hidden)>;
  void set_hidden_sink(MtpModel* head, HiddenSink sink) {
    mtp_ = sink ? head : nullptr;
    hidden_sink_ = mtp_ ? std::move(sink) : nullptr;
  }

  // M-RoPE: the next token's position is n_past() + rope_delta() (0 until an image shifts it).
  int32_t rope_delta() const { return rope_delta_; }
  int n_past() const { return n_past_; }
  int n_ctx() const { return kv_.n_ctx(); }
  Model& model() { return model_; }
  Ctx& ctx() { return ctx_; }
  ThreadPool& pool() { return *pool_; }
  size_t kv_bytes() const { return kv_.bytes(); }
  const KvCache& cache() const { return kv_; }  // tests: the recurrent state after a prefill
  // Prompt cache (runtime/prompt_cache.h), text contexts only: save_to() stores the context (key: one value per
  // position, PromptCache::make_key of the n_past() tokens) with its state snapshots; restore_from() puts the
  // longest cached prefix of `key` (at most max_n positions) in the context when it is longer than n_past(), and
  // returns n_past() after.
  void save_to(PromptCache& cache, std::span<const uint64_t> key);
  int restore_from(PromptCache& cache, std::span<const uint64_t> key, int max_n);
  // Tokens run through forward passes since the session was made (prompt chunks and decode steps).
  int64_t n_evaluated() const { return n_evaluated_; }
  // Positions the recurrent state could be rewound to without recomputing (snapshots), oldest first.
  std::vector<int> state_snapshots() const;

 private:
  Model& model_;
  SessionOptions opt_;
  std::shared_ptr<ThreadPool> pool_;
  Arena arena_;
  KvCache kv_;
  Ctx ctx_;
  int n_past_ = 0;
  std::vector<float> all_logits_;  // gathered across chunks when all_logits
  // M-RoPE bookkeeping: images' KV row spans, and from which row on which position offset applies
  struct ImageSpan {
    int begin, end;
    int32_t delta_after;  // rope_delta for the tokens from `end` on
  };
  std::vector<ImageSpan> images_;
  int32_t rope_delta_ = 0;
  std::vector<StateSnapshot> snapshots_;  // recurrent state at chunk ends, oldest first
  void snapshot_state();
  Progress progress_;
  int64_t n_evaluated_ = 0;
  MtpModel* mtp_ = nullptr;
  HiddenSink hidden_sink_;

  Result<Tensor> eval_chunks(std::span<const int32_t> tokens, bool all_logits, const MultimodalPrompt* mm);
};

int default_ctx(const Model& model, int requested);

}  // namespace pipit
