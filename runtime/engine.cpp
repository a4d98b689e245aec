// Engine: the continuous-batching loop.
#include "runtime/engine.h"

#include "backends/device.h"

#include <algorithm>
#include <exception>
#include <array>
#include <chrono>
#include <cstring>
#include <new>
#include <limits>

#include "models/audio/audio_model.h"
#include "models/mtp.h"
#include "runtime/mtp_draft.h"
#include "runtime/multimodal.h"
#include "runtime/sequence.h"
#include "runtime/speculative.h"
#include "runtime/state_copy.h"

namespace pipit {

struct Engine::Seq {
  uint64_t id;
  int slot = -1;
  EngineRequest req;
  std::unique_ptr<Sequence> seq;  // sampling, text, stop conditions; seq->history(): prompt + generated
  int64_t n_done = 0;             // tokens of history already in the KV cache
  bool decoding = false;          // prompt fully processed; history().back() is the token to feed next
  bool finished = false;  // on_done has been called (it must be called exactly once)
  std::chrono::steady_clock::time_point t0, t1;
  bool admitted = false;              // restore_prefix() has run
  std::vector<uint64_t> prompt_key;   // PromptCache key of the prompt (with a cache)
  std::vector<StateSnapshot> states;  // recurrent state at the prompt's end (with a cache)
  int64_t draft_done = 0;             // EngineOptions::draft: tokens of history (+ guesses) in the draft's slot
  StateSnapshot spec_state;           // recurrent state before a verification with guesses (back to it on a rejection)
};

struct Engine::Part {
  Seq* s;
  int64_t n = 0;  // rows in the batch
  // decoding: history tokens fed (its last, and after a rejection that rewound a recurrent state the accepted ones
  // before it), then the guesses
  int64_t lag = 0;
  bool wants_logits = false;
  int n_guess = 0;              // a draft model's guesses to make (draft_guesses)
  std::vector<int32_t> drafts;  // the guesses after the decode token (rows 1 .. n - 1)
};

Engine::Engine(Model& model, const Tokenizer* tok, const EngineOptions& opt)
    : model_(model),
      tok_(tok),
      opt_(opt),
      n_ctx_(default_ctx(model, opt.n_ctx)),
      pool_(std::make_shared<ThreadPool>(opt.n_threads > 0 ? opt.n_threads : ThreadPool::default_threads())),
      arena_(size_t(1) << 22, device_chunk_alloc(model.info().device.get())),
      kv_(model.info().kv, std::max(1, opt.n_slots), n_ctx_, opt.kv_dtype, std::max(1, opt.n_batch),
          model.info().device.get()),
      slot_used_(size_t(std::max(1, opt.n_slots)), false) {
  opt_.n_slots = std::max(1, opt_.n_slots);
  opt_.n_batch = std::max(1, opt_.n_batch);
  ctx_.dev = model.info().device.get();
  ctx_.arena = &arena_;
  ctx_.pool = pool_.get();
  ctx_.k = &kernels();
  // On a device the prompt cache reads and writes the K/V rows through it (PromptCache::save / restore's `dev`).
  if (opt.cache_bytes > 0) cache_ = std::make_unique<PromptCache>(opt.cache_bytes);
  if (model.vision() || takes_audio(model.info().arch)) {  // a tower beside the decoder: images, audio clips
    const int n = pool_->size();
    const int n_enc = opt.n_encode_threads > 0 ? opt.n_encode_threads : std::max(1, n / 2);
    encode_pool_ = std::make_unique<ThreadPool>(n_enc);
    // an encode given all the threads or more: the steps keep theirs too (both pools share the cores)
    if (n_enc < n) narrow_pool_ = std::make_unique<ThreadPool>(n - n_enc);
  }
  if (opt.draft) {
    const Status st = check_draft(model, *opt.draft);
    PIPIT_ASSERT(st.is_ok(), "[engine] {}", st.message());
    draft_ = opt.draft;
    Device* dev = draft_->info().device.get();
    draft_arena_ = std::make_unique<Arena>(size_t(1) << 22, device_chunk_alloc(dev));
    draft_kv_ = std::make_unique<KvCache>(draft_->info().kv, opt_.n_slots, n_ctx_, opt.kv_dtype, opt_.n_batch, dev);
    draft_ctx_.dev = dev;
    draft_ctx_.arena = draft_arena_.get();
    draft_ctx_.k = &kernels();
  }
  if (opt.mtp) {
    auto d = MtpDraft::create(model, opt_.n_slots, n_ctx_, opt.kv_dtype);
    PIPIT_ASSERT(d.is_ok(), "[engine] {}", d.status().message());
    mtp_ = std::move(d).value();
  }
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  // fail whatever never ran
  for (auto& s : queue_)
    if (s->req.on_done) s->req.on_done(Error::cancelled("[engine] shutting down"));
  for (auto& s : active_)
    if (!s->finished && s->req.on_done) s->req.on_done(Error::cancelled("[engine] shutting down"));
}

Result<uint64_t> Engine::submit(EngineRequest r) {
  if (r.prompt.empty()) return Error::invalid_argument("[engine] empty prompt");
  if (r.params.max_tokens < 1) return Error::invalid_argument("[engine] max_tokens must be >= 1");
  if (r.params.spec.draft)  // a Session-based draft (generate()); the Engine's draft model is EngineOptions::draft
    return Error::invalid_argument("[engine] GenerateParams::spec.draft is not served: see EngineOptions::draft");
  if (r.params.spec.mtp)  // a Session's MTP head (generate())
    return Error::invalid_argument("[engine] GenerateParams::spec.mtp is not served by the engine");
  const int64_t V = model_.info().n_vocab;
  for (int32_t t : r.prompt)
    if (t < 0 || t >= V) return Error::invalid_argument("[engine] token id {} outside the vocabulary [0, {})", t, V);
  if (r.images) {
    const MultimodalPrompt& mm = *r.images;
    const size_t n = mm.tokens.size();
    if (mm.tokens != r.prompt || (!mm.embd_row.empty() && mm.embd_row.size() != n) ||
        (!mm.mrope_pos.empty() && mm.mrope_pos.size() != PosStreams::kStreams * n))
      return Error::invalid_argument("[engine] the multimodal prompt does not match the request's {} tokens", n);
  }
  if (int64_t(r.prompt.size()) >= n_ctx_)
    return Error::out_of_range("[engine] the prompt has {} tokens; the context holds {} (prompt + answer)",
                               r.prompt.size(), n_ctx_);
  auto s = std::make_unique<Seq>();
  if (r.params.grammar && !tok_) return Error::invalid_argument("[engine] a grammar needs the model's tokenizer");
  if (cache_) s->prompt_key = PromptCache::make_key(r.prompt, r.images.get());
  s->req = std::move(r);
  Seq* sp = s.get();  // the callbacks stay with the request (the Sequence outlives no Seq)
  s->seq = std::make_unique<Sequence>(
      model_, tok_, s->req.prompt, s->req.params, n_ctx_, 0,
      [sp](const std::string& piece, int32_t t) { return !sp->req.on_token || sp->req.on_token(piece, t); },
      [sp](const TokenLogprob& lp) {
        if (sp->req.on_logprob) sp->req.on_logprob(lp);
      });
  std::lock_guard<std::mutex> lk(mu_);
  if (int(queue_.size()) >= opt_.max_queue)
    return Error::unavailable("[engine] {} requests are already waiting; try again later", queue_.size());
  s->id = next_id_++;
  const uint64_t id = s->id;
  queue_.push_back(std::move(s));
  cv_.notify_all();
  return id;
}

void Engine::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  cancelled_.push_back(id);
  cv_.notify_all();
}

