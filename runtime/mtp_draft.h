// Speculative guesses from the model's own multi-token-prediction head (models/mtp.h; Qwen3.5's mtp.* layer).
//
// The head needs, for each "pair" p, the target's final-norm hidden state h_p and the next token x_{p+1}; it predicts
// x_{p+2} (reference: testdata/reference/qwen3_5_mtp.py, vLLM's Qwen3.5 MTP + EagleProposer). An MtpDraft follows
// one Session: the session hands it the hidden state of every token it evaluates (Session::set_hidden_sink, no extra
// pass), and propose() runs the head over the pairs it has not seen yet (the whole prompt at first, then the one or
// two tokens each verification adds) through the head's own KV cache; the argmax of the last pair is the first
// guess. Guess j > 1 chains: the head's own output for the previous pair stands in for the target's hidden state
// (which does not exist yet) and the previous guess is its token, as vLLM does for num_speculative_tokens > 1. The
// guesses are greedy whatever the request samples with: Sequence::verify checks one-hot guesses, so the output is
// the plain one (speculative.h). Pairs whose tokens change (a rejected guess, a new conversation) are redone.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "runtime/session.h"

namespace pipit {

class MtpModel;

class MtpDraft {
 public:
  // Follows `target` from now on (its model must have an MTP head: else the error says why). Its KV cache holds the
  // target's context (n_ctx rows of one attention layer, in the target's KV dtype).
  static Result<std::unique_ptr<MtpDraft>> create(Session& target);
  // For the Engine: `n_slots` sequences of up to n_ctx positions (the engine's KV slots), fed by observe().
  static Result<std::unique_ptr<MtpDraft>> create(Model& m, int n_slots, int n_ctx, DType kv_dtype);
  ~MtpDraft();
  MtpDraft(const MtpDraft&) = delete;
  MtpDraft& operator=(const MtpDraft&) = delete;

  // Up to k guesses of the tokens after `tail`, whose token i is at context position pos0 + i and whose last token
  // is not in the target's context yet (the one the next verification feeds). Empty when the head lacks a hidden
  // state it needs (positions the target evaluated before this draft followed it).
  Result<std::vector<int32_t>> propose(std::span<const int32_t> tail, int pos0, int k);
  // The same for the sequence in `slot` (Engine); rope_delta: the offset of the positions after its prompt (M-RoPE).
  Result<std::vector<int32_t>> propose(int slot, std::span<const int32_t> tail, int pos0, int k, int32_t rope_delta);
  // Rows [begin, begin + n) of a target pass (one sequence's, in `slot`) with the pass's final-norm hidden states.
  void observe(int slot, const Batch& b, int64_t begin, int64_t n, const Tensor& hidden);
  void forget(int slot);  // a new sequence comes into the slot
  void set_pool(ThreadPool* pool) { ctx_.pool = pool; }

  int64_t pairs_evaluated() const { return n_pairs_; }  // rows run through the head (tests, bench)

 private:
  MtpDraft(MtpModel& head, int64_t n_embd, int n_slots, int n_ctx, DType kv_dtype, ThreadPool* pool);
  Result<Tensor> run(int slot, Batch& b, const Tensor& hidden, Tensor* out);
  Result<int32_t> run_pairs(int slot, int start, int end, const std::function<int32_t(int)>& token_at, float* last_h);
  static constexpr int kEagerRows = 16;  // observe(): passes of more rows are prefill chunks

  Session* s_ = nullptr;  // the session followed (create(Session&))
  MtpModel& head_;
  int64_t E_;
  Arena arena_;
  KvCache kv_;
  Ctx ctx_;
  // Per slot: what the target evaluated at positions [hbase, hend): token, final-norm hidden state (E floats),
  // rotary position (3 streams), and the image features that replaced the token's embedding, if any. Pairs
  // [origin, done) are in kv_ at rows [0, done - origin); pair_tok[i - origin] is the x_{i+1} pair i used.
  struct Slot {
    int hbase = 0, hend = 0;
    std::vector<int32_t> tok;
    std::vector<float> hid;
    std::vector<int32_t> pos3;
    std::map<int, std::vector<float>> img;
    int origin = 0, done = 0;
    std::vector<int32_t> pair_tok;
  };
  void trim(Slot& S);
  std::vector<Slot> slots_;
  int64_t n_pairs_ = 0;
};

}  // namespace pipit
