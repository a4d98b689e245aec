// Multi-token prediction (MTP): a draft head that ships inside the model's own checkpoint (Qwen3.5's `mtp.*` layer).
// The head reads the target's final-norm hidden state h_p at position p together with the embedding of the next
// token x_{p+1} and predicts x_{p+2}; runtime/mtp_draft.h turns it into speculative guesses. A model that has such
// a head implements this interface beside Model (found with mtp_of(), so models/model.h and every other model stay
// as they are). Non-goals: training-time losses, several MTP layers (no released checkpoint has them).
#pragma once

#include "models/model.h"

namespace pipit {

class MtpModel {
 public:
  virtual ~MtpModel() = default;
  // Whether the loaded weights carry the head (a file converted without `mtp.*` has none): empty when they do, else
  // why not (for the error of mtp_of).
  virtual std::string mtp_missing() const = 0;
  // Model::forward, and also the final-norm hidden state of every token of the batch: *hidden [n_tokens, n_embd] f32
  // in the arena (valid until ctx.arena is reset). The logits are the ones forward() gives, bit for bit.
  virtual Status forward_hidden(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits, Tensor* hidden) = 0;
  // The head's own KV cache: one attention layer.
  virtual KvCacheSpec mtp_kv_spec() const = 0;
  // The head over "pairs": row i of the batch is pair p: batch.tokens[i] = x_{p+1} (batch.media: its image
  // features where x_{p+1} is an image placeholder), batch.pos[i] = the head's KV row of the pair, pos_streams (or
  // pos when empty) = the target's rotary position of token p; hidden row i = h_p ([n_tokens, n_embd] f32). Writes the
  // logits of batch.logits_rows (predictions of x_{p+2}) and, when `out` is not null, the head's own final-norm output
  // of every row (the hidden state a chained guess continues from).
  virtual Status forward_mtp(Ctx& ctx, const Batch& batch, const Tensor& hidden, KvCache& kv, Tensor* logits,
                             Tensor* out) = 0;
};

// m's MTP head, or an error that says why there is none (the model has no such head, or its file lacks `mtp.*`).
Result<MtpModel*> mtp_of(Model& m);

}  // namespace pipit
