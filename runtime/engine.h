// Engine: serves many generation requests at once from one loaded model (continuous batching).
// Each running request owns a KV cache slot. Every step, the decode tokens of all running requests and a chunk of
// one waiting prompt are packed into a single forward pass, so throughput grows with the number of clients and a
// new request starts without waiting for others to finish. While requests decode, a waiting prompt goes in chunks
// (EngineOptions::n_prefill_chunk); an image is encoded beside the steps (encode()); speculative guesses
// (GenerateParams::spec: prompt lookup, or a draft model's) ride along as extra rows and are checked in the same
// pass. A request's tokens depend only on its own prompt and sampler seed, never on what else runs. Thread-safe:
// submit()/cancel() from any thread; callbacks run on the engine's thread and must be quick.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/generator.h"
#include "runtime/prompt_cache.h"

namespace pipit {

struct EngineOptions {
  int n_slots = 4;      // concurrent sequences
  int n_ctx = 0;        // per slot; 0: min(model max, 4096)
  int n_batch = 512;    // tokens per forward pass
  int n_threads = 0;
  int max_queue = 64;   // requests waiting for a slot; beyond that submit() fails with kUnavailable
  DType kv_dtype = DType::F32;  // as SessionOptions::kv_dtype (pipit serve passes --kv-type, default f16)
  // Prompt cache (runtime/prompt_cache.h): bytes of finished requests' KV kept to serve later requests that share
  // a prefix with them (0: off).
  size_t cache_bytes = 0;
  // While any request decodes, a forward pass takes at most this many prompt tokens (0: up to n_batch), so a long
  // prompt (an image's hundreds of tokens) is prefilled in chunks between the running streams' steps instead of
  // holding them for its whole prefill. Alone, a prompt still goes n_batch tokens at a time.
  int n_prefill_chunk = 64;
  // Vision models: threads of the pool encode() lends (0: half of n_threads, at least 1). While an encode runs, the
  // engine's steps use n_threads minus these, so encode + decode never run more threads than n_threads (two full
  // pools on the same cores make both wait for descheduled workers). n_encode_threads >= n_threads: the steps keep
  // all theirs (the pools share the cores; what the server did before it had this option).
  int n_encode_threads = 0;
  // Speculative decoding with a draft model: requests' GenerateParams::spec.n_draft guesses come from this model
  // (greedy, on KV slots of its own that follow the requests' accepted tokens) instead of prompt lookup. Null: prompt
  // lookup. It must pass Engine::check_draft and outlive the Engine.
  Model* draft = nullptr;
  // Speculative decoding with the model's own multi-token-prediction head (models/mtp.h: Qwen3.5's mtp.*): requests'
  // guesses come from it (fed with the target's hidden states of each pass, KV slots of its own) instead of prompt
  // lookup or `draft`. The model must have the head (check with mtp_of()).
  bool mtp = false;
};

struct MultimodalPrompt;  // runtime/multimodal.h
class MtpDraft;           // runtime/mtp_draft.h

struct EngineRequest {
  std::vector<int32_t> prompt;
  // A prompt with images: `prompt` must be images->tokens; its image features replace those tokens' embeddings
  // and, for M-RoPE models, its positions (and the offset after them) are used.
  std::shared_ptr<const MultimodalPrompt> images;
  GenerateParams params;
  // Called with each piece of text (may be empty) and its token; return false to cancel the request. On one of the
  // engine's threads: one request's calls come in order, never two at once, but different requests' callbacks
  // may run at the same time (a step samples its requests side by side). on_logprob likewise.
  std::function<bool(const std::string& piece, int32_t token)> on_token;
  // With params.logprobs >= 0: called with each generated token's log-probabilities, just before its on_token.
  std::function<void(const TokenLogprob& lp)> on_logprob;
  // Called exactly once at the end, on success (with the reason) or failure.
  std::function<void(const Result<GenerateResult>& r)> on_done;
};

class Engine {
 public:
  Engine(Model& model, const Tokenizer* tok, const EngineOptions& opt);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Errors: empty prompt, prompt too long for a slot's context (kOutOfRange), queue full
  // (kUnavailable). On success on_done will be called exactly once.
  Result<uint64_t> submit(EngineRequest r);
  // Whether `draft` can serve as EngineOptions::draft for `target`: the same vocabulary size, no recurrent layers
  // (its slots are cut back to the accepted guesses).
  static Status check_draft(const Model& target, const Model& draft);
  void cancel(uint64_t id);  // no-op when already finished

