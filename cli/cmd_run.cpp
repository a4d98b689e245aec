// `pipit run`: generate a continuation of a prompt (through the model's chat template when it has one), streamed
// to stdout as it is produced; load time and speeds go to stderr.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <optional>

#include "backends/cpu/kernels.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/audio_args.h"
#include "cli/image_args.h"
#include "cli/structured_args.h"
#include "models/media_note.h"
#include "models/vision/vision_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pipit::cli {

namespace {

// -p TEXT, -f FILE, -f - (stdin), or stdin when it is a pipe or a file and neither option is given. From stdin, one
// trailing newline is dropped (as llama.cpp does for -f): `echo PROMPT |` means the prompt, not the prompt + "\n".
Result<std::string> run_prompt(const Args& a) {
  struct stat st{};
  const bool stdin_given = a.get("-f") == "-" ||
      (!a.has("-f") && !a.has("-p") && fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode)));
  if (stdin_given) {
    PIPIT_ASSIGN_OR_RETURN(std::string text, read_prompt_file("-"));
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (!text.empty()) return text;
  }
  if (a.has("-f") && !stdin_given) return read_prompt_file(a.get("-f"));
  if (a.has("-p")) return a.get("-p");
  return Error::invalid_argument("no prompt: give -p TEXT, -f FILE or pipe it on stdin (see pipit run --help)");
}

// run --json: the answer and its numbers as one JSON object on stdout (text, token ids, finish reason, timings).
int print_json(const GenerateResult& res, double load_ms, double media_ms, const SamplerParams& sp) {
  const size_t n_dec = res.tokens.size() > 1 ? res.tokens.size() - 1 : 0;
  nlohmann::ordered_json j = {
      {"text", res.text},
      {"tokens", res.tokens},
      {"finish_reason", stop_reason_name(res.reason)},
      {"context_full", res.reason == StopReason::kContext},
      // what it sampled with (the model's generation_config.json where the command line set nothing), and the
      // seed: a run without --seed picks a new one, this one reproduces it
      {"sampling",
       {{"temperature", sp.temperature},
        {"top_k", sp.top_k},
        {"top_p", sp.top_p},
        {"min_p", sp.min_p},
        {"repeat_penalty", sp.repetition_penalty},
        {"seed", sp.seed}}},
      {"timings",
       {{"load_ms", load_ms},
        {"prompt_tokens", res.n_prompt},
        {"prompt_ms", res.prompt_ms},
        {"prompt_tokens_per_s", res.prompt_ms > 0 ? res.n_prompt * 1000.0 / res.prompt_ms : 0.0},
        {"generated_tokens", res.tokens.size()},
        {"generation_ms", res.gen_ms},  // after the first token, as llama.cpp's eval time
        {"generation_tokens_per_s", res.gen_ms > 0 ? double(n_dec) * 1000.0 / res.gen_ms : 0.0},
        {"kernels", kernels().name}}}};
  // images / video / audio: decoding them and running their towers, before the prompt (media to first token is
  // media_ms + prompt_ms, as llama-mtmd-cli's prompt eval time counts its encode)
  if (media_ms >= 0) j["timings"]["media_ms"] = media_ms;
  // invalid UTF-8 (a piece cut by a length limit) is replaced, never a throw from dump()
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  return 0;
}

