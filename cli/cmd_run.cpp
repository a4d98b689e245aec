// `pipit run`: generate a continuation of a prompt (through the model's chat template when it has one), streamed
// to stdout as it is produced; load time and speeds go to stderr.
#include <chrono>
#include <cstdio>
#include <optional>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/image_args.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pipit::cli {

namespace {

int cmd_run(Args& a) {
  add_model_options(a);
  add_sampling_options(a);
  add_image_options(a);
  add_speculative_options(a);
  a.option({"-p", "--prompt"}, "prompt text");
  a.option({"-f", "--file"}, "read the prompt from a file");
  a.option({"-s", "--system"}, "system message (chat template only)");
  a.flag({"--no-template"}, "feed the prompt raw, without the chat template");
  a.flag({"--no-echo"}, "raw mode: do not print the prompt before the continuation");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || !a.has("-m") || (!a.has("-p") && !a.has("-f"))) {
    std::printf("usage: pipit run -m MODEL -p PROMPT [options]\n%s", a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  std::string prompt = a.get("-p");
  if (a.has("-f")) {
    auto t = read_prompt_file(a.get("-f"));
    if (!t) return fail(a, t.status().message());
    prompt = *t;
  }
  auto so = session_options(a);
  if (!so) return fail(a, so.status().message());
  install_interrupt_handler();
  auto gp = generate_params(a);
  if (!gp) return fail(a, gp.status().message());

  auto t0 = std::chrono::steady_clock::now();
  auto lo = load_options(a, true);
  if (!lo) return fail(a, lo.status().message());
  auto lm = load_model(a.get("-m"), *lo);
  if (!lm) return fail(a, lm.status().message());
  if (auto st = check_kv_type(*lm->model, so->kv_dtype); !st) return fail(a, st.message());
  // The session (its memory plan) before the prompt is tokenized: a context that cannot be held is refused at once,
  // not after a minute of tokenizing a long prompt.
  auto pool = std::make_shared<ThreadPool>(so->n_threads > 0 ? so->n_threads : ThreadPool::default_threads());
  auto sp = Session::create(*lm->model, *so, pool);
  if (!sp) return fail(a, sp.status().message());
  Session& s = **sp;
  auto spec = speculative_setup(a, *lm->model, *so, pool);
  if (!spec) return fail(a, spec.status().message());
  gp->spec = (*spec)->params;
  const Tokenizer& tok = *lm->tokenizer;
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  const bool use_template = !a.get_flag("--no-template") && !tok.config().chat_template.empty();
  Result<std::vector<int32_t>> ids = std::vector<int32_t>{};
  if (use_template) {
    nlohmann::json msgs = nlohmann::json::array();
    if (a.has("-s")) msgs.push_back({{"role", "system"}, {"content", a.get("-s")}});
    if (has_images(a)) {  // the template puts each image where its {"type": "image"} item is
      nlohmann::json content = nlohmann::json::array();
      for (size_t i = 0; i < a.get_all("--image").size(); ++i) content.push_back({{"type", "image"}});
      content.push_back({{"type", "text"}, {"text", prompt}});
      msgs.push_back({{"role", "user"}, {"content", content}});
    } else {
      msgs.push_back({{"role", "user"}, {"content", prompt}});
    }
    auto text = apply_chat_template(tok, msgs, /*add_generation_prompt=*/true);
    if (!text) return fail(a, text.status().message());
    ids = tok.encode(*text, /*add_special_tokens=*/false);
  } else {
    ids = tok.encode(prompt, /*add_special_tokens=*/true);
  }
  if (!ids) return fail(a, ids.status().message());
  if (ids->empty()) return fail(a, "the prompt is empty after tokenization");

  std::optional<MultimodalPrompt> mm;  // --image: features for the image placeholders of the prompt
  if (has_images(a)) {
    auto p = image_prompt(a, *lm, with_image_placeholders(*lm->model, *ids, a.get_all("--image").size()), *pool);
    if (!p) return fail(a, p.status().message());
    mm = std::move(p).value();
  }
  const size_t n_prompt = mm ? mm->tokens.size() : ids->size();
  if (int64_t(n_prompt) >= s.n_ctx())
    return fail(a, fmt("the prompt has {} tokens, which does not fit the context of {} (use -c to raise it)",
                       n_prompt, s.n_ctx()));
  if (!use_template && !a.get_flag("--no-echo")) {
    std::fputs(tok.decode(*ids, /*skip_special_tokens=*/true).c_str(), stdout);
    std::fflush(stdout);
  }
  auto print = [](const std::string& piece, int32_t) {
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
    return !interrupted() && !std::ferror(stdout);  // stdout full or closed: no point in generating on
  };
  s.set_progress(prefill_progress());
  auto res = mm ? generate(s, &tok, *mm, *gp, print) : generate(s, &tok, *ids, *gp, print);
  std::fputs("\n", stdout);
  if (const std::string err = stdout_error(); !err.empty()) return fail(a, err);
  if (!res && res.status().code() == Code::kCancelled && interrupted())
    return interrupted_exit(a, fmt("during the prompt, after {} of {} tokens", s.n_past(), n_prompt));
  if (!res) return fail(a, res.status().message());
  if (interrupted()) return interrupted_exit(a, fmt("after {} generated tokens", res->tokens.size()));
  if (gp->spec.n_draft > 0)
    std::fprintf(stderr, "[pipit] speculative (%s): %lld of %lld guesses accepted (%.1f%%) in %lld verification passes\n",
                 gp->spec.draft ? "draft model" : "prompt lookup", (long long)res->spec.accepted,
                 (long long)res->spec.drafted, 100.0 * res->spec.acceptance(), (long long)res->spec.steps);
  if (res->reason == StopReason::kContext)
    std::fprintf(stderr, "\n[pipit] the context is full (%d tokens): the answer stops here; raise -c for longer ones\n",
                 s.n_ctx());
  const double pp = res->prompt_ms > 0 ? res->n_prompt * 1000.0 / res->prompt_ms : 0;
  const size_t n_dec = res->tokens.size() > 1 ? res->tokens.size() - 1 : 0;
  const double tg = res->gen_ms > 0 ? double(n_dec) * 1000.0 / res->gen_ms : 0;
  std::fprintf(stderr,
               "\n[pipit] load %.1f ms | prompt %d tokens, %.1f tok/s | generated %zu tokens, %.1f tok/s | "
               "threads %d | kernels %s | stop: %s\n",
               load_ms, res->n_prompt, pp, res->tokens.size(), tg, s.pool().size(), kernels().name.c_str(),
               stop_reason_name(res->reason));
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("run", "generate text from a prompt", cmd_run);

}  // namespace pipit::cli