Status Engine::check_draft(const Model& target, const Model& draft) {
  if (draft.info().n_vocab != target.info().n_vocab)
    return Error::invalid_argument("the draft model's vocabulary has {} tokens, the model's {}; a draft model must "
                                   "share the vocabulary", draft.info().n_vocab, target.info().n_vocab);
  for (const StateShapes& st : draft.info().kv.state)
    if (!st.empty())
      return Error::invalid_argument("a draft model with recurrent layers ({}) cannot drop rejected guesses",
                                     draft.info().arch);
  return Status::ok();
}

Engine::Stats Engine::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s = stats_;
  s.active = int(active_.size());
  s.queued = int(queue_.size());
  return s;
}

std::vector<bool> Engine::busy_slots() const {
  std::lock_guard<std::mutex> lk(mu_);
  return slot_used_;
}

void Engine::finish(Seq& s, Result<GenerateResult> r) {
  if (s.finished) return;
  s.finished = true;  // first: a throwing on_done must not be called again by the exception barrier
  if (r.is_ok()) save_prefix(s);
  {
    std::lock_guard<std::mutex> lk(mu_);
    slot_used_[size_t(s.slot)] = false;
    stats_.completed++;
  }
  if (r.is_ok() && s.decoding) r->gen_ms = std::chrono::duration<double, std::milli>(
                                              std::chrono::steady_clock::now() - s.t1).count();
  if (s.req.on_done) s.req.on_done(r);
}

