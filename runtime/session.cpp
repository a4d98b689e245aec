// Session: chunked prefill + decode over a single-slot KV cache.
#include "runtime/session.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "backends/device.h"
#include "models/mtp.h"
#include "runtime/memory_plan.h"
#include "runtime/multimodal.h"
#include "runtime/prompt_cache.h"
#include "runtime/state_copy.h"

namespace pipit {

namespace {
constexpr int kSpare = std::numeric_limits<int>::max();  // a snapshot buffer kept for reuse, not a snapshot
}  // namespace

int default_ctx(const Model& model, int requested) {
  if (requested > 0) return requested;
  int64_t m = model.info().max_ctx > 0 ? model.info().max_ctx : 4096;
  return int(std::min<int64_t>(m, 4096));
}

Session::Session(Model& model, const SessionOptions& opt, std::shared_ptr<ThreadPool> pool)
    : model_(model),
      opt_(opt),
      pool_(pool ? std::move(pool)
                 : std::make_shared<ThreadPool>(opt.n_threads > 0 ? opt.n_threads : ThreadPool::default_threads())),
      arena_(size_t(1) << 22, device_chunk_alloc(model.info().device.get())),
      kv_(model.info().kv, 1, default_ctx(model, opt.n_ctx), opt.kv_dtype, std::max(1, opt.n_batch),
          model.info().device.get()) {
  ctx_.dev = model.info().device.get();
  ctx_.arena = &arena_;
  ctx_.pool = pool_.get();
  ctx_.k = &kernels();
}

Result<std::unique_ptr<Session>> Session::create(Model& model, const SessionOptions& opt,
                                                 std::shared_ptr<ThreadPool> pool, const char* ctx_flag) {
  if (opt.n_ctx < 0) return Error::invalid_argument("{} {}: the context must be >= 1", ctx_flag, opt.n_ctx);
  SessionSizes sz{.n_ctx = default_ctx(model, opt.n_ctx), .n_batch = std::max(1, opt.n_batch), .n_slot = 1,
                  .n_threads = pool ? 0 : opt.n_threads, .kv_dtype = opt.kv_dtype};
  PIPIT_TRY(plan_session(model.info(), sz, ctx_flag).status());
  try {
    return std::make_unique<Session>(model, opt, std::move(pool));
  } catch (const std::bad_alloc&) {  // the plan fit, but the memory went elsewhere meanwhile
    return Error::unavailable("[session] out of memory allocating the KV cache for {} {} ({} available now)",
                              ctx_flag, sz.n_ctx, format_bytes(available_memory()));
  }
}

Result<Tensor> Session::eval(std::span<const int32_t> tokens, bool all_logits) {
  return eval_chunks(tokens, all_logits, nullptr);
}

Result<Tensor> Session::eval(const MultimodalPrompt& mm, bool all_logits) {
  const size_t n = mm.tokens.size();
  if ((!mm.embd_row.empty() && mm.embd_row.size() != n) ||
      (!mm.mrope_pos.empty() && mm.mrope_pos.size() != PosStreams::kStreams * n))
    return Error::invalid_argument("[eval] multimodal prompt of {} tokens has {} embedding rows and {} positions", n,
                                   mm.embd_row.size(), mm.mrope_pos.size());
  const int n0 = n_past_;
  const int32_t delta0 = rope_delta_;
  auto r = eval_chunks(mm.tokens, all_logits, &mm);
  if (!r.is_ok()) return r;
  for (const auto& sp : mm.image_spans)  // positions after each image continue from its largest one
    images_.push_back({n0 + int(sp.begin), n0 + int(sp.end), delta0 + sp.delta_after});
  if (!mm.mrope_pos.empty()) rope_delta_ = delta0 + mm.rope_delta;
  return r;
}

void Session::truncate(int n) {
  n = std::clamp(n, 0, n_past_);
  for (const auto& sp : images_)
    if (sp.begin < n && n < sp.end) n = sp.begin;  // never keep half an image
  if (n < kv_.min_rewind(n_past_)) n = 0;
  if (kv_.has_state() && n != kv_.state_pos(0)) {
    // the state cannot be cut back: the latest snapshot at or before n, or the start (a zero state)
    const StateSnapshot* best = nullptr;
    for (const auto& sn : snapshots_)
      if (sn.pos <= n && (!best || sn.pos > best->pos)) best = &sn;
    n = best ? best->pos : 0;
    kv_.restore_state(0, best ? *best : StateSnapshot{});
  }
  // snapshots after n are dropped; their buffers stay as spares (pos kSpare, after the others) for the next ones
  for (auto& sn : snapshots_)
    if (sn.pos > n) sn.pos = kSpare;
  n_past_ = n;
  while (!images_.empty() && images_.back().end > n_past_) images_.pop_back();
  rope_delta_ = images_.empty() ? 0 : images_.back().delta_after;
}

Result<Tensor> Session::eval_chunks(std::span<const int32_t> tokens, bool all_logits, const MultimodalPrompt* mm) {
  if (tokens.empty()) return Error::invalid_argument("[eval] no tokens to evaluate");
  if (int64_t(n_past_) + int64_t(tokens.size()) > kv_.n_ctx())
    return Error::out_of_range("[eval] {} tokens after {} already in the context exceed the context size {} "
                               "(use a larger -c/--ctx or a shorter prompt)",
                               tokens.size(), n_past_, kv_.n_ctx());
  const int64_t n_vocab = model_.info().n_vocab;
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab) return Error::invalid_argument("[eval] token id {} outside the vocabulary [0, {})", t, n_vocab);
  const int64_t chunk = std::max(1, opt_.n_batch), n_all = int64_t(tokens.size());
  const bool mrope = (mm && !mm->mrope_pos.empty()) || rope_delta_ != 0;
  if (all_logits) {
    const double need = double(tokens.size()) * double(n_vocab) * 4.0;
    if (need > double(available_memory()))
      return Error::out_of_range("[eval] the logits of all {} tokens need {}, but {} of memory is available",
                                 tokens.size(), format_bytes(uint64_t(need)), format_bytes(available_memory()));
    try {
      all_logits_.resize(tokens.size() * size_t(n_vocab));
    } catch (const std::bad_alloc&) {
      return Error::unavailable("[eval] out of memory allocating the logits of {} tokens", tokens.size());
    }
  }
  Tensor logits;
  for (int64_t b = 0; b < n_all; b += chunk) {
    const int64_t n = std::min<int64_t>(chunk, n_all - b);
    arena_.reset();
    Batch batch = Batch::single(tokens.subspan(size_t(b), size_t(n)), n_past_, 0, all_logits);
    if (mm && !mm->embd_row.empty()) {
      batch.media.embd = mm->embd;
      batch.media.row.assign(mm->embd_row.begin() + b, mm->embd_row.begin() + b + n);
      batch.deepstack = mm->deepstack;
    }
    if (mrope) {  // the model's positions for the prompt shifted to follow the context; text: kv row + delta
      std::vector<int32_t>& pos3 = batch.pos_streams.pos;
      pos3.resize(size_t(PosStreams::kStreams * n));
      for (int64_t s = 0; s < PosStreams::kStreams; ++s)
        for (int64_t i = 0; i < n; ++i)
          pos3[size_t(s * n + i)] =
              mm && !mm->mrope_pos.empty() ? n_past_ - int32_t(b) + rope_delta_ + mm->mrope_pos[size_t(s * n_all + b + i)]
                                           : n_past_ + int32_t(i) + rope_delta_;
    }
    try {
      if (mtp_) {
        Tensor hidden;
        PIPIT_TRY(mtp_->forward_hidden(ctx_, batch, kv_, &logits, &hidden));
        hidden_sink_(batch, hidden);
      } else {
        PIPIT_TRY(model_.forward(ctx_, batch, kv_, &logits));
      }
      PIPIT_TRY(logits_to_host(ctx_, &logits));
    } catch (const std::bad_alloc&) {  // activations (the arena grows on a first long chunk), model scratch
      return Error::unavailable("[eval] out of memory running a chunk of {} tokens ({} available now; a smaller "
                                "batch or context needs less)",
                                n, format_bytes(available_memory()));
    }
    n_past_ += int(n);
    n_evaluated_ += n;
    if (n > 1) snapshot_state();
    if (all_logits) std::memcpy(all_logits_.data() + b * n_vocab, logits.data(), size_t(n * n_vocab) * 4);
    if (progress_ && !progress_(b + n, n_all) && b + n < n_all)
      return Error::cancelled("[eval] stopped after {} of {} prompt tokens", b + n, n_all);
  }
  if (all_logits)
    return Tensor::from_data(DType::F32, {int64_t(tokens.size()), n_vocab}, all_logits_.data(), nullptr);
  return logits;
}