  struct Stats {
    int active = 0, queued = 0;
    uint64_t completed = 0, tokens_generated = 0;
    // prompt tokens evaluated by forward passes, and those whose KV came from the prompt cache instead
    uint64_t prompt_tokens_evaluated = 0, prompt_tokens_cached = 0;
    // speculative decoding (GenerateParams::spec): guesses verified, and of those accepted
    uint64_t spec_drafted = 0, spec_accepted = 0;
  };
  Stats stats() const;
  // Which KV slots hold a request now (a snapshot; /slots).
  std::vector<bool> busy_slots() const;

  // Runs fn(pool) on the caller's thread with the encode pool (vision models: an image through the vision tower)
  // while the engine keeps stepping on the threads left; returns fn's result. One encode at a time: callers wait
  // their turn. The engine moves to its narrow pool at its next step and back at the first step after the encode.
  template <class F>
  auto encode(F&& fn) -> decltype(fn(std::declval<ThreadPool&>())) {
    PIPIT_ASSERT(encode_pool_, "[engine] encode() on a model without a vision tower");
    std::lock_guard<std::mutex> lk(encode_mu_);
    struct Mark {
      std::atomic<int>& n;
      explicit Mark(std::atomic<int>& c) : n(c) { n.fetch_add(1); }
      ~Mark() { n.fetch_sub(1); }
    } mark(encoding_);
    return fn(*encode_pool_);
  }
  int n_encode_threads() const { return encode_pool_ ? encode_pool_->size() : 0; }
  int n_ctx() const { return n_ctx_; }
  int n_slots() const { return opt_.n_slots; }
  // The prompt cache's counters (all zero when it is off).
  PromptCache::Stats cache_stats() const { return cache_ ? cache_->stats() : PromptCache::Stats{}; }

 private:
  struct Seq;
  struct Part;  // one request's rows in a step's batch
  void loop();
  void iterate();  // cancellations, admissions, one step
  bool step();     // one forward pass; false when idle: plan_step, build_batch, forward_step, take_results
  std::vector<Part> plan_step();                         // the parts of this pass (packing under n_batch)
  Batch build_batch(std::vector<Part>& parts);           // their rows, logits rows and media inputs
  Status forward_step(const Batch& b, Tensor* logits);   // the model (or its MTP twin), logits to the host
  void take_results(std::vector<Part>& parts, const Status& st, const Tensor& logits);  // tokens, counts, ends
  void finish(Seq& s, Result<GenerateResult> r);  // once per request: frees the slot, calls on_done
  void erase_finished();                          // drops finished requests from active_ (under mu_)
  void fail_all(const Status& st);                // the exception barrier: every running request fails
  // Image features and M-RoPE positions for the batch's tokens of requests with images (parts: sequence and
  // its number of tokens in the batch, from its n_done).
  void add_image_inputs(Batch& b, const std::vector<std::pair<Seq*, int64_t>>& parts);

  Model& model_;
  const Tokenizer* tok_;
  EngineOptions opt_;
  int n_ctx_;
  std::shared_ptr<ThreadPool> pool_;
  // Vision models: the pool encode() lends, and the engine's pool while an encode runs (the threads left).
  std::unique_ptr<ThreadPool> encode_pool_, narrow_pool_;
  std::mutex encode_mu_;            // one encode at a time
  std::atomic<int> encoding_{0};    // encodes running now (0 or 1)
  Arena arena_;
  KvCache kv_;
  Ctx ctx_;
  std::vector<float> embd_buf_;                     // this step's image feature rows (Batch::media)
  std::vector<std::vector<float>> deepstack_buf_;  // and their DeepStack rows, per layer (Batch::deepstack)
  std::unique_ptr<PromptCache> cache_;  // null when EngineOptions::cache_bytes is 0
  void restore_prefix(Seq& s);          // a newly admitted request's cached prefix into its slot
  void save_prefix(Seq& s);             // a finished request's KV into the cache
  // EngineOptions::draft: its own arena, context and KV slots (slot i follows the request in the engine's slot i).
  Model* draft_ = nullptr;
  std::unique_ptr<Arena> draft_arena_;
  std::unique_ptr<KvCache> draft_kv_;
  Ctx draft_ctx_;
  void draft_guesses(std::vector<Part>& parts);  // fills the guesses of the parts that want them from draft_
  // EngineOptions::mtp: the head's state per slot, and the guesses of the parts that want them
  std::unique_ptr<MtpDraft> mtp_;
  void mtp_guesses(std::vector<Part>& parts);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Seq>> queue_;
  std::vector<std::unique_ptr<Seq>> active_;
  std::vector<uint64_t> cancelled_;
  std::vector<bool> slot_used_;
  uint64_t next_id_ = 1;
  Stats stats_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace pipit