void Engine::erase_finished() {
  // stats() reads active_ under mu_ from other threads, so active_ changes only under mu_ (the engine thread
  // alone changes it, so its own unlocked reads are fine).
  std::lock_guard<std::mutex> lk(mu_);
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](auto& up) { return up->finished; }), active_.end());
}

void Engine::fail_all(const Status& st) {
  for (auto& up : active_) {
    if (up->finished) continue;
    try {
      finish(*up, st);
    } catch (...) {  // a callback that throws again: the request is over either way
    }
  }
  erase_finished();
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !active_.empty() || !queue_.empty(); });
      if (stop_) return;
    }
    // The exception barrier: whatever a forward pass or a callback throws (bad_alloc included) fails the requests
    // that were running, with one error each, and the engine goes on serving the next ones.
    try {
      iterate();
    } catch (const std::bad_alloc&) {
      fail_all(Error::internal("[engine] out of memory during a forward pass"));
    } catch (const std::exception& e) {
      fail_all(Error::internal("[engine] {}", e.what()));
    } catch (...) {
      fail_all(Error::internal("[engine] unknown exception"));
    }
  }
}

void Engine::iterate() {
  std::vector<uint64_t> cancel;
  std::vector<std::unique_ptr<Seq>> dropped;  // cancelled while queued: their on_done runs without mu_
  {
    std::lock_guard<std::mutex> lk(mu_);
    // cancel() appends to cancelled_ under mu_: take the list whole, then look at it without the lock
    cancel.swap(cancelled_);
    for (uint64_t id : cancel) {
      auto it = std::find_if(queue_.begin(), queue_.end(), [&](auto& s) { return s->id == id; });
      if (it == queue_.end()) continue;
      dropped.push_back(std::move(*it));
      queue_.erase(it);
    }
    // admit waiting requests into free slots
    while (!queue_.empty()) {
      auto free = std::find(slot_used_.begin(), slot_used_.end(), false);
      if (free == slot_used_.end()) break;
      auto s = std::move(queue_.front());
      queue_.pop_front();
      s->slot = int(free - slot_used_.begin());
      *free = true;
      s->t0 = std::chrono::steady_clock::now();
      active_.push_back(std::move(s));
    }
  }
  for (auto& up : active_)
    if (!up->admitted) {
      if (mtp_) mtp_->forget(up->slot);
      restore_prefix(*up);
    }
  for (auto& s : dropped) {
    s->finished = true;
    s->seq->result().reason = StopReason::kCallback;
    try {
      if (s->req.on_done) s->req.on_done(s->seq->result());
    } catch (...) {  // cancelled anyway; the others' on_done must still run
    }
  }
  // active cancellations
  bool any = false;
  for (uint64_t id : cancel) {
    auto it = std::find_if(active_.begin(), active_.end(), [&](auto& s) { return s->id == id; });
    if (it != active_.end() && !(*it)->finished) {
      (*it)->seq->result().reason = StopReason::kCallback;
      finish(**it, (*it)->seq->result());
      any = true;
    }
  }
  if (any) erase_finished();
  if (!active_.empty()) step();
}

void Engine::restore_prefix(Seq& s) {
  s.admitted = true;
  if (!cache_) return;
  // at most all but the last prompt token: its logits are needed
  const int m = cache_->restore(kv_, s.slot, s.prompt_key, int(s.req.prompt.size()) - 1, 0, ctx_.dev);
  s.n_done = m;
  s.seq->result().n_cached = m;
  std::lock_guard<std::mutex> lk(mu_);
  stats_.prompt_tokens_cached += uint64_t(m);
}

