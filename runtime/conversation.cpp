// Conversation (see conversation.h).
#include "runtime/conversation.h"

#include <algorithm>

#include "runtime/multimodal.h"
#include "runtime/prompt_cache.h"

namespace pipit {

Conversation::Conversation(Session& s, std::shared_ptr<PromptCache> cache) : s_(s), cache_(std::move(cache)) {}

void Conversation::reset() {
  s_.reset();
  key_.clear();
  tokens_.clear();
}

int Conversation::reuse(std::span<const uint64_t> key) {
  // what the context holds is known only while its length is that of key_ (someone else's eval: start over)
  size_t n = 0;
  if (int64_t(key_.size()) == s_.n_past())
    while (n < key.size() && n < key_.size() && key[n] == key_[n]) ++n;
  if (n == key.size() && n > 0) --n;  // the last token goes in again: its logits are the answer's first row
  // the session may keep less than asked (a sliding-window ring, a recurrent state's snapshot, an image's start)
  s_.truncate(int(n));
  if (cache_ && !key.empty()) s_.restore_from(*cache_, key, int(key.size()) - 1);
  n = size_t(s_.n_past());
  key_.assign(key.begin(), key.begin() + long(n));
  tokens_.resize(std::min(tokens_.size(), n));  // the caller sets the rest from the prompt
  return int(n);
}

Result<GenerateResult> Conversation::run(const Tokenizer* tok, std::span<const int32_t> tokens,
                                         const MultimodalPrompt* mm, const GenerateParams& p, const OnText& on_text) {
  const std::vector<uint64_t> key = PromptCache::make_key(tokens, mm);
  const int held = reuse(key);
  n_reused_ = held;
  tokens_.assign(tokens.begin(), tokens.begin() + held);
  GenerateParams q = p;
  q.spec.context = {};  // the prompt is the whole conversation: nothing comes before it
  Result<GenerateResult> r = pipit::generate(s_, tok, PromptInput{tokens, mm, held}, q, on_text);
  const size_t n_past = size_t(s_.n_past());
  if (!r.is_ok()) {
    // a cancelled text prompt keeps its chunks evaluated so far; media spans are recorded only when their prompt
    // is done, so a prompt with media goes back to nothing
    if (r.status().code() == Code::kCancelled && !mm && n_past <= key.size()) {
      key_.assign(key.begin(), key.begin() + long(n_past));
      tokens_.assign(tokens.begin(), tokens.begin() + long(n_past));
    } else {
      reset();
    }
    return r;
  }
  // the context: the prompt, then the answer's tokens that were fed back (all but possibly the last)
  const size_t n_fed = std::min(r->tokens.size(), n_past > tokens.size() ? n_past - tokens.size() : 0);
  key_ = key;
  tokens_.assign(tokens.begin(), tokens.end());
  for (size_t i = 0; i < n_fed; ++i) {
    key_.push_back(uint64_t(uint32_t(r->tokens[i])));
    tokens_.push_back(r->tokens[i]);
  }
  key_.resize(std::min(key_.size(), n_past));
  tokens_.resize(key_.size());
  if (cache_) s_.save_to(*cache_, key_);  // (text contexts only: Session::save_to)
  return r;
}

Result<GenerateResult> Conversation::generate(const Tokenizer* tok, std::span<const int32_t> prompt,
                                              const GenerateParams& p, const OnText& on_text) {
  return run(tok, prompt, nullptr, p, on_text);
}

Result<GenerateResult> Conversation::generate(const Tokenizer* tok, const MultimodalPrompt& prompt,
                                              const GenerateParams& p, const OnText& on_text) {
  return run(tok, prompt.tokens, &prompt, p, on_text);
}

Result<Tensor> Conversation::eval(std::span<const int32_t> tokens) {
  if (tokens.empty()) return Error::invalid_argument("[eval] no tokens to evaluate");
  const std::vector<uint64_t> key = PromptCache::make_key(tokens, nullptr);
  const int held = reuse(key);
  n_reused_ = held;
  Result<Tensor> r = s_.eval(tokens.subspan(size_t(held)));
  if (!r.is_ok()) {
    reset();
    return r;
  }
  key_ = key;
  tokens_.assign(tokens.begin(), tokens.end());
  return r;
}

}  // namespace pipit