void Session::snapshot_state() {
  if (!kv_.has_state() || opt_.n_state_snapshots <= 0) return;
  // snapshots_: the kept ones oldest first, then spare buffers (pos kSpare); a new snapshot reuses a spare or the
  // oldest one's buffer (speculative decoding takes one per step: no allocation, no page faults)
  const auto first_spare = std::find_if(snapshots_.begin(), snapshots_.end(), [](auto& sn) { return sn.pos == kSpare; });
  const int n_kept = int(first_spare - snapshots_.begin());
  if (n_kept > 0 && snapshots_[size_t(n_kept - 1)].pos == n_past_) return;
  StateSnapshot snap;
  if (n_kept >= opt_.n_state_snapshots) {
    snap = std::move(snapshots_.front());
    snapshots_.erase(snapshots_.begin());
  } else if (first_spare != snapshots_.end()) {
    snap = std::move(snapshots_.back());
    snapshots_.pop_back();
  }
  save_state_into(kv_, model_.info().kv, 0, snap);
  const auto at = std::find_if(snapshots_.begin(), snapshots_.end(), [](auto& sn) { return sn.pos == kSpare; });
  snapshots_.insert(at, std::move(snap));
}

void Session::save_to(PromptCache& cache, std::span<const uint64_t> key) {
  if (!images_.empty() || int64_t(key.size()) != n_past_ || n_past_ == 0) return;
  std::vector<StateSnapshot> states;
  if (kv_.has_state()) {
    if (kv_.state_pos(0) != n_past_) return;
    for (const auto& sn : snapshots_)
      if (sn.pos != kSpare) states.push_back(sn);
    if (states.empty() || states.back().pos != n_past_) states.push_back(kv_.save_state(0));
  }
  cache.save(kv_, 0, key, std::move(states), model_.info().device.get());
}

int Session::restore_from(PromptCache& cache, std::span<const uint64_t> key, int max_n) {
  if (!images_.empty()) return n_past_;
  const int m = cache.restore(kv_, 0, key, max_n, n_past_, model_.info().device.get());
  if (m == 0) return n_past_;
  n_past_ = m;
  snapshots_.clear();
  if (kv_.has_state()) snapshots_.push_back(kv_.save_state(0));
  rope_delta_ = 0;
  return n_past_;
}

std::vector<int> Session::state_snapshots() const {
  std::vector<int> v;
  for (const auto& sn : snapshots_)
    if (sn.pos != kSpare) v.push_back(sn.pos);
  return v;
}

}  // namespace pipit
