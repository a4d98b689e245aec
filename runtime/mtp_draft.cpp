// Guesses from the model's MTP head (see mtp_draft.h).
#include "runtime/mtp_draft.h"

#include <algorithm>
#include <cstring>

#include "models/mtp.h"
#include "runtime/sampler.h"

namespace pipit {

Result<std::unique_ptr<MtpDraft>> MtpDraft::create(Session& target) {
  PIPIT_ASSIGN_OR_RETURN(MtpModel * head, mtp_of(target.model()));
  if (target.model().info().device)
    return Error::unsupported("[mtp] the MTP head runs on the CPU only (the model is on a device)");
  auto d = std::unique_ptr<MtpDraft>(new MtpDraft(*head, target.model().info().n_embd, 1, target.n_ctx(),
                                                  target.cache().dtype(), &target.pool()));
  d->s_ = &target;
  MtpDraft* self = d.get();
  target.set_hidden_sink(head, [self](const Batch& b, const Tensor& h) { self->observe(0, b, 0, b.n_tokens(), h); });
  return d;
}

Result<std::unique_ptr<MtpDraft>> MtpDraft::create(Model& m, int n_slots, int n_ctx, DType kv_dtype) {
  PIPIT_ASSIGN_OR_RETURN(MtpModel * head, mtp_of(m));
  if (m.info().device) return Error::unsupported("[mtp] the MTP head runs on the CPU only (the model is on a device)");
  return std::unique_ptr<MtpDraft>(new MtpDraft(*head, m.info().n_embd, n_slots, n_ctx, kv_dtype, nullptr));
}

MtpDraft::MtpDraft(MtpModel& head, int64_t n_embd, int n_slots, int n_ctx, DType kv_dtype, ThreadPool* pool)
    : head_(head),
      E_(n_embd),
      arena_(size_t(1) << 20),
      kv_(head.mtp_kv_spec(), n_slots, n_ctx, kv_dtype),
      slots_(size_t(n_slots)) {
  ctx_.arena = &arena_;
  ctx_.pool = pool;
  ctx_.k = &kernels();
}

MtpDraft::~MtpDraft() {
  if (s_) s_->set_hidden_sink(nullptr, nullptr);
}

void MtpDraft::forget(int slot) { slots_[size_t(slot)] = Slot{}; }

// Rows of a forward pass of the target: their tokens replace whatever was stored from their first position on (the
// context was cut back there, or continues there). Rows that start after a gap (positions restored from the prompt
// cache, evaluated before this draft followed the sequence) start the store over.
void MtpDraft::observe(int slot, const Batch& b, int64_t begin, int64_t n, const Tensor& hidden) {
  if (n <= 0) return;
  Slot& S = slots_[size_t(slot)];
  const int64_t nt = b.n_tokens();
  const int p0 = b.pos[size_t(begin)];
  if (p0 < S.hbase || p0 > S.hend) {
    S.hbase = S.hend = p0;
    S.tok.clear(), S.hid.clear(), S.pos3.clear();
  }
  const size_t keep = size_t(p0 - S.hbase);
  S.tok.resize(keep), S.hid.resize(keep * size_t(E_)), S.pos3.resize(keep * 3);
  std::erase_if(S.img, [&](const auto& kv) { return kv.first >= p0; });
  for (int64_t i = begin; i < begin + n; ++i) {
    S.tok.push_back(b.tokens[size_t(i)]);
    const float* row = hidden.ptr<float>() + i * E_;
    S.hid.insert(S.hid.end(), row, row + E_);
    for (int64_t st = 0; st < 3; ++st)
      S.pos3.push_back(b.pos_streams.empty() ? b.pos[size_t(i)] : b.pos_streams.pos[size_t(st * nt + i)]);
    if (!b.media.empty() && b.media.row[size_t(i)] >= 0) {
      const float* f = b.media.embd.ptr<float>() + int64_t(b.media.row[size_t(i)]) * E_;
      S.img[p0 + int(i - begin)] = std::vector<float>(f, f + E_);
    }
  }
  S.hend = p0 + int(n);
  // A prefill chunk: the head takes its complete pairs now (their next token is in the chunk), so the store holds
  // about a chunk of hidden states, not the whole prompt (a 32k prompt of Qwen3.5-0.8B would keep 128 MB). A
  // verification pass's rows wait: their guesses may be rejected.
  if (n > kEagerRows) {
    int start = S.done;
    if (start < S.hbase) {
      start = S.origin = S.hbase;
      S.pair_tok.clear();
    }
    if (start < S.hend - 1 && S.hend - 1 - S.origin <= kv_.n_ctx()) {
      auto tok = [&S](int p) { return S.tok[size_t(p - S.hbase)]; };
      if (run_pairs(slot, start, S.hend - 1, tok, nullptr).is_ok()) trim(S);
      else S.done = start, S.pair_tok.resize(size_t(start - S.origin));
    }
  }
}

Result<Tensor> MtpDraft::run(int slot, Batch& b, const Tensor& hidden, Tensor* out) {
  b.seqs = {{slot, 0, b.n_tokens()}};
  b.logits_rows = {b.n_tokens() - 1};
  Tensor logits;
  PIPIT_TRY(head_.forward_mtp(ctx_, b, hidden, kv_, &logits, out));
  n_pairs_ += b.n_tokens();
  return logits;
}

// The head over pairs [start, end) of `slot` (their hidden states stored, token i + 1 from token_at), in chunks:
// x_{i+1}, the head's KV row i - origin, the target's rotary position of token i. Returns the argmax of the last
// pair's logits and writes its output row to last_h (if not null). Pairs [.., end) are then done.
Result<int32_t> MtpDraft::run_pairs(int slot, int start, int end, const std::function<int32_t(int)>& token_at,
                                    float* last_h) {
  Slot& S = slots_[size_t(slot)];
  int32_t top = -1;
  std::vector<float> feats;
  const int chunk = std::min(kv_.max_chunk(), 512);
  for (int b0 = start; b0 < end; b0 += chunk) {
    const int m = std::min(chunk, end - b0);
    Batch b;
    feats.clear();
    bool rotated = S.origin != 0;  // rows at other KV rows than their position: give the positions explicitly
    for (int i = b0; i < b0 + m; ++i) {
      b.tokens.push_back(token_at(i + 1));
      b.pos.push_back(i - S.origin);
      const int32_t* p3 = &S.pos3[size_t(i - S.hbase) * 3];
      rotated |= p3[0] != i || p3[1] != i || p3[2] != i;
      auto f = S.img.find(i + 1);
      if (f != S.img.end()) {
        if (b.media.row.empty()) b.media.row.assign(size_t(i - b0), -1);
        b.media.row.push_back(int32_t(feats.size() / size_t(E_)));
        feats.insert(feats.end(), f->second.begin(), f->second.end());
      } else if (!b.media.row.empty()) {
        b.media.row.push_back(-1);
      }
    }
    if (rotated) {
      b.pos_streams.pos.resize(size_t(3 * m));
      for (int st = 0; st < 3; ++st)
        for (int i = 0; i < m; ++i)
          b.pos_streams.pos[size_t(st * m + i)] = S.pos3[size_t(b0 + i - S.hbase) * 3 + size_t(st)];
    }
    if (!feats.empty()) b.media.embd = Tensor::from_data(DType::F32, {int64_t(feats.size()) / E_, E_}, feats.data(), nullptr);
    arena_.reset();
    const Tensor hidden =
        Tensor::from_data(DType::F32, {m, E_}, S.hid.data() + size_t(b0 - S.hbase) * size_t(E_), nullptr);
    Tensor out;
    PIPIT_ASSIGN_OR_RETURN(Tensor logits, run(slot, b, hidden, &out));
    for (int i = b0; i < b0 + m; ++i) {
      if (i - S.origin < int(S.pair_tok.size())) S.pair_tok[size_t(i - S.origin)] = token_at(i + 1);
      else S.pair_tok.push_back(token_at(i + 1));
    }
    if (b0 + m == end) {
      if (last_h) std::memcpy(last_h, out.ptr<float>() + int64_t(m - 1) * E_, size_t(E_) * 4);
      top = argmax(std::span<const float>(logits.ptr<float>(), size_t(logits.dim(-1))));
    }
  }
  S.done = end;
  return top;
}

// Only h_{done - 1} may be needed again (when the token after it changes): the hidden states before it go.
void MtpDraft::trim(Slot& S) {
  const int keep_from = S.done - 1;
  if (keep_from <= S.hbase + 256) return;  // in batches: an erase moves the rest
  const size_t drop = size_t(keep_from - S.hbase);
  S.tok.erase(S.tok.begin(), S.tok.begin() + long(drop));
  S.hid.erase(S.hid.begin(), S.hid.begin() + long(drop * size_t(E_)));
  S.pos3.erase(S.pos3.begin(), S.pos3.begin() + long(drop * 3));
  std::erase_if(S.img, [&](const auto& e) { return e.first <= keep_from; });
  S.hbase = keep_from;
}

Result<std::vector<int32_t>> MtpDraft::propose(std::span<const int32_t> tail, int pos0, int k) {
  PIPIT_ASSERT(s_, "MtpDraft::propose without a session: name the slot");
  return propose(0, tail, pos0, k, s_->rope_delta());
}

Result<std::vector<int32_t>> MtpDraft::propose(int slot, std::span<const int32_t> tail, int pos0, int k,
                                               int32_t delta) {
  Slot& S = slots_[size_t(slot)];
  const int n = pos0 + int(tail.size());  // tokens 0 .. n - 1; the last one is not in the target's context yet
  auto token_at = [&](int p) { return tail[size_t(p - pos0)]; };
  if (k <= 0 || tail.empty() || n < 2) return std::vector<int32_t>{};
  // stored positions whose token is not the context's any more (another conversation) are not the context's
  for (int p = std::max(S.hbase, pos0); p < std::min(S.hend, n - 1); ++p)
    if (S.tok[size_t(p - S.hbase)] != token_at(p)) {
      S.hend = p;
      break;
    }
  // pairs made with a token the context no longer has at that place are redone from there
  for (int i = std::max(S.origin, pos0 - 1); i < S.done; ++i)
    if (i + 1 >= n || S.pair_tok[size_t(i - S.origin)] != token_at(i + 1)) {
      S.done = i;
      S.pair_tok.resize(size_t(S.done - S.origin));
      break;
    }
  // the last pair (n - 2) is always run again: its logits give the first guess
  int start = std::min(S.done, n - 2);
  if (start < S.hbase) {  // the hidden states it needs are gone: the head starts over
    start = S.origin = S.done = S.hbase;
    S.pair_tok.clear();
  }
  if (S.hend < n - 1 || start > n - 2) return std::vector<int32_t>{};  // a hidden state the head needs is missing
  if (n - 2 + k - S.origin > kv_.n_ctx() - 1) k = kv_.n_ctx() - 1 - (n - 2 - S.origin);
  if (k <= 0) return std::vector<int32_t>{};

  // the pairs [start, n - 1): the last one's logits give the first guess
  std::vector<float> last_h(static_cast<size_t>(E_));  // the head's output for it: a chained guess's hidden state
  std::vector<int32_t> guess;
  PIPIT_ASSIGN_OR_RETURN(int32_t g1, run_pairs(slot, start, n - 1, token_at, last_h.data()));
  guess.push_back(g1);
  trim(S);
  // chained guesses: pair p = n - 2 + j with the previous guess as its token and the head's own output as hidden
  for (int j = 1; j < k; ++j) {
    const int p = n - 2 + j;
    Batch b;
    b.tokens = {guess.back()};
    b.pos = {p - S.origin};
    if (S.origin != 0 || delta != 0) b.pos_streams.pos = {p + delta, p + delta, p + delta};
    arena_.reset();
    const Tensor hidden = Tensor::from_data(DType::F32, {1, E_}, last_h.data(), nullptr);
    Tensor out;
    PIPIT_ASSIGN_OR_RETURN(Tensor logits, run(slot, b, hidden, &out));
    std::memcpy(last_h.data(), out.ptr<float>(), size_t(E_) * 4);
    guess.push_back(argmax(std::span<const float>(logits.ptr<float>(), size_t(logits.dim(-1)))));
  }
  return guess;
}

}  // namespace pipit
