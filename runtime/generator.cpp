// The generation loop.
#include "runtime/generator.h"

#include <algorithm>
#include <chrono>

#ifdef PIPIT_WITH_TOKENIZER
#include "tokenizer/tokenizer.h"
#endif

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

Result<GenerateResult> generate(Session& s, const Tokenizer* tok, std::span<const int32_t> prompt,
                                const GenerateParams& p,
                                const std::function<bool(const std::string&, int32_t)>& on_text) {
  GenerateResult res;
  res.n_prompt = int(prompt.size());
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  const auto& eos = p.eos_ids.empty() ? s.model().info().eos_ids : p.eos_ids;
  std::vector<std::string> stop;
  for (auto& x : p.stop)
    if (!x.empty()) stop.push_back(x);
  Sampler sampler(p.sampler);
#ifdef PIPIT_WITH_TOKENIZER
  std::unique_ptr<StreamDecoder> dec = tok ? std::make_unique<StreamDecoder>(*tok, true) : nullptr;
  // prime with the prompt so the first generated piece decodes as it would after the prompt (leading-space rules)
  if (dec) {
    for (int32_t id : prompt) dec->push(id);
  }
#endif
  std::string pending;  // decoded text not yet handed to the callback (may hold a stop-string prefix)
  auto t0 = Clock::now();
  auto r = s.eval(prompt);
  if (!r.is_ok()) return r.status();
  res.prompt_ms = ms_since(t0);
  auto t1 = Clock::now();
  for (int i = 0; i < p.max_tokens; ++i) {
    const int64_t V = s.model().info().n_vocab;
    int32_t next = sampler.sample(std::span<const float>(r->ptr<float>(), size_t(V)), history);
    if (!p.ignore_eos && std::find(eos.begin(), eos.end(), next) != eos.end()) {
      res.reason = StopReason::kEos;
      break;
    }
    res.tokens.push_back(next);
    history.push_back(next);
    std::string piece;
#ifdef PIPIT_WITH_TOKENIZER
    if (dec) piece = dec->push(next);
#endif
    pending += piece;
    bool stopped = false;
    if (!stop.empty()) {
      size_t best = std::string::npos;
      for (auto& st : stop) best = std::min(best, pending.find(st));
      if (best != std::string::npos) {
        pending.resize(best);
        stopped = true;
      }
    }
    size_t keep = stopped ? 0 : held_suffix(pending, stop);
    std::string out = pending.substr(0, pending.size() - keep);
    pending.erase(0, out.size());
    res.text += out;
    if (on_text && !on_text(out, next)) {
      res.reason = StopReason::kCallback;
      break;
    }
    if (stopped) {
      res.reason = StopReason::kStopString;
      break;
    }
    if (i + 1 == p.max_tokens) break;
    if (s.n_past() >= s.n_ctx()) {
      res.reason = StopReason::kContext;
      break;
    }
    r = s.eval(std::span<const int32_t>(&next, 1));
    if (!r.is_ok()) return r.status();
  }
  if (res.reason != StopReason::kStopString && res.reason != StopReason::kCallback) {
#ifdef PIPIT_WITH_TOKENIZER
    if (dec) pending += dec->flush();
#endif
    res.text += pending;
    if (on_text && !pending.empty()) on_text(pending, -1);
  }
  res.gen_ms = ms_since(t1);
  return res;
}

}  // namespace pipit
