// The generation loop and the text stream (detokenization + stop strings).
#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "runtime/multimodal.h"
#include "runtime/sequence.h"
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

// One Session, one request: its tokens are chosen, streamed and ended by a Sequence, as the Engine's are.
Result<GenerateResult> generate_impl(Session& s, const Tokenizer* tok, const PromptInput& in, const GenerateParams& p,
                                     const std::function<bool(const std::string&, int32_t)>& on_text) {
  if (p.grammar && !tok) return Error::invalid_argument("[generate] a grammar needs the model's tokenizer");
  const std::span<const int32_t> prompt = in.tokens;
  if (in.n_held < 0 || (in.n_held > 0 && size_t(in.n_held) >= prompt.size()) || in.n_held > s.n_past())
    return Error::internal("[generate] {} of a prompt of {} tokens held by a context of {}", in.n_held, prompt.size(),
                           s.n_past());
  const int n_base = s.n_past() - in.n_held;  // the context before this prompt (C API eval() calls before it)
  Sequence seq(s.model(), tok, prompt, p, s.n_ctx(), n_base, on_text);
  GenerateResult& res = seq.result();
  res.n_cached = in.n_held;
  res.n_prefilled = int(prompt.size()) - in.n_held;
  const int64_t V = s.model().info().n_vocab;

  auto t0 = Clock::now();
  Result<Tensor> r = Status::ok();
  if (in.media) {
    PIPIT_ASSIGN_OR_RETURN(MultimodalPrompt rest, multimodal_suffix(*in.media, in.n_held));
    r = s.eval(rest);
  } else {
    r = s.eval(prompt.subspan(size_t(in.n_held)));
  }
  if (!r.is_ok()) return r.status();
  res.prompt_ms = ms_since(t0);
  auto t1 = Clock::now();
  if (p.max_tokens <= 0) return res;
  std::optional<Speculator> spec;
  if (p.spec.n_draft > 0) spec.emplace(p.spec, n_base);
  bool ended = seq.emit(std::span<const float>(r->ptr<float>(), size_t(V)));
  while (!ended) {
    // The context holds the history but its last token, which goes in now with the guesses. After a rejection that
    // took a recurrent state back to its checkpoint it lacks the tokens accepted before it too (`lag` in all): they
    // go in with the last one in a pass without guesses (a guess there would rewind the state to before them again),
    // which costs about one decode pass and emits a token, where evaluating them on their own would emit none. At
    // most what max_tokens and the context leave room for is guessed (the token after the last guess needs no row).
    const auto& h = seq.history();
    const int in_ctx = s.n_past() - n_base, lag = int(h.size()) - in_ctx;
    if (in_ctx < int(prompt.size()) || lag < 1)
      return Error::internal("[speculative] the context holds {} of the generation's {} tokens", in_ctx, h.size());
    std::vector<int32_t> guesses;
    if (spec && lag == 1) {
      const int k = std::min({p.spec.n_draft, p.max_tokens - int(res.tokens.size()) - 1,
                              s.n_ctx() - s.n_past() - lag, 16});
      PIPIT_ASSIGN_OR_RETURN(guesses, spec->propose(h, std::max(0, k)));
    }
    std::vector<int32_t> batch(h.begin() + in_ctx, h.end());
    batch.insert(batch.end(), guesses.begin(), guesses.end());
    const int n0 = s.n_past();
    if (!guesses.empty()) s.checkpoint();  // a recurrent state comes back here after a rejection
    const bool rows = lag > 1 || !guesses.empty();
    r = s.eval(batch, /*all_logits=*/rows);
    if (!r.is_ok()) return r.status();
    const Sequence::Verified v = seq.verify(r->ptr<float>() + (rows ? int64_t(lag - 1) * V : 0), V, guesses);
    ended = v.ended;
    // keep the fed tokens and the accepted guesses; a recurrent state goes back to the checkpoint (n0), and the
    // next pass feeds them again (context position i holds history()[i - n_base])
    const int keep = n0 + lag + v.accepted;
    if (s.n_past() > keep) s.truncate(keep);
  }
  if (spec) {
    // accepted guesses after the last emitted token are not part of the answer: the context ends where it would
    // without guesses (the prompt, then every emitted token but the last, which is in only after an EOS)
    const int first = n_base + int(prompt.size());
    const int want = first + int(res.tokens.size()) - (res.reason == StopReason::kEos ? 0 : 1);
    if (s.n_past() > want) s.truncate(std::max(want, first));
    if (s.n_past() < first) return Error::internal("[speculative] the context went back further than this generation");
    if (s.n_past() < want) {  // a recurrent state rewound to a checkpoint: the tokens after it go in again
      const auto& h = seq.history();
      auto rr = s.eval(std::span<const int32_t>(h.data() + (s.n_past() - n_base), size_t(want - s.n_past())));
      if (!rr.is_ok()) return rr.status();
    }
  }
  res.gen_ms = ms_since(t1);
  return std::move(res);
}

}  // namespace

Result<GenerateResult> generate(Session& s, const Tokenizer* tok, const PromptInput& prompt, const GenerateParams& p,
                                const std::function<bool(const std::string&, int32_t)>& on_text) {
  return generate_impl(s, tok, prompt, p, on_text);
}

Result<GenerateResult> generate(Session& s, const Tokenizer* tok, std::span<const int32_t> prompt,
                                const GenerateParams& p,
                                const std::function<bool(const std::string&, int32_t)>& on_text) {
  return generate_impl(s, tok, PromptInput{prompt}, p, on_text);
}

Result<GenerateResult> generate(Session& s, const Tokenizer* tok, const MultimodalPrompt& prompt,
                                const GenerateParams& p,
                                const std::function<bool(const std::string&, int32_t)>& on_text) {
  return generate_impl(s, tok, PromptInput{prompt.tokens, &prompt}, p, on_text);
}

}  // namespace pipit