int cmd_run(Args& a) {
  add_model_options(a);
  add_sampling_options(a);
  add_image_options(a);
  add_video_options(a);
  add_audio_options(a);
  add_speculative_options(a);
  add_structured_options(a);
  a.option({"-p", "--prompt"}, "prompt text");
  a.option({"-f", "--file"}, "read the prompt from a file (- : stdin; a pipe on stdin is read when no -p)");
  a.option({"-s", "--system"}, "system message (chat template only; not llama.cpp's seed: that is --seed)");
  a.flag({"--no-template"}, "feed the prompt raw, without the chat template");
  add_template_options(a);
  a.flag({"--no-echo"}, "raw mode: do not print the prompt before the continuation");
  a.flag({"--json"}, "print one JSON object at the end (text, tokens, finish reason, timings) instead of streaming");
  a.flag({"-q", "--quiet"}, "only the answer: no progress line, no load / speed line (errors still on stderr)");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || (!a.has("-m") && !a.has("-p") && !a.has("-f"))) {
    std::printf("usage: pipit run -m MODEL -p PROMPT [options]\n%s", a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  if (!a.has("-m")) return fail(a, "no model: give -m MODEL (see pipit run --help)");
  if (auto st = check_system_option(a); !st) return fail(a, st.message());
  auto prompt_text = run_prompt(a);
  if (!prompt_text) return fail(a, prompt_text.status().message());
  std::string prompt = std::move(prompt_text).value();
  auto template_extra = template_context(a);
  if (!template_extra) return fail(a, template_extra.status().message());
  auto so = session_options(a);
  if (!so) return fail(a, so.status().message());
  install_interrupt_handler();
  auto gp = generate_params(a);
  if (!gp) return fail(a, gp.status().message());
  auto grammar = structured_grammar(a);
  if (!grammar) return fail(a, grammar.status().message());
  gp->grammar = *grammar;

  auto t0 = std::chrono::steady_clock::now();
  auto lo = load_options(a, true);
  if (!lo) return fail(a, lo.status().message());
  auto lm = load_model(a.get("-m"), *lo);
  if (!lm) return fail(a, lm.status().message());
  if (auto st = check_kv_type(*lm->model, so->kv_dtype); !st) return fail(a, st.message());
  if (auto st = check_model_sampling(*lm, *gp); !st) return fail(a, st.message());
  for (const auto& f : apply_model_sampling(a, *lm, *gp))
    if (!a.get_flag("--quiet"))
      std::fprintf(stderr, "[pipit] generation_config.json: %s is out of range, ignored\n", f.c_str());
  // before the chat template, which would fail on an image item it has no use for
  if (has_images(a) && !lm->model->vision())
    return fail(a, fmt("--image: {} is a text-only model (model type '{}'), it does not take images{}", a.get("-m"),
                       lm->model->info().arch, media_note_suffix(lm->model->info().arch)));
  if (has_audio(a))
    if (auto st = check_takes_audio(*lm); !st) return fail(a, st.message());
  if (has_video(a) && !takes_video(*lm->model))
    return fail(a, fmt("--video: {} (model type '{}') does not take video input", a.get("-m"),
                       lm->model->info().arch));
  // The session (its memory plan) before the prompt is tokenized: a context that cannot be held is refused at once,
  // not after a minute of tokenizing a long prompt.
  auto pool = std::make_shared<ThreadPool>(so->n_threads > 0 ? so->n_threads : ThreadPool::default_threads());
  auto sp = Session::create(*lm->model, *so, pool);
  if (!sp) return fail(a, sp.status().message());
  Session& s = **sp;
  auto spec = speculative_setup(a, *lm->model, *so, pool);
  if (!spec) return fail(a, spec.status().message());
  if (auto st = (*spec)->attach(s); !st) return fail(a, st.message());
  gp->spec = (*spec)->params;
  const Tokenizer& tok = *lm->tokenizer;
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  const bool use_template =
      !a.get_flag("--no-template") && (!tok.config().chat_template.empty() || a.has("--chat-template"));
  Result<std::vector<int32_t>> ids = std::vector<int32_t>{};
  if (use_template) {
    nlohmann::json msgs = nlohmann::json::array();
    if (a.has("-s")) msgs.push_back({{"role", "system"}, {"content", a.get("-s")}});
    // the template puts each image (clip) where its {"type": "image"} ({"type": "audio"}) item is
    if (has_images(a) || has_video(a) || has_audio(a)) {
      nlohmann::json content = nlohmann::json::array();
      if (has_video(a)) content.push_back({{"type", "video"}});
      for (size_t i = 0; i < a.get_all("--image").size(); ++i) content.push_back({{"type", "image"}});
      for (size_t i = 0; i < a.get_all("--audio").size(); ++i) content.push_back({{"type", "audio"}});
      content.push_back({{"type", "text"}, {"text", prompt}});
      msgs.push_back({{"role", "user"}, {"content", content}});
    } else {
      msgs.push_back({{"role", "user"}, {"content", prompt}});
    }
    auto text = apply_chat_template(tok, msgs, /*add_generation_prompt=*/true, *template_extra);
    if (!text) return fail(a, text.status().message());
    ids = tok.encode(*text, /*add_special_tokens=*/false);
  } else {
    ids = tok.encode(prompt, /*add_special_tokens=*/true);
  }
  if (!ids) return fail(a, ids.status().message());
  if (ids->empty()) return fail(a, "the prompt is empty after tokenization");

  if (has_audio(a)) {  // raw mode: one audio placeholder per clip after BOS unless the prompt has them
    auto marked = with_audio_placeholders(*lm, *ids, a.get_all("--audio").size());
    if (!marked) return fail(a, marked.status().message());
    ids = std::move(marked).value();
  }
  std::optional<MultimodalPrompt> mm;  // --image: features for the image placeholders of the prompt
  const auto t_media = std::chrono::steady_clock::now();
  if (has_images(a) || has_video(a)) {
    std::vector<int32_t> marked = with_image_placeholders(*lm->model, *ids, a.get_all("--image").size());
    if (has_video(a)) marked = with_video_placeholder(*lm->model, marked);
    auto p = media_prompt(a, *lm, tok, marked, *pool);
    if (!p) return fail(a, p.status().message());
    mm = std::move(p).value();
  }
  if (has_audio(a)) {  // --audio: the clips' soft tokens at the audio placeholders (beside any images)
    if (!mm) mm = text_prompt(*ids);
    if (auto st = audio_prompt(a, *lm, *mm, *pool); !st) return fail(a, st.message());
  }
  const double media_ms =
      mm ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_media).count() : -1.0;
  const size_t n_prompt = mm ? mm->tokens.size() : ids->size();
  if (int64_t(n_prompt) >= s.n_ctx())
    return fail(a, fmt("the prompt has {} tokens, which does not fit the context of {} (use -c to raise it)",
                       n_prompt, s.n_ctx()));
  // Raw mode echoes the prompt once it is read: printed before, a progress line on the same terminal would overwrite
  // its last line (stdout and stderr share the screen).
  // --json: nothing streamed; one object at the end.
  const bool json = a.get_flag("--json");
  std::string echo = !json && !use_template && !a.get_flag("--no-echo") ? tok.decode(*ids, true) : "";
  auto flush_echo = [&echo] {
    if (echo.empty()) return;
    std::fputs(echo.c_str(), stdout);
    std::fflush(stdout);
    echo.clear();
  };
  auto print = [&flush_echo, json](const std::string& piece, int32_t) {
    if (json) return !interrupted();
    flush_echo();
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
    return !interrupted() && !std::ferror(stdout);  // stdout full or closed: no point in generating on
  };
  const bool quiet = a.get_flag("--quiet");
  s.set_progress(prefill_progress(quiet));
  auto res = mm ? generate(s, &tok, *mm, *gp, print) : generate(s, &tok, *ids, *gp, print);
  if (res) flush_echo();
  if (!json) std::fputs("\n", stdout);
  std::fflush(stdout);
  if (const std::string err = stdout_error(); !err.empty()) return fail(a, err);
  if (!res && res.status().code() == Code::kCancelled && interrupted())
    return interrupted_exit(a, fmt("during the prompt, after {} of {} tokens", s.n_past(), n_prompt));
  if (!res) return fail(a, res.status().message());
  if (interrupted()) return interrupted_exit(a, fmt("after {} generated tokens", res->tokens.size()));
  if (json) return print_json(*res, load_ms, media_ms, gp->sampler);
  if (quiet) return 0;
  if (gp->spec.n_draft > 0)
    std::fprintf(stderr, "[pipit] speculative (%s): %lld of %lld guesses accepted (%.1f%%) in %lld verification passes\n",
                 gp->spec.mtp ? "MTP head" : gp->spec.draft ? "draft model" : "prompt lookup", (long long)res->spec.accepted,
                 (long long)res->spec.drafted, 100.0 * res->spec.acceptance(), (long long)res->spec.steps);
  if (res->reason == StopReason::kContext)
    std::fprintf(stderr, "\n[pipit] the context is full (%d tokens): the answer stops here; raise -c for longer ones\n",
                 s.n_ctx());
  const double pp = res->prompt_ms > 0 ? res->n_prompt * 1000.0 / res->prompt_ms : 0;
  const size_t n_dec = res->tokens.size() > 1 ? res->tokens.size() - 1 : 0;
  const double tg = res->gen_ms > 0 ? double(n_dec) * 1000.0 / res->gen_ms : 0;
  // sampled runs say their seed (a run without --seed picks a new one): `--seed N` gives the same text again
  const std::string seed = gp->sampler.temperature > 0 ? fmt(" | seed {}", gp->sampler.seed) : std::string();
  std::fprintf(stderr,
               "\n[pipit] load %.1f ms | prompt %d tokens, %.1f tok/s | generated %zu tokens, %.1f tok/s | "
               "threads %d | kernels %s | stop: %s%s\n",
               load_ms, res->n_prompt, pp, res->tokens.size(), tg, s.pool().size(), kernels().name.c_str(),
               stop_reason_name(res->reason), seed.c_str());
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("run", "generate text from a prompt", cmd_run);

}  // namespace pipit::cli
