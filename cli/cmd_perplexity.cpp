// `pipit perplexity`: the quality figure quantization is judged by, computed as llama.cpp's llama-perplexity does
// so the two can be compared on the same text: the text tokenized once (BOS first where the tokenizer adds one),
// cut into chunks of -c tokens, each chunk evaluated from an empty context with its first token replaced by BOS,
// and the negative log-likelihood of the tokens of each chunk's second half scored (every scored token sees at least
// c/2 tokens of context). PPL = exp(mean NLL); the +/- is the standard error of that mean, scaled by PPL.
//
// --kl-divergence REF: the same chunks through a reference model (the f32/f16 checkpoint of a quantized file) in
// the same pass, with the figures quantization reports use: mean KL(ref || model) per token, the fraction of tokens
// whose top-1 token agrees, the mean change of the correct token's probability, and both perplexities.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "tokenizer/tokenizer.h"

namespace pipit::cli {

namespace {

// log p(token) under `logits`, with the max and the sum of exponentials as llama-perplexity forms them.
double log_prob(std::span<const float> logits, int32_t token) {
  float mx = logits[0];
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(v - mx);
  return double(logits[size_t(token)] - mx) - std::log(sum);
}

// log-softmax of a row, in double.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  float mx = logits[0];
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v - mx));
  const double lse = std::log(sum);
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i] - mx) - lse;
}

size_t argmax(std::span<const float> v) { return size_t(std::max_element(v.begin(), v.end()) - v.begin()); }

struct Mean {  // running mean and the standard error of it
  double sum = 0, sum2 = 0;
  int64_t n = 0;
  void add(double x) {
    sum += x;
    sum2 += x * x;
    ++n;
  }
  double mean() const { return n ? sum / double(n) : 0; }
  double stderr_of_mean() const {
    if (n < 2) return 0;
    const double m = mean(), var = sum2 / double(n) - m * m;
    return var > 0 ? std::sqrt(var / double(n - 1)) : 0;
  }
};

