// Options shared by the commands that load a model and generate (run, chat, serve, bench).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli/args.h"
#include "core/limits.h"
#include "runtime/generator.h"
#include "runtime/loader.h"
#include "runtime/mtp_draft.h"
#include "runtime/session.h"

namespace pipit::cli {

void add_model_options(Args& a);     // -m, -t, -c, --kv-type, --mmproj, --device
void add_device_option(Args& a);     // --device cpu | opencl[:N]
// What -m needs besides its path: --mmproj, --device (opened here: a missing runtime / device / kernel build
// failure is the error), and whether the command needs a tokenizer.
Result<LoadOptions> load_options(const Args& a, bool need_tokenizer = false);
void add_sampling_options(Args& a);  // --temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed, -n, --stop
Result<SessionOptions> session_options(const Args& a);
Result<DType> kv_type(const Args& a);                 // --kv-type f32 | f16 | q8
Status check_kv_type(const Model& m, DType kv);       // q8 needs head_dim % 32 == 0 (and the CPU)
Result<GenerateParams> generate_params(const Args& a);
// The model's generation_config.json sampling (runtime/generation_defaults.h) for each of --temp, --top-k, --top-p,
// --min-p, --repeat-penalty the command line did not set. Returns the fields of the file it dropped as invalid.
std::vector<std::string> apply_model_sampling(const Args& a, const LoadedModel& lm, GenerateParams& p);
// What can only be checked against the model: --logit-bias ids inside its vocabulary.
Status check_model_sampling(const LoadedModel& lm, const GenerateParams& p);

// Speculative decoding (runtime/speculative.h): --draft MODEL (a draft model sharing the vocabulary), --lookup
// (prompt lookup, no extra model), --draft-max N (guesses per verification); --mtp (the model's own multi-token-
// prediction head, runtime/mtp_draft.h) with --mtp-n N guesses.
void add_speculative_options(Args& a);
struct SpecSetup {
  std::optional<LoadedModel> draft_model;
  std::unique_ptr<Session> draft_session;
  Draft draft{nullptr, {}};
  SpecParams params;  // n_draft 0: no option given
  bool mtp = false;   // --mtp: attach() makes the head follow the target session
  std::unique_ptr<MtpDraft> mtp_draft;
  Status attach(Session& target);  // --mtp: params.mtp follows `target` from now on (no-op without --mtp)
  void detach();                   // params.mtp null again
};
// Loads the draft model (its vocabulary size must be the target's) and its session with the target's options.
Result<std::unique_ptr<SpecSetup>> speculative_setup(const Args& a, const Model& target, const SessionOptions& so,
                                                     std::shared_ptr<ThreadPool> pool);

// --chat-template FILE (a Jinja template used instead of the model's) and --chat-template-kwargs JSON (template
// variables, as transformers' apply_chat_template kwargs: '{"enable_thinking": false}' turns Qwen3's thinking off),
// for run and chat. template_context() is the extra context apply_chat_template takes (an empty object without them).
void add_template_options(Args& a);
Result<nlohmann::json> template_context(const Args& a);

// -s is the system message (run, chat); llama.cpp's -s is the seed. A whole number given as -s is refused with both
// meanings spelled out, rather than sent to the model as its system prompt; --system 42 still means the text.
Status check_system_option(const Args& a);

// -f: the prompt file ("-": stdin), capped at Limits::kMaxPromptFile (a directory, /dev/zero or a huge file is an
// error naming the cap).
Result<std::string> read_prompt_file(const std::string& path);

// Ctrl-C for the commands that run a long prefill or decode (run, logits): the first SIGINT sets a flag that
// interrupted() reports and the prefill (between chunks) and decode (between tokens) loops check; a second SIGINT
// exits at once with status 130 (for a long tokenization, which has no such loop).
void install_interrupt_handler();
bool interrupted();
// The prefill progress callback for Session::set_progress: on a terminal (stderr), a line updated in place with the
// tokens done / total, tok/s and the time left, for prefills that take longer than half a second; PIPIT_PROGRESS=1
// shows it on a pipe too (tests); `quiet` (run -q) shows nothing. Returns false once interrupted().
Session::Progress prefill_progress(bool quiet = false);
// The one-line message and exit status (130) of a command stopped by Ctrl-C.
int interrupted_exit(const Args& a, const std::string& what);

}  // namespace pipit::cli
