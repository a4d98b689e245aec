// How much memory a model will take, before it is loaded: an app asks this before it risks being killed for
// taking too much (pipit_estimate_memory, `pipit inspect --memory -c N`). The file's header and tensor table are
// read and the model is built over its mapping (no weight is read, nothing is packed or copied), so that exactly the
// tensors the model uses are counted; the KV cache comes from the same rule the session allocates by
// (runtime/memory_plan.h), the activations from the model's sizes.
//
// What it estimates is the peak resident memory of a session at a full context: weights (all touched after the
// first token), the whole KV cache, the activations of one prefill chunk, the tokenizer's tables, and, for a model
// with media input, the largest one media encode takes at its processor's largest size (an image, a video, an audio
// clip: each processor's bound); or, when larger, the transient of parsing tokenizer.json at load.
// bench/memory_estimate.sh measures the error against peak RSS.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace pipit {

struct MemoryEstimate {
  uint64_t weights = 0;           // tensors the model uses (decoder and towers), as they sit in memory
  uint64_t tower_weights = 0;     // of which the vision / audio towers and their projectors
  uint64_t kv_cache = 0;          // K/V rows of every layer and slot at n_ctx, recurrent states included
  uint64_t activations = 0;       // one prefill chunk through the decoder, and the logits
  uint64_t tower_activations = 0; // one image, video or audio clip encoded at its largest (0 for text models)
  uint64_t tokenizer = 0;         // vocabulary and merge tables
  uint64_t runtime = 0;           // the engine's code, thread stacks and heap bookkeeping
  // While loading: tokenizer.json's parse tree beside the tables being built (freed, and given back to the system,
  // before the first token). For a small model with a big vocabulary this is the peak.
  uint64_t load_transient = 0;
  // Peak resident memory: the weights and runtime throughout, then the larger of the load's transient and what a
  // session at a full context holds.
  uint64_t total() const {
    const uint64_t session = kv_cache + activations + tower_activations + tokenizer;
    return runtime + weights + (session > load_transient ? session : load_transient);
  }
};

struct MemoryEstimateOptions {
  int64_t n_ctx = 0;    // 0: min(model max, 4096), as a session
  int64_t n_batch = 512;
  int64_t n_slot = 1;   // parallel sequences (the server's --parallel)
  DType kv_dtype = DType::F16;
};

Result<MemoryEstimate> estimate_memory(const std::string& path, const MemoryEstimateOptions& opt);

}  // namespace pipit