void Engine::save_prefix(Seq& s) {
  if (!cache_ || s.n_done == 0) return;
  // the slot holds history[0, n_done): the prompt (keyed with its images) and the answer tokens fed back
  std::vector<uint64_t> key(s.prompt_key.begin(), s.prompt_key.begin() + std::min<int64_t>(s.n_done, int64_t(s.prompt_key.size())));
  for (int64_t i = int64_t(key.size()); i < s.n_done; ++i) key.push_back(uint64_t(uint32_t(s.seq->history()[size_t(i)])));
  if (kv_.has_state()) {
    if (kv_.state_pos(s.slot) != s.n_done) return;  // a failed pass: the state is not the one of this history
    s.states.push_back(kv_.save_state(s.slot));
  }
  cache_->save(kv_, s.slot, key, std::move(s.states), ctx_.dev);
}

void Engine::add_image_inputs(Batch& b, const std::vector<std::pair<Seq*, int64_t>>& parts) {
  bool any_embd = false, any_mrope = false;
  for (auto& [s, n] : parts)
    if (const MultimodalPrompt* mm = s->req.images.get()) {
      any_embd |= !mm->embd_row.empty() && s->n_done < int64_t(mm->tokens.size());
      any_mrope |= !mm->mrope_pos.empty();
    }
  if (!any_embd && !any_mrope) return;
  // Per token of the batch, in order: its image feature row (and DeepStack rows, copied into embd_buf_ and
  // deepstack_buf_) and its M-RoPE positions, the model's for the prompt (MultimodalPrompt::mrope_pos). Text tokens
  // of a sequence with images sit at kv row + rope_delta on every stream.
  constexpr int64_t kS = PosStreams::kStreams;
  const int64_t n_tokens = b.n_tokens();
  std::vector<std::array<int32_t, kS>> pos3;
  embd_buf_.clear();
  for (auto& d : deepstack_buf_) d.clear();
  if (any_embd) b.media.row.clear();
  int64_t n_embd = 0;
  for (auto& [s, n] : parts) {
    const MultimodalPrompt* mm = s->req.images.get();
    const int64_t n_prompt = mm ? int64_t(mm->tokens.size()) : 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t idx = s->n_done + i;
      const bool in_prompt = mm && idx < n_prompt;
      if (any_mrope) {
        std::array<int32_t, kS> p{};
        for (int64_t st = 0; st < kS; ++st)
          p[size_t(st)] = in_prompt && !mm->mrope_pos.empty()
                              ? mm->mrope_pos[size_t(st * n_prompt + idx)]
                              : int32_t(idx) + (mm && !mm->mrope_pos.empty() ? mm->rope_delta : 0);
        pos3.push_back(p);
      }
      if (any_embd) {
        const int32_t r = in_prompt && !mm->embd_row.empty() ? mm->embd_row[size_t(idx)] : -1;
        if (r < 0) {
          b.media.row.push_back(-1);
          continue;
        }
        n_embd = mm->embd.dim(1);
        auto put = [&](std::vector<float>& buf, const Tensor& t) {
          const float* row = t.ptr<float>() + int64_t(r) * n_embd;
          buf.insert(buf.end(), row, row + n_embd);
        };
        b.media.row.push_back(int32_t(int64_t(embd_buf_.size()) / n_embd));
        put(embd_buf_, mm->embd);
        if (deepstack_buf_.size() < mm->deepstack.size()) deepstack_buf_.resize(mm->deepstack.size());
        for (size_t k = 0; k < mm->deepstack.size(); ++k) put(deepstack_buf_[k], mm->deepstack[k]);
      }
    }
  }
  if (any_mrope) {
    b.pos_streams.pos.resize(size_t(kS * n_tokens));
    for (int64_t st = 0; st < kS; ++st)
      for (int64_t i = 0; i < n_tokens; ++i) b.pos_streams.pos[size_t(st * n_tokens + i)] = pos3[size_t(i)][size_t(st)];
  }
  if (any_embd && !embd_buf_.empty()) {
    const int64_t rows = int64_t(embd_buf_.size()) / n_embd;
    b.media.embd = Tensor::from_data(DType::F32, {rows, n_embd}, embd_buf_.data(), nullptr);
    for (auto& d : deepstack_buf_)  // every image of one model has the same DeepStack layers
      if (!d.empty() && d.size() == embd_buf_.size())
        b.deepstack.push_back(Tensor::from_data(DType::F32, {rows, n_embd}, d.data(), nullptr));
  } else {
    b.media.row.clear();  // no image rows in this batch
  }
}

