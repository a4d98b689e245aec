// Session memory plan: KV cache + activation bytes vs. Limits and available memory.
#include "runtime/memory_plan.h"

#include <algorithm>

#include "models/model.h"

namespace pipit {

double kv_cache_bytes(const ModelInfo& info, int64_t n_slot, int64_t n_ctx, DType dtype, int64_t n_batch) {
  const auto& kv = info.kv;
  // One row of one layer: n_head_kv rows of head_dim elements (q8_0 K/V are blocks along head_dim).
  const double row = double(kv.n_head_kv) * double(dtype_row_bytes(dtype, kv.head_dim));
  double rows = 0, state = 0;
  for (int l = 0; l < kv.n_layer; ++l) {
    if (size_t(l) < kv.state.size() && !kv.state[size_t(l)].empty()) {  // recurrent: fixed f32 state, no rows
      for (const auto& shape : kv.state[size_t(l)]) {
        double n = 4.0;
        for (int64_t d : shape) n *= double(d);
        state += n;
      }
      continue;
    }
    const int64_t w = size_t(l) < kv.window.size() ? std::max(0, kv.window[size_t(l)]) : 0;
    rows += (w > 0 && n_batch > 0 && w + n_batch < n_ctx) ? double(w + n_batch) : double(n_ctx);
  }
  return double(n_slot) * (2.0 * rows * row + state);  // K and V rows, and the recurrent state
}

Result<SessionPlan> plan_session(const ModelInfo& info, const SessionSizes& s, const char* ctx_flag,
                                 const char* slot_flag) {
  if (s.n_ctx < 1 || s.n_ctx > Limits::kMaxCtx)
    return Error::invalid_argument("{} {}: the context must be in [1, {}]", ctx_flag, s.n_ctx, Limits::kMaxCtx);
  if (s.n_batch < 1 || s.n_batch > Limits::kMaxBatch)
    return Error::invalid_argument("batch size {} must be in [1, {}]", s.n_batch, Limits::kMaxBatch);
  if (s.n_slot < 1 || s.n_slot > Limits::kMaxSlots)
    return Error::invalid_argument("{} {}: parallel sequences must be in [1, {}]", slot_flag, s.n_slot,
                                   Limits::kMaxSlots);
  if (s.n_threads < 0 || s.n_threads > Limits::kMaxThreads)
    return Error::invalid_argument("threads {} must be in [1, {}]", s.n_threads, Limits::kMaxThreads);
  if (info.kv.n_layer < 0 || info.kv.n_head_kv < 0 || info.kv.head_dim < 0)
    return Error::internal("[session] the model reports a negative KV cache size");

  // The largest activations of one chunk: the residual stream and its projections (a few rows of n_embd per token,
  // the MLP's hidden rows ~ 4 n_embd each) and the chunk's logits. An estimate from above; the arena grows to the
  // real high water on the first pass.
  const int64_t chunk = std::min(s.n_batch, s.n_ctx);
  const double act = double(chunk) * (double(info.n_vocab) + 32.0 * double(info.n_embd)) * 4.0 * double(s.n_slot);
  const double kv = kv_cache_bytes(info, s.n_slot, s.n_ctx, s.kv_dtype, s.n_batch);
  const double avail = double(available_memory());
  // Positions past the ones the model was trained for give garbage, and a context that large is nearly always a
  // typo (an extra zero) that would also cost gigabytes: refuse it, with the bytes, so the user sees both.
  if (info.max_ctx > 0 && s.n_ctx > info.max_ctx)
    return Error::out_of_range(
        "{} {} is more than the model's max_position_embeddings {} (it would need {} of KV cache, {} of memory is "
        "available): use {} {} or less",
        ctx_flag, s.n_ctx, info.max_ctx, format_bytes(uint64_t(std::min(kv, 1.8e19))), format_bytes(uint64_t(avail)),
        ctx_flag, info.max_ctx);
  SessionPlan plan;
  if (kv + act <= avail) {
    plan.kv_bytes = uint64_t(kv);
    plan.activation_bytes = uint64_t(act);
    return plan;
  }
  // What fits: the largest context (binary search; the bytes grow with n_ctx) at these other settings.
  int64_t lo = 0, hi = s.n_ctx;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    const double b = kv_cache_bytes(info, s.n_slot, mid, s.kv_dtype, s.n_batch) +
                     double(std::min(s.n_batch, mid)) * (double(info.n_vocab) + 32.0 * double(info.n_embd)) * 4.0 *
                         double(s.n_slot);
    if (b <= avail) lo = mid; else hi = mid - 1;
  }
  const std::string slots = s.n_slot > 1 ? fmt(" ({} {})", slot_flag, s.n_slot) : std::string();
  const std::string fits = lo >= 1 ? fmt("at most {} {} fits", ctx_flag, lo)
                                   : std::string("not even a context of 1 fits at these settings");
  const std::string max_pos =
      info.max_ctx > 0 ? fmt(" (the model's max_position_embeddings is {})", info.max_ctx) : std::string();
  return Error::out_of_range(
      "{} {}{} needs {} of KV cache for this model ({} layers x {} KV heads x {} dims, {}) and ~{} of activations, "
      "but {} of memory is available: {}{}",
      ctx_flag, s.n_ctx, slots, format_bytes(uint64_t(std::min(kv, 1.8e19))), info.kv.n_layer, info.kv.n_head_kv,
      info.kv.head_dim, dtype_name(s.kv_dtype), format_bytes(uint64_t(std::min(act, 1.8e19))),
      format_bytes(uint64_t(avail)), fits, max_pos);
}

}  // namespace pipit
