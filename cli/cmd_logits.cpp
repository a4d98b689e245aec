// `pipit logits`: one forward pass over input_ids from a safetensors file, logits written to another — the
// debugging tool every parity check uses.
#include <cstdio>
#include <optional>

#include "cli/audio_args.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/image_args.h"
#include "format/safetensors.h"

namespace pipit::cli {

namespace {

int cmd_logits(Args& a) {
  add_model_options(a);
  add_image_options(a);
  add_audio_options(a);
  a.option({"--input"}, "safetensors with I32 input_ids [1, T]");
  a.option({"--output"}, "safetensors to write F32 logits [1, T, n_vocab]");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || !a.has("-m") || !a.has("--input") || !a.has("--output")) {
    std::printf("usage: pipit logits -m MODEL --input IN.safetensors --output OUT.safetensors [--image IMG ...] [--audio FILE ...]\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  auto in = SafetensorsFile::open(a.get("--input"));
  if (!in) return fail(a, in.status().message());
  auto ids_t = in->get("input_ids");
  if (!ids_t) return fail(a, "--input " + a.get("--input") + " has no tensor 'input_ids'");
  if (ids_t->dtype() != DType::I32 || ids_t->ndim() != 2 || ids_t->dim(0) != 1 || ids_t->dim(1) < 1)
    return fail(a, "input_ids must be I32 [1, T], got " + ids_t->describe());
  std::vector<int32_t> ids(ids_t->ptr<int32_t>(), ids_t->ptr<int32_t>() + ids_t->numel());

  auto lo = load_options(a);
  if (!lo) return fail(a, lo.status().message());
  auto lm = load_model(a.get("-m"), *lo);
  if (!lm) return fail(a, lm.status().message());
  auto so = session_options(a);
  if (!so) return fail(a, so.status().message());
  if (auto st = check_kv_type(*lm->model, so->kv_dtype); !st) return fail(a, st.message());
  auto pool = std::make_shared<ThreadPool>(so->n_threads > 0 ? so->n_threads : ThreadPool::default_threads());
  // vision-language models: --image fills the image tokens of input_ids (one placeholder per image, or expanded)
  std::optional<MultimodalPrompt> mm;
  if (has_images(a) || lm->model->vision()) {
    auto p = image_prompt(a, *lm, ids, *pool);
    if (!p) return fail(a, p.status().message());
    mm = std::move(p).value();
  }
  if (has_audio(a)) {  // --audio fills the audio tokens of input_ids (one <|audio|> per clip, or expanded)
    if (auto st = check_takes_audio(*lm); !st) return fail(a, st.message());
    if (!mm) mm = text_prompt(ids);
    if (auto st = audio_prompt(a, *lm, *mm, *pool); !st) return fail(a, st.message());
  }
  const int64_t T = mm ? int64_t(mm->tokens.size()) : int64_t(ids.size());
  if (so->n_ctx == 0) so->n_ctx = int(std::max<int64_t>(T, default_ctx(*lm->model, 0)));
  auto sp = Session::create(*lm->model, *so, pool);
  if (!sp) return fail(a, sp.status().message());
  Session& s = **sp;
  install_interrupt_handler();
  s.set_progress(prefill_progress());
  auto logits = mm ? s.eval(*mm, /*all_logits=*/true) : s.eval(ids, /*all_logits=*/true);
  if (!logits && logits.status().code() == Code::kCancelled && interrupted())
    return interrupted_exit(a, fmt("after {} of {} tokens", s.n_past(), T));
  if (!logits) return fail(a, logits.status().message());
  std::vector<std::pair<std::string, Tensor>> out = {
      {"logits", logits->reshape({1, T, lm->model->info().n_vocab})}};
  if (mm) {  // the expanded prompt and its positions (M-RoPE: [3, 1, T])
    out.push_back({"input_ids", Tensor::from_data(DType::I32, {1, T}, mm->tokens.data(), nullptr)});
    out.push_back({"position_ids", position_ids_tensor(*mm)});
  }
  if (auto st = write_safetensors(a.get("--output"), out); !st) return fail(a, st.message());
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("logits", "one forward pass: input_ids (safetensors) -> logits (safetensors)", cmd_logits);

}  // namespace pipit::cli