bool Engine::step() {
  std::vector<Part> parts = plan_step();
  if (parts.empty()) return false;
  // an image encode runs beside us: step on the threads it left (row results do not depend on the thread count:
  // work is split by output rows and heads, never inside a reduction)
  ctx_.pool = narrow_pool_ && encoding_.load() > 0 ? narrow_pool_.get() : pool_.get();
  Batch b = build_batch(parts);
  Tensor logits;
  const Status st = forward_step(b, &logits);
  take_results(parts, st, logits);
  erase_finished();
  return true;
}

// Pack the batch: every decoding sequence contributes its next token (and its speculative guesses); prefilling
// sequences share what is left of the n_batch budget, oldest first.
std::vector<Engine::Part> Engine::plan_step() {
  std::vector<Part> parts;
  int64_t budget = opt_.n_batch;
  // prompt tokens this pass may take: a chunk while others decode (EngineOptions::n_prefill_chunk)
  const bool any_decoding = std::any_of(active_.begin(), active_.end(), [](auto& up) { return up->decoding; });
  int64_t prefill_left = any_decoding && opt_.n_prefill_chunk > 0 ? opt_.n_prefill_chunk
                                                                  : std::numeric_limits<int64_t>::max();
  for (auto& up : active_) {
    Seq& s = *up;
    Part p{&s};
    if (s.decoding) {
      p.lag = p.n = int64_t(s.seq->history().size()) - s.n_done;
      // Speculative decoding: guesses ride along as extra rows of this pass (a recurrent state goes back to its
      // snapshot after a rejection, and the accepted tokens ride along with the next pass). At most: what the answer
      // may still take after the decode token, what the context holds, what is left of the batch. Every source of
      // guesses serves a recurrent model too (generate() does the same): its state is snapshotted before the pass
      // (build_batch) and restored after a rejection (take_results); the draft model's own slots never have one
      // (check_draft).
      const int k = std::min({s.req.params.spec.n_draft, 16, s.req.params.max_tokens - int(s.seq->result().tokens.size()) - 1,
                              n_ctx_ - int(p.lag) - int(s.n_done), int(std::max<int64_t>(budget - p.lag, 0))});
      // (a request catching up after a rejection rewound its recurrent state guesses again at its next step)
      if (k > 0 && p.lag == 1) {
        if (mtp_ || draft_) p.n_guess = k;  // the head / the draft model makes them (mtp_guesses, draft_guesses)
        else p.drafts = lookup_draft(s.seq->history(), k, s.req.params.spec.ngram_min, s.req.params.spec.ngram_max);
        p.n += mtp_ || draft_ ? k : int64_t(p.drafts.size());  // at most k: the batch budget holds them
      }
    } else {
      p.n = std::min<int64_t>({int64_t(s.seq->history().size()) - s.n_done, std::max<int64_t>(budget, 0), prefill_left});
      if (p.n <= 0) continue;
      prefill_left -= p.n;
    }
    budget -= p.n;
    parts.push_back(std::move(p));
  }
  return parts;
}

// The guesses of the parts that want them (MTP head, draft model), then every part's rows: its tokens and
// positions, the logits rows it needs (the last; every row with guesses), and the media inputs of its span.
Batch Engine::build_batch(std::vector<Part>& parts) {
  if (mtp_) mtp_guesses(parts);
  else if (draft_) draft_guesses(parts);
  Batch b;
  for (Part& p : parts) {
    Seq& s = *p.s;
    Batch::Seq bs{s.slot, b.n_tokens(), p.n};
    for (int64_t i = 0; i < p.n; ++i) {
      b.tokens.push_back(i < p.lag || p.drafts.empty() ? s.seq->history()[size_t(s.n_done + i)]
                                                       : p.drafts[size_t(i - p.lag)]);
      b.pos.push_back(int32_t(s.n_done + i));
    }
    p.wants_logits = s.n_done + p.n == int64_t(s.seq->history().size()) + int64_t(p.drafts.size());
    if (p.wants_logits)  // the last row; with guesses every row (row i: the token after guess i)
      for (int64_t i = p.drafts.empty() ? p.n - 1 : p.lag - 1; i < p.n; ++i) b.logits_rows.push_back(bs.begin + i);
    if (!p.drafts.empty() && kv_.has_state()) save_state_into(kv_, model_.info().kv, s.slot, s.spec_state);
    b.seqs.push_back(bs);
  }
  {
    std::vector<std::pair<Seq*, int64_t>> spans;
    for (auto& p : parts) spans.push_back({p.s, p.n});
    add_image_inputs(b, spans);
  }
  return b;
}

