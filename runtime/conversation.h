// Conversation: a Session that knows what its context holds, so that each turn's prompt (the whole conversation
// again, as a chat template renders it: earlier messages, the answers, the new message) is evaluated only from
// where it differs. The one prefix-reuse mechanism of `pipit chat`, the C API and Python (the Engine's requests use
// the same PromptCache): the context's own prefix first, then a longer one from the prompt cache shared by a
// model's sessions, if any.
//
// What the context holds is kept as PromptCache keys (runtime/prompt_cache.h): text tokens as themselves, a media
// row (image, video, audio) as a hash of its features and positions. So a turn after an image keeps the image's KV
// when the image is still the same, and a changed image (or a template that rewrites earlier turns) is evaluated
// again from the first position that differs. The whole prompt is the request's history (generate()'s
// PromptInput): penalties, n-gram bans and prompt lookup see all of it, and the answer is the one a fresh session
// gives, whatever was reused.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/generator.h"

namespace pipit {

class PromptCache;
struct MultimodalPrompt;

class Conversation {
 public:
  using OnText = std::function<bool(const std::string& piece, int32_t token)>;

  // `cache` may be null (only this context is reused). The session must hold nothing or what a Conversation put
  // in it (other evals on it make the next turn start over).
  explicit Conversation(Session& s, std::shared_ptr<PromptCache> cache = nullptr);

  // The answer to `prompt`, the whole conversation so far. After it the context holds the prompt and the answer's
  // tokens but possibly the last (the next turn evaluates it with its own); the context is saved in the prompt
  // cache (text contexts). On an error the turn is forgotten: a cancelled prompt keeps the text evaluated before
  // the cancel, any other error empties the context.
  Result<GenerateResult> generate(const Tokenizer* tok, std::span<const int32_t> prompt, const GenerateParams& p,
                                  const OnText& on_text = {});
  Result<GenerateResult> generate(const Tokenizer* tok, const MultimodalPrompt& prompt, const GenerateParams& p,
                                  const OnText& on_text = {});
  // The logits after `tokens` (the whole sequence: what the context holds and the new tokens), [1, n_vocab],
  // evaluating only what is new.
  Result<Tensor> eval(std::span<const int32_t> tokens);

  void reset();
  // The tokens the context holds, in order (media rows as their placeholder tokens).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Prompt tokens the last call did not evaluate (kept in the context, or restored from the prompt cache).
  int n_reused() const { return n_reused_; }
  void set_cache(std::shared_ptr<PromptCache> cache) { cache_ = std::move(cache); }
  Session& session() { return s_; }

 private:
  // Keeps the longest prefix of `key` the context holds (or the cache has), at most key.size() - 1 positions so
  // that the last token gives fresh logits. Returns how many.
  int reuse(std::span<const uint64_t> key);
  Result<GenerateResult> run(const Tokenizer* tok, std::span<const int32_t> tokens, const MultimodalPrompt* mm,
                             const GenerateParams& p, const OnText& on_text);

  Session& s_;
  std::shared_ptr<PromptCache> cache_;
  std::vector<uint64_t> key_;    // one per position the context holds
  std::vector<int32_t> tokens_;  // the same positions' tokens
  int n_reused_ = 0;
};

}  // namespace pipit
