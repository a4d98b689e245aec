// The memory plan of a session, checked before anything is allocated: the KV cache (context x layers x KV heads x
// head_dim, per parallel slot) and the activations of one prefill chunk, against core/limits.h's maxima and the
// memory the machine has. Session::create and the C API go through it; its errors name the setting, the bytes it
// would need and what fits, e.g.
//   "-c 10000000 is more than the model's max_position_embeddings 512 (it would need 12.8 GB of KV cache, 22.4 GB
//    of memory is available): use -c 512 or less", or, within the model's positions,
//   "-c 131072 needs 17.2 GB of KV cache for this model (36 layers x 8 KV heads x 128 dims, f32) and ~0.3 GB of
//    activations, but 8.1 GB of memory is available: at most -c 61000 fits".
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/limits.h"
#include "core/status.h"

namespace pipit {

struct ModelInfo;

struct SessionPlan {
  uint64_t kv_bytes = 0;          // K and V of every layer and slot, sliding-window rings included
  uint64_t activation_bytes = 0;  // one prefill chunk's activations and logits (an upper estimate)
  uint64_t total() const { return kv_bytes + activation_bytes; }
};

struct SessionSizes {
  int64_t n_ctx = 0;  // resolved (> 0)
  int64_t n_batch = 512;
  int64_t n_slot = 1;
  int64_t n_threads = 0;  // 0: default
  DType kv_dtype = DType::F32;
};

// Bytes of the KV cache KvCache(info.kv, n_slot, n_ctx, dtype, n_batch) would allocate (the same ring rule),
// computed in floating point so that absurd sizes cannot overflow.
double kv_cache_bytes(const ModelInfo& info, int64_t n_slot, int64_t n_ctx, DType dtype, int64_t n_batch);

// Checks the sizes against Limits, n_ctx against the model's max_position_embeddings, and the plan against
// available_memory(). `ctx_flag` / `slot_flag` name the
// settings in messages ("-c" / "--parallel" for the CLI, "n_ctx" / "n_slots" for the C API).
Result<SessionPlan> plan_session(const ModelInfo& info, const SessionSizes& s, const char* ctx_flag = "-c",
                                 const char* slot_flag = "--parallel");

}  // namespace pipit