// The forward pass (with MTP, the hidden states every row gives the head), logits read back from a device.
Status Engine::forward_step(const Batch& b, Tensor* logits) {
  arena_.reset();
  Status st;
  if (mtp_) {  // the final-norm hidden states of every row go to the head's store
    Tensor hidden;
    st = dynamic_cast<MtpModel&>(model_).forward_hidden(ctx_, b, kv_, logits, &hidden);
    mtp_->set_pool(ctx_.pool);  // observe() runs the head over a prefill chunk's pairs
    if (st.is_ok())
      for (const Batch::Seq& q : b.seqs) mtp_->observe(q.slot, b, q.begin, q.n, hidden);
  } else {
    st = model_.forward(ctx_, b, kv_, logits);
  }
  if (st.is_ok()) st = logits_to_host(ctx_, logits);
  return st;
}

// What the pass gave each part: prompt bookkeeping, one token per logits row checked by Sequence::verify, the
// counts, and the requests that ended (or every part failed with st).
void Engine::take_results(std::vector<Part>& parts, const Status& st, const Tensor& logits) {
  const int64_t V = model_.info().n_vocab;
  // The parts' tokens, in three passes: the prompt bookkeeping, then each part's sampling and verification
  // (Sequence::verify) across the pool, the parts side by side (they are independent: each has its own sampler,
  // grammar and history, and its callbacks stream to its own request), then the counts and the ends, in order.
  struct Pending {
    Part* p;
    int64_t row;  // its first logits row
    size_t n_tokens0;
    Sequence::Verified v{0, false};
  };
  std::vector<Pending> pending;
  int64_t row = 0;
  for (auto& p : parts) {
    Seq& s = *p.s;
    if (!st.is_ok()) {
      finish(s, st);
      continue;
    }
    s.n_done += p.n;
    if (!s.decoding) {
      s.seq->result().n_prefilled += int(p.n);
      std::lock_guard<std::mutex> lk(mu_);
      stats_.prompt_tokens_evaluated += uint64_t(p.n);
    }
    if (!p.wants_logits) continue;
    if (!s.decoding) {
      // the prompt's end: a recurrent state can be cached only at the positions it was snapshotted at
      if (cache_ && kv_.has_state()) s.states.push_back(kv_.save_state(s.slot));
      s.decoding = true;
      s.t1 = std::chrono::steady_clock::now();
      s.seq->result().prompt_ms = std::chrono::duration<double, std::milli>(s.t1 - s.t0).count();
    }
    pending.push_back({&p, row, s.seq->result().tokens.size()});
    row += int64_t(p.drafts.size()) + 1;
  }
  // One token per logits row, the guesses checked by the one rule of Sequence::verify (the answer is the plain
  // one, token for token, greedy or seeded sampling). A sampling pass over a 152k vocabulary costs ~0.2-0.4 ms,
  // and at 8 clients it was a tenth of the engine thread's time when done one part after another.
  // An exception in a part (a callback's, an allocation) is carried back to this thread, where the engine's
  // barrier (fail_all) handles it as before.
  std::mutex error_mu;
  std::exception_ptr error;
  auto verify = [&](Pending& q) {
    try {
      q.v = q.p->s->seq->verify(logits.ptr<float>() + q.row * V, V, q.p->drafts);
    } catch (...) {
      std::lock_guard<std::mutex> lk(error_mu);
      if (!error) error = std::current_exception();
    }
  };
  if (pending.size() > 1 && ctx_.pool->size() > 1)
    ctx_.pool->parallel_for(int64_t(pending.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) verify(pending[size_t(i)]);
    });
  else
    for (Pending& q : pending) verify(q);
  if (error) std::rethrow_exception(error);
  for (Pending& q : pending) {
    Seq& s = *q.p->s;
    const int k = int(q.p->drafts.size());
    const int64_t n0 = s.n_done - q.p->n;  // the first fed token's position
    {
      std::lock_guard<std::mutex> lk(mu_);
      stats_.tokens_generated += s.seq->result().tokens.size() - q.n_tokens0;
      stats_.spec_drafted += uint64_t(k);
      stats_.spec_accepted += uint64_t(q.v.accepted);
    }
    if (k > 0) {
      s.n_done = n0 + q.p->lag + q.v.accepted;  // the rows of rejected guesses stay behind the slot's end (overwritten)
      if (q.v.accepted < k && kv_.has_state()) {  // the state has seen them: back to before this pass
        kv_.restore_state(s.slot, s.spec_state);
        s.n_done = n0;
      }
      s.draft_done = std::min(s.draft_done, s.n_done);  // the draft's slot too (it never holds its last guess)
    }
    if (q.v.ended) finish(s, s.seq->result());
  }
}