int cmd_perplexity(Args& a) {
  add_model_options(a);
  a.option({"-f", "--file"}, "the text to score (\"-\": stdin)");
  a.option({"--chunks"}, "score at most this many chunks (default: all)");
  a.option({"--kl-divergence"}, "a reference model (e.g. the f32/f16 checkpoint of a quantized -m): KL divergence, "
                                "top-1 agreement and both perplexities on the same chunks");
  a.flag({"--json"}, "print one JSON object with the figures at the end");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || !a.has("-m") || !a.has("-f")) {
    std::printf("usage: pipit perplexity -m MODEL -f TEXT_FILE [-c 512] [--chunks N] [--kl-divergence REF_MODEL]\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  auto text = read_prompt_file(a.get("-f"));
  if (!text) return fail(a, text.status().message());
  auto lo = load_options(a, /*need_tokenizer=*/true);
  if (!lo) return fail(a, lo.status().message());
  auto lm = load_model(a.get("-m"), *lo);
  if (!lm) return fail(a, lm.status().message());
  auto so = session_options(a);
  if (!so) return fail(a, so.status().message());
  if (auto st = check_kv_type(*lm->model, so->kv_dtype); !st) return fail(a, st.message());
  const int n_ctx = so->n_ctx > 0 ? so->n_ctx : 512;
  if (n_ctx < 4) return fail(a, fmt("-c {} is too small to score anything (at least 4)", n_ctx));
  so->n_ctx = n_ctx;

  std::optional<LoadedModel> ref;
  if (a.has("--kl-divergence")) {
    auto rlo = load_options(a);  // the reference needs no tokenizer: the model's ids are scored
    if (!rlo) return fail(a, rlo.status().message());
    auto r = load_model(a.get("--kl-divergence"), *rlo);
    if (!r) return fail(a, "--kl-divergence: " + r.status().message());
    if (r->model->info().n_vocab != lm->model->info().n_vocab)
      return fail(a, fmt("--kl-divergence: the reference has {} tokens in its vocabulary, the model {}",
                         r->model->info().n_vocab, lm->model->info().n_vocab));
    ref = std::move(r).value();
  }

  auto ids = lm->tokenizer->encode(*text, /*add_special_tokens=*/true);
  if (!ids) return fail(a, ids.status().message());
  const int32_t bos = lm->model->info().bos_id;
  const bool add_bos = bos >= 0 && !ids->empty() && (*ids)[0] == bos;
  const int64_t n_chunk_max = int64_t(ids->size()) / n_ctx;
  if (n_chunk_max < 2 && !a.has("--chunks"))
    std::fprintf(stderr, "[perplexity] note: %zu tokens make %lld chunk(s) of %d (llama-perplexity asks for 2)\n",
                 ids->size(), static_cast<long long>(n_chunk_max), n_ctx);
  if (n_chunk_max < 1)
    return fail(a, fmt("{} tokenizes to {} tokens, fewer than one chunk of -c {}", a.get("-f"), ids->size(), n_ctx));
  int64_t n_chunk = n_chunk_max;
  if (a.has("--chunks")) {
    auto c = a.get_int("--chunks");
    if (!c) return fail(a, c.status().message());
    if (*c < 1) return fail(a, "--chunks must be at least 1");
    n_chunk = std::min<int64_t>(*c, n_chunk_max);
  }

  auto pool = std::make_shared<ThreadPool>(so->n_threads > 0 ? so->n_threads : ThreadPool::default_threads());
  auto sp = Session::create(*lm->model, *so, pool);
  if (!sp) return fail(a, sp.status().message());
  std::unique_ptr<Session> ref_session;
  if (ref) {
    auto rs = Session::create(*ref->model, *so, pool);
    if (!rs) return fail(a, "--kl-divergence: " + rs.status().message());
    ref_session = std::move(rs).value();
  }
  install_interrupt_handler();
  const bool json = a.get_flag("--json");
  const int64_t V = lm->model->info().n_vocab;
  const int first = n_ctx / 2;
  std::fprintf(stderr, "[perplexity] %zu tokens, %lld chunks of %d, scoring the last %d of each%s\n", ids->size(),
               static_cast<long long>(n_chunk), n_ctx, n_ctx - first - 1, add_bos ? " (BOS first)" : "");
  Mean nll, ref_nll, kld, dp;
  int64_t same_top = 0;
  double max_kld = 0;
  std::vector<double> lp, lq;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < n_chunk; ++c) {
    std::vector<int32_t> chunk(ids->begin() + c * n_ctx, ids->begin() + (c + 1) * n_ctx);
    if (add_bos) chunk[0] = bos;
    (*sp)->reset();
    auto logits = (*sp)->eval(chunk, /*all_logits=*/true);
    if (!logits && logits.status().code() == Code::kCancelled && interrupted())
      return interrupted_exit(a, fmt("after {} of {} chunks", c, n_chunk));
    if (!logits) return fail(a, logits.status().message());
    Result<Tensor> ref_logits = Error::internal("no reference");
    if (ref_session) {
      ref_session->reset();
      ref_logits = ref_session->eval(chunk, /*all_logits=*/true);
      if (!ref_logits) return fail(a, "--kl-divergence: " + ref_logits.status().message());
    }
    for (int j = first; j < n_ctx - 1; ++j) {
      const int32_t next = (*ids)[size_t(c * n_ctx + j + 1)];
      const std::span<const float> row(logits->ptr<float>() + int64_t(j) * V, size_t(V));
      if (!ref_session) {
        nll.add(-log_prob(row, next));
        continue;
      }
      const std::span<const float> rrow(ref_logits->ptr<float>() + int64_t(j) * V, size_t(V));
      log_softmax(row, lq);
      log_softmax(rrow, lp);
      double k = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double p = std::exp(lp[size_t(v)]);
        if (p > 0) k += p * (lp[size_t(v)] - lq[size_t(v)]);
      }
      kld.add(k);
      max_kld = std::max(max_kld, k);
      nll.add(-lq[size_t(next)]);
      ref_nll.add(-lp[size_t(next)]);
      dp.add(std::exp(lq[size_t(next)]) - std::exp(lp[size_t(next)]));
      same_top += argmax(row) == argmax(rrow);
    }
    if (!json) {
      std::printf("[%lld]%.4f,", static_cast<long long>(c + 1), std::exp(nll.mean()));
      std::fflush(stdout);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double ppl = std::exp(nll.mean()), ppl_err = nll.stderr_of_mean() * ppl;
  const double tok_s = double(n_chunk * n_ctx * (ref ? 2 : 1)) / secs;
  if (json) {
    nlohmann::json j = {{"ppl", ppl}, {"ppl_stderr", ppl_err}, {"tokens_scored", nll.n}, {"chunks", n_chunk},
                        {"n_ctx", n_ctx}, {"add_bos", add_bos}, {"seconds", secs}};
    if (ref) {
      j["ref_ppl"] = std::exp(ref_nll.mean());
      j["kld_mean"] = kld.mean();
      j["kld_stderr"] = kld.stderr_of_mean();
      j["kld_max"] = max_kld;
      j["same_top1"] = double(same_top) / double(kld.n);
      j["delta_p_mean"] = dp.mean();
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f  (%lld tokens scored, %.1f s, %.0f tok/s)\n", ppl, ppl_err,
              static_cast<long long>(nll.n), secs, tok_s);
  if (ref) {
    const double rppl = std::exp(ref_nll.mean());
    std::printf("reference PPL = %.4f; PPL ratio %.4f\n", rppl, ppl / rppl);
    std::printf("KL divergence: mean %.6f +/- %.6f, max %.6f\n", kld.mean(), kld.stderr_of_mean(), max_kld);
    std::printf("same top-1 token: %.3f%%; mean change of the correct token's probability %+.4f%%\n",
                100.0 * double(same_top) / double(kld.n), 100.0 * dp.mean());
  }
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("perplexity", "perplexity of a text (as llama-perplexity), KL divergence against a reference",
                       cmd_perplexity);

}  // namespace pipit::cli
