// Session: chunked prefill + decode over a single-slot KV cache.
#include "runtime/session.h"

#include <algorithm>
#include <cstring>

namespace pipit {

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
      arena_(size_t(1) << 22),
      kv_(model.info().kv, 1, default_ctx(model, opt.n_ctx), opt.kv_dtype, std::max(1, opt.n_batch)) {
  ctx_.arena = &arena_;
  ctx_.pool = pool_.get();
  ctx_.k = &kernels();
}

Result<Tensor> Session::eval(std::span<const int32_t> tokens, bool all_logits) {
  if (tokens.empty()) return Error::invalid_argument("[eval] no tokens to evaluate");
  if (int64_t(n_past_) + int64_t(tokens.size()) > kv_.n_ctx())
    return Error::out_of_range("[eval] {} tokens after {} already in the context exceed the context size {} "
                               "(use a larger -c/--ctx or a shorter prompt)",
                               tokens.size(), n_past_, kv_.n_ctx());
  const int64_t n_vocab = model_.info().n_vocab;
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab) return Error::invalid_argument("[eval] token id {} outside the vocabulary [0, {})", t, n_vocab);
  const int64_t chunk = std::max(1, opt_.n_batch);
  if (all_logits) all_logits_.resize(tokens.size() * size_t(n_vocab));
  Tensor logits;
  for (int64_t b = 0; b < int64_t(tokens.size()); b += chunk) {
    const int64_t n = std::min<int64_t>(chunk, int64_t(tokens.size()) - b);
    arena_.reset();
    Batch batch = Batch::single(tokens.subspan(size_t(b), size_t(n)), n_past_, 0, all_logits);
    PIPIT_TRY(model_.forward(ctx_, batch, kv_, &logits));
    n_past_ += int(n);
    if (all_logits) std::memcpy(all_logits_.data() + b * n_vocab, logits.data(), size_t(n * n_vocab) * 4);
  }
  if (all_logits)
    return Tensor::from_data(DType::F32, {int64_t(tokens.size()), n_vocab}, all_logits_.data(), nullptr);
  return logits;
}

}  // namespace pipit