// A draft model's guesses for the parts that want them (Part::n_guess). The draft's slot first catches up with the
// request's history (the whole prompt at first, then the tokens accepted since its last guesses: Seq::draft_done),
// and its last row's argmax is the first guess; each further pass feeds the latest guess and takes the next, for
// all the requests at once. The guesses are greedy whatever the request samples with: one-hot guesses are verified
// like prompt lookup's (step()), so the answer stays the plain one and the draft's probabilities are not needed.
// A failed draft pass leaves the requests without guesses for this step (and their draft slots to be refilled).
void Engine::draft_guesses(std::vector<Part>& parts) {
  std::vector<Part*> want;
  for (Part& p : parts)
    if (p.n_guess > 0) want.push_back(&p);
  draft_ctx_.pool = ctx_.pool;
  const int64_t V = draft_->info().n_vocab;
  for (;;) {
    Batch b;
    std::vector<Part*> in;  // the parts with rows in this pass, in b.seqs order
    int64_t budget = opt_.n_batch;
    for (Part* p : want) {
      const std::vector<int32_t>& h = p->s->seq->history();
      const int64_t len = int64_t(h.size() + p->drafts.size()), from = p->s->draft_done;
      if (int(p->drafts.size()) == p->n_guess || budget <= 0) continue;
      const int64_t n = std::min<int64_t>({len - from, budget, draft_kv_->max_chunk()});
      Batch::Seq bs{p->s->slot, b.n_tokens(), n};
      for (int64_t i = from; i < from + n; ++i) {
        b.tokens.push_back(i < int64_t(h.size()) ? h[size_t(i)] : p->drafts[size_t(i - int64_t(h.size()))]);
        b.pos.push_back(int32_t(i));
      }
      if (from + n == len) b.logits_rows.push_back(bs.begin + n - 1);
      b.seqs.push_back(bs);
      in.push_back(p);
      budget -= n;
    }
    if (in.empty()) return;
    draft_arena_->reset();
    Tensor logits;
    Status st = draft_->forward(draft_ctx_, b, *draft_kv_, &logits);
    if (st.is_ok()) st = logits_to_host(draft_ctx_, &logits);
    if (!st.is_ok()) {
      for (Part* p : want) {
        p->drafts.clear();
        p->n = p->lag;
        p->s->draft_done = 0;
      }
      return;
    }
    int64_t row = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      Part& p = *in[i];
      p.s->draft_done += b.seqs[i].n;
      if (p.s->draft_done < int64_t(p.s->seq->history().size() + p.drafts.size())) continue;  // still catching up
      const float* l = logits.ptr<float>() + row++ * V;
      p.drafts.push_back(int32_t(std::max_element(l, l + V) - l));
    }
  }
}

// The MTP head's guesses for the parts that want them (Part::n_guess): per request, its pairs since the last pass
// (the head's store holds the hidden states of every pass: step()), then the chained ones (MtpDraft::propose). A
// failed head pass leaves the request without guesses for this step.
void Engine::mtp_guesses(std::vector<Part>& parts) {
  mtp_->set_pool(ctx_.pool);
  for (Part& p : parts) {
    if (p.n_guess <= 0) continue;
    const MultimodalPrompt* mm = p.s->req.images.get();
    const int32_t delta = mm && !mm->mrope_pos.empty() ? mm->rope_delta : 0;
    auto g = mtp_->propose(p.s->slot, p.s->seq->history(), 0, p.n_guess, delta);
    if (!g.is_ok()) continue;
    p.drafts = std::move(g).value();
    p.n = p.lag + int64_t(p.drafts.size());
  }
}

}  // namespace pipit
