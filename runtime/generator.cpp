// The generation loop and the text stream (detokenization + stop strings).
#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>

#include "runtime/multimodal.h"
#include "tokenizer/tokenizer.h"  // declarations only; used when PIPIT_WITH_TOKENIZER

namespace pipit {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kLength: return "length";
    case StopReason::kEos: return "stop";
    case StopReason::kStopString: return "stop";
    case StopReason::kCallback: return "cancelled";
    case StopReason::kContext: return "length";
  }
  return "stop";
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Length of the longest suffix of `text` that is a proper prefix of some stop string (must be held back).
size_t held_suffix(const std::string& text, const std::vector<std::string>& stop) {
  size_t hold = 0;
  for (const auto& s : stop)
    for (size_t n = std::min(s.size() - 1, text.size()); n > hold; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  return hold;
}

}  // namespace

TextStream::TextStream(const Tokenizer* tok, std::span<const int32_t> prompt, std::vector<std::string> stop) {
  for (auto& s : stop)
    if (!s.empty()) stop_.push_back(std::move(s));
#ifdef PIPIT_WITH_TOKENIZER
  if (tok) {
    dec_ = std::make_unique<StreamDecoder>(*tok, /*skip_special_tokens=*/true);
    for (int32_t id : prompt) dec_->push(id);  // prime; the prompt's text is not output
  }
#endif
}

TextStream::~TextStream() = default;

TextStream::Step TextStream::push(int32_t token) {
  Step st{"", false};
#ifdef PIPIT_WITH_TOKENIZER
  if (dec_) pending_ += dec_->push(token);
#endif
  size_t cut = std::string::npos;
  for (auto& s : stop_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    st.text = pending_.substr(0, cut);
    st.stopped = true;
    pending_.clear();
    return st;
  }
  const size_t keep = held_suffix(pending_, stop_);
  st.text = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, st.text.size());
  return st;
}

std::string TextStream::finish() {
#ifdef PIPIT_WITH_TOKENIZER
  if (dec_) pending_ += dec_->flush();
#endif
  std::string out;
  out.swap(pending_);
  return out;
}

bool is_eos(const GenerateParams& p, const Model& m, int32_t token) {
  if (p.ignore_eos) return false;
  const auto& eos = p.eos_ids.empty() ? m.info().eos_ids : p.eos_ids;
  return std::find(eos.begin(), eos.end(), token) != eos.end();
}

namespace {

// mm: the same prompt with images (its tokens are `prompt`), or null.
Result<GenerateResult> generate_impl(Session& s, const Tokenizer* tok, std::span<const int32_t> prompt,
                                     const MultimodalPrompt* mm, const GenerateParams& p,
                                     const std::function<bool(const std::string&, int32_t)>& on_text) {
  GenerateResult res;
  res.n_prompt = int(prompt.size());
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  Sampler sampler(p.sampler);
  TextStream text(tok, prompt, p.stop);
  const int64_t V = s.model().info().n_vocab;

  auto t0 = Clock::now();
  auto r = mm ? s.eval(*mm) : s.eval(prompt);
  if (!r.is_ok()) return r.status();
  res.prompt_ms = ms_since(t0);
  auto t1 = Clock::now();
  bool ended_early = false;  // stop string or callback: no trailing text
  const int n_base = s.n_past() - int(prompt.size());  // the context before this prompt (C API turns)
  std::optional<Speculator> spec;
  if (p.spec.n_draft > 0) spec.emplace(p.spec, p.sampler);
  std::deque<int32_t> ready;  // tokens a speculative step produced, to emit before the next step
  int32_t next = sampler.sample(std::span<const float>(r->ptr<float>(), size_t(V)), history);
  for (int i = 0; i < p.max_tokens; ++i) {
    if (i > 0) {
      if (ready.empty()) {
        if (spec) {
          // guesses: at most what max_tokens and the context leave room for (the next token needs no row)
          const int k = std::min({p.spec.n_draft, p.max_tokens - i - 1, s.n_ctx() - s.n_past() - 1, 16});
          auto got = spec->step(s, sampler, history, std::max(0, k));
          if (!got.is_ok()) return got.status();
          ready.assign(got->begin(), got->end());
        } else {
          r = s.eval(std::span<const int32_t>(&history.back(), 1));
          if (!r.is_ok()) return r.status();
          ready.push_back(sampler.sample(std::span<const float>(r->ptr<float>(), size_t(V)), history));
        }
      }
      next = ready.front();
      ready.pop_front();
    }
    if (is_eos(p, s.model(), next)) {
      res.reason = StopReason::kEos;
      break;
    }
    res.tokens.push_back(next);
    history.push_back(next);
    auto step = text.push(next);
    res.text += step.text;
    if (on_text && !on_text(step.text, next)) {
      res.reason = StopReason::kCallback;
      ended_early = true;
      break;
    }
    if (step.stopped) {
      res.reason = StopReason::kStopString;
      ended_early = true;
      break;
    }
    if (i + 1 == p.max_tokens) break;
    // the context holds the tokens before this one (with guesses it may already hold more)
    if (n_base + int64_t(prompt.size()) + int64_t(res.tokens.size()) - 1 >= s.n_ctx()) {
      res.reason = StopReason::kContext;
      break;
    }
  }
  if (spec) {
    res.spec = spec->stats();
    // accepted guesses after the last emitted token are not part of the answer: the context ends where it would
    // without guesses (the prompt, then every emitted token but the last, which is in only after an EOS)
    const int want = n_base + int(prompt.size()) + int(res.tokens.size()) - (res.reason == StopReason::kEos ? 0 : 1);
    if (s.n_past() > want) s.truncate(std::max(want, n_base + int(prompt.size())));
  }
  if (!ended_early) {
    std::string tail = text.finish();
    res.text += tail;
    if (on_text && !tail.empty()) on_text(tail, -1);
  }
  res.gen_ms = ms_since(t1);
  return res;
}

}  // namespace

Result<GenerateResult> generate(Session& s, const Tokenizer* tok, std::span<const int32_t> prompt,
                                const GenerateParams& p,
                                const std::function<bool(const std::string&, int32_t)>& on_text) {
  return generate_impl(s, tok, prompt, nullptr, p, on_text);
}

Result<GenerateResult> generate(Session& s, const Tokenizer* tok, const MultimodalPrompt& prompt,
                                const GenerateParams& p,
                                const std::function<bool(const std::string&, int32_t)>& on_text) {
  return generate_impl(s, tok, prompt.tokens, &prompt, p, on_text);
}

}  // namespace pipit
