// Models and sessions for Python: load (.pipit, HF directory, .gguf), tokenize, logits as numpy arrays, generation
// with a streaming callback, prompts with images and audio clips. The GIL is released while the engine runs and taken back for each
// callback; an exception raised by a callback (or Ctrl-C) stops the generation and is re-raised to the caller.
#include <map>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/limits.h"
#include "models/vision/vision_model.h"
#include "python/src/py_common.h"
#include "runtime/audio_input.h"
#include "runtime/conversation.h"
#include "runtime/generation_defaults.h"
#include "runtime/generator.h"
#include "runtime/grammar.h"
#include "runtime/json_schema.h"
#include "runtime/loader.h"
#include "runtime/multimodal.h"
#include "runtime/mtp_draft.h"
#include "runtime/multimodal_video.h"
#include "runtime/session.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pipit::python {

namespace {

struct PyModel {
  LoadedModel lm;
  std::shared_ptr<ThreadPool> pool;

  const Tokenizer& tok() const {
    if (!lm.tokenizer) throw PipitError("model '" + lm.path + "' has no tokenizer files (tokenizer.json)");
    return *lm.tokenizer;
  }
};

struct PySession {
  std::shared_ptr<PyModel> m;
  std::unique_ptr<Session> s;
  std::unique_ptr<MtpDraft> mtp;  // GenerateOptions.mtp: the model's MTP head following `s` (made at first use)
  // Session.chat(): each turn's prompt is the whole conversation, evaluated from where the KV cache differs
  std::unique_ptr<Conversation> conv = std::make_unique<Conversation>(*s);
};

// Sampling and stopping, filled by pipit.GenerateOptions in __init__.py.
struct GenOptions {
  int max_tokens = 256;
  // None: the model's generation_config.json value, else SamplerParams' (0.8, 40, 0.95, 0.05, 1.0)
  std::optional<float> temperature;
  std::optional<int> top_k;
  std::optional<float> top_p, min_p, repeat_penalty;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;  // None: a new seed (Completion.seed says which)
  std::vector<std::string> stop;
  bool ignore_eos = false;
  std::string grammar, json_schema;  // structured output (at most one): GBNF, or a JSON schema's text
  int logprobs = -1;                 // >= 0: each generated token's log-probability and this many top ones
  int lookup = 0;                    // > 0: speculative decoding by prompt lookup, this many guesses per step
  int mtp = 0;                       // > 0: speculative decoding by the model's MTP head, this many guesses per step
  int no_repeat_ngram_size = -1;     // HF's; -1: the model's default, 0: off
  std::map<int32_t, float> logit_bias;  // OpenAI's: token id -> bias in [-100, 100] (-100 bans it)
};

struct Completion {
  std::string text;
  std::vector<int32_t> tokens;
  std::string finish_reason;
  int n_prompt = 0;
  double prompt_ms = 0, gen_ms = 0;
  // (token, logprob, [(token, logprob), ...]) per generated token when GenerateOptions.logprobs >= 0
  std::vector<std::tuple<int32_t, float, std::vector<std::pair<int32_t, float>>>> logprobs;
  int64_t drafted = 0, accepted = 0;  // speculative guesses made and accepted (lookup)
  uint64_t seed = 0;                  // what it sampled with: pass it back as seed= for the same text
};

GenerateParams gen_params(const GenOptions& o, const LoadedModel& lm) {
  const nlohmann::json& generation_config = lm.generation_config;
  if (o.max_tokens < 0) bad_arg("max_tokens must be >= 0, got {}", o.max_tokens);
  const SamplerParams m = model_sampling(generation_config, SamplerParams{});
  GenerateParams p;
  p.max_tokens = o.max_tokens;
  p.sampler.temperature = o.temperature.value_or(m.temperature);
  p.sampler.top_k = o.top_k.value_or(m.top_k);
  p.sampler.top_p = o.top_p.value_or(m.top_p);
  p.sampler.min_p = o.min_p.value_or(m.min_p);
  p.sampler.repetition_penalty = o.repeat_penalty.value_or(m.repetition_penalty);
  p.sampler.presence_penalty = o.presence_penalty;
  p.sampler.frequency_penalty = o.frequency_penalty;
  p.sampler.seed = o.seed ? *o.seed : random_seed();
  const auto& q = p.sampler;
  if (!(q.top_p > 0.0f) || !(q.temperature >= 0.0f) || !(q.min_p >= 0.0f) || !(q.repetition_penalty > 0.0f))
    bad_arg("temperature and min_p must be >= 0, top_p and repeat_penalty > 0");
  p.stop = o.stop;
  p.ignore_eos = o.ignore_eos;
  p.logit_bias.assign(o.logit_bias.begin(), o.logit_bias.end());
  if (auto st = check_logit_bias(p.logit_bias, lm.model->info().n_vocab, "logit_bias"); !st)
    bad_arg("{}", st.message());
  if (!o.grammar.empty() && !o.json_schema.empty()) bad_arg("grammar and json_schema: choose one");
  if (!o.grammar.empty()) p.grammar = unwrap(Grammar::parse(o.grammar));
  if (!o.json_schema.empty()) p.grammar = unwrap(grammar_from_json_schema(o.json_schema, "json_schema"));
  if (o.logprobs < -1 || o.logprobs > 20) bad_arg("logprobs must be in [-1, 20], got {}", o.logprobs);
  p.logprobs = o.logprobs;
  if (o.lookup < 0 || o.lookup > 16) bad_arg("lookup must be in [0, 16], got {}", o.lookup);
  if (o.mtp < 0 || o.mtp > 16) bad_arg("mtp must be in [0, 16], got {}", o.mtp);
  if (o.lookup > 0 && o.mtp > 0) bad_arg("lookup and mtp: choose one");
  p.spec.n_draft = o.lookup + o.mtp;
  if (o.no_repeat_ngram_size < -1 || o.no_repeat_ngram_size > Limits::kMaxNoRepeatNgram)
    bad_arg("no_repeat_ngram_size must be in [-1, {}], got {}", Limits::kMaxNoRepeatNgram, o.no_repeat_ngram_size);
  p.no_repeat_ngram_size = o.no_repeat_ngram_size;
  return p;
}

std::unique_ptr<Session> new_session(PyModel& m, int n_ctx, int n_batch, const std::string& kv_type) {
  if (n_ctx < 0) bad_arg("n_ctx must be >= 0, got {}", n_ctx);
  if (n_batch < 1) bad_arg("n_batch must be >= 1, got {}", n_batch);
  SessionOptions so;
  so.n_ctx = n_ctx;
  so.n_batch = n_batch;
  if (kv_type == "f16") so.kv_dtype = DType::F16;
  else if (kv_type == "f32") so.kv_dtype = DType::F32;
  else if (kv_type == "q8" || kv_type == "q8_0") so.kv_dtype = DType::Q8_0;
  else bad_arg("kv_type {}: expected 'f16', 'f32' or 'q8'", kv_type);
  const auto& info = m.lm.model->info();
  if (so.kv_dtype == DType::Q8_0 && info.kv.head_dim % kQBlock != 0)
    bad_arg("kv_type q8: this model's head_dim {} is not a multiple of {}", info.kv.head_dim, kQBlock);
  if (so.kv_dtype == DType::Q8_0 && info.device) bad_arg("kv_type q8: the KV cache on a device is f32 or f16");
  so.n_threads = m.pool->size();
  return unwrap(Session::create(*m.lm.model, so, m.pool, "n_ctx"));
}

py::array_t<float> logits_array(const Tensor& t) { return to_numpy(t); }

// A video as its decoded frames (paths or data URLs, in order) and their frame rate, or a video file (one path or
// data URL, frame rate 0: the file's own).
using Videos = std::vector<std::pair<std::vector<std::string>, double>>;

// Audio clips from Python, in prompt order: a file path (str), a file's bytes (bytes), or 16 kHz mono float PCM
// (anything numpy turns into a 1-D float32 array).
std::vector<AudioSource> audio_sources(const py::list& audio) {
  std::vector<AudioSource> out;
  for (size_t i = 0; i < audio.size(); ++i) {
    const py::handle a = audio[i];
    AudioSource s;
    s.what = fmt("audio {}", i + 1);
    if (py::isinstance<py::str>(a)) {
      s.path = s.what = a.cast<std::string>();
    } else if (py::isinstance<py::bytes>(a)) {
      const std::string b = a.cast<std::string>();
      s.bytes.assign(b.begin(), b.end());
    } else {
      auto arr = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
      if (!arr || arr.ndim() != 1)
        bad_arg("audio {}: expected a file path, the file's bytes, or a 1-D array of 16 kHz mono samples", i + 1);
      s.pcm.assign(arr.data(), arr.data() + arr.size());
      if (s.pcm.empty()) bad_arg("audio {}: the clip has 0 samples", i + 1);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<MultimodalPrompt> image_prompt(PyModel& m, const std::vector<int32_t>& ids,
                                             const std::vector<std::string>& images, const Videos& videos = {});

// The prompt with its images, videos and audio clips (null without any): the image prompt, then the clips decoded,
// encoded by the audio tower and spliced in at their placeholders.
std::optional<MultimodalPrompt> media_prompt(PyModel& m, const std::vector<int32_t>& ids,
                                             const std::vector<std::string>& images, const Videos& videos,
                                             const std::vector<AudioSource>& audio) {
  std::optional<MultimodalPrompt> mm = image_prompt(m, ids, images, videos);
  if (audio.empty()) return mm;
  if (!takes_audio(m.lm.config.model_type()))
    throw PipitError("model '" + m.lm.model->info().arch + "' does not take audio input");
  MultimodalPrompt p = mm ? std::move(*mm) : text_prompt(ids);
  check(add_audio(m.lm, p, audio, *m.pool));
  return p;
}

// The prompt with its images and videos (null without either): decoded, preprocessed, encoded, placeholders
// expanded (video timestamps tokenized with the model's tokenizer).
std::optional<MultimodalPrompt> image_prompt(PyModel& m, const std::vector<int32_t>& ids,
                                             const std::vector<std::string>& images, const Videos& videos) {
  if (images.empty() && videos.empty()) return std::nullopt;
  if (!m.lm.model->vision())
    throw PipitError("model '" + m.lm.model->info().arch + "' has no vision tower; images are not supported");
  if (videos.empty()) return unwrap(prepare_multimodal_prompt(m.lm, ids, images, ImageOptions{}, *m.pool));
  if (!m.lm.tokenizer) throw PipitError("videos need the model's tokenizer (for their timestamps)");
  std::vector<EncodedImage> enc_images;
  if (!images.empty()) {
    const nlohmann::json pp = unwrap(preprocessor_config_of(m.lm));
    const ImageProcessorConfig proc = unwrap(image_processor_for(*m.lm.model, pp));
    for (const auto& src : images) enc_images.push_back(unwrap(encode_image(*m.lm.model, proc, unwrap(load_image(src)),
                                                                            *m.pool)));
  }
  const VideoProcessorConfig vproc = unwrap(video_processor_for(*m.lm.model, unwrap(video_preprocessor_config_of(m.lm))));
  std::vector<EncodedVideo> enc_videos;
  for (const auto& [files, fps] : videos)  // only the sampled frames are decoded
    enc_videos.push_back(unwrap(fps == 0 && files.size() == 1
                                    ? encode_video_source(*m.lm.model, vproc, files[0], *m.pool)
                                    : encode_video_files(*m.lm.model, vproc, files, fps, *m.pool)));
  const Tokenizer& tok = *m.lm.tokenizer;
  return unwrap(build_multimodal_prompt(*m.lm.model, ids, enc_images, enc_videos,
                                        [&tok](const std::string& t) { return tok.encode(t, false); }));
}

// Runs generate() without the GIL; on_text (a Python callable or None) gets (piece, token) with the GIL and may
// return False to stop. A Python exception inside it, or a pending signal (Ctrl-C), stops the run and is raised.
// whole_conversation: `ids` is the whole conversation (Session.chat), evaluated from where the context differs;
// else they continue the context.
Completion run_generate(PySession& ps, const std::vector<int32_t>& ids, const std::vector<std::string>& images,
                        const Videos& videos, const GenOptions& o, const py::object& on_text,
                        const std::vector<AudioSource>& audio = {}, bool whole_conversation = false) {
  GenerateParams gp = gen_params(o, ps.m->lm);
  if (o.mtp > 0) {  // the head follows the session from its first use on (earlier turns give it no pairs)
    if (!ps.mtp) ps.mtp = unwrap(MtpDraft::create(*ps.s));
    gp.spec.mtp = ps.mtp.get();
  }
  const Tokenizer* tok = ps.m->lm.tokenizer.get();
  if (ids.empty()) bad_arg("the prompt is empty");
  std::optional<py::error_already_set> raised;
  auto cb = [&](const std::string& piece, int32_t token) -> bool {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      raised.emplace();
      return false;
    }
    if (on_text.is_none()) return true;
    try {
      py::object s = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(piece.data(), py::ssize_t(piece.size()),
                                                                            "replace"));
      py::object r = on_text(s, token);
      return r.is_none() || py::bool_(r);
    } catch (py::error_already_set& e) {
      raised.emplace(std::move(e));
      return false;
    }
  };
  std::optional<MultimodalPrompt> mm = media_prompt(*ps.m, ids, images, videos, audio);
  Result<GenerateResult> r = Status::ok();
  {
    py::gil_scoped_release nogil;
    if (whole_conversation)
      r = mm ? ps.conv->generate(tok, *mm, gp, cb) : ps.conv->generate(tok, ids, gp, cb);
    else
      r = mm ? generate(*ps.s, tok, *mm, gp, cb) : generate(*ps.s, tok, std::span<const int32_t>(ids), gp, cb);
  }
  if (raised) throw *raised;
  GenerateResult g = unwrap(std::move(r));
  Completion c{g.text,  g.tokens,          stop_reason_name(g.reason), g.n_prompt, g.prompt_ms,
               g.gen_ms, {},                g.spec.drafted,             g.spec.accepted, gp.sampler.seed};
  for (const TokenLogprob& lp : g.logprobs) c.logprobs.emplace_back(lp.token, lp.logprob, lp.top);
  return c;
}

py::array_t<float> session_eval(PySession& ps, const std::vector<int32_t>& ids, const std::vector<std::string>& images,
                                const Videos& videos, bool all_logits, const std::vector<AudioSource>& audio = {}) {
  if (ids.empty()) bad_arg("eval: no tokens");
  const int64_t V = ps.m->lm.model->info().n_vocab;
  for (int32_t id : ids)
    if (id < 0 || id >= V) bad_arg("token id {} outside the vocabulary of {}", id, V);
  std::optional<MultimodalPrompt> mm = media_prompt(*ps.m, ids, images, videos, audio);
  Result<Tensor> r = Status::ok();
  {
    py::gil_scoped_release nogil;
    r = mm ? ps.s->eval(*mm, all_logits) : ps.s->eval(ids, all_logits);
  }
  return logits_array(unwrap(std::move(r)));
}

std::shared_ptr<PyModel> load(const std::string& path, int n_threads, const std::string& mmproj,
                              const std::string& precision, bool mmap) {
  if (n_threads < 0 || n_threads > Limits::kMaxThreads)
    bad_arg("n_threads must be in [0, {}], got {}", Limits::kMaxThreads, n_threads);
  if (precision != "exact" && precision != "fast") bad_arg("precision '{}': expected 'exact' or 'fast'", precision);
  Result<LoadedModel> lm = Status::ok();
  {
    py::gil_scoped_release nogil;
    lm = load_model(path, LoadOptions{.copy_weights = !mmap, .precision_fast = precision == "fast", .mmproj = mmproj});
  }
  auto m = std::make_shared<PyModel>();
  m->lm = unwrap(std::move(lm));
  m->pool = std::make_shared<ThreadPool>(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  return m;
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<GenOptions>(m, "GenerateOptions")
      .def(py::init<>())
      .def_readwrite("max_tokens", &GenOptions::max_tokens)
      .def_readwrite("temperature", &GenOptions::temperature)
      .def_readwrite("top_k", &GenOptions::top_k)
      .def_readwrite("top_p", &GenOptions::top_p)
      .def_readwrite("min_p", &GenOptions::min_p)
      .def_readwrite("repeat_penalty", &GenOptions::repeat_penalty)
      .def_readwrite("presence_penalty", &GenOptions::presence_penalty)
      .def_readwrite("frequency_penalty", &GenOptions::frequency_penalty)
      .def_readwrite("seed", &GenOptions::seed)
      .def_readwrite("logit_bias", &GenOptions::logit_bias)
      .def_readwrite("stop", &GenOptions::stop)
      .def_readwrite("ignore_eos", &GenOptions::ignore_eos)
      .def_readwrite("grammar", &GenOptions::grammar)
      .def_readwrite("json_schema", &GenOptions::json_schema)
      .def_readwrite("logprobs", &GenOptions::logprobs)
      .def_readwrite("lookup", &GenOptions::lookup)
      .def_readwrite("mtp", &GenOptions::mtp)
      .def_readwrite("no_repeat_ngram_size", &GenOptions::no_repeat_ngram_size);

  py::class_<Completion>(m, "Completion", "A generation's text, token ids and why it stopped.")
      .def_readonly("text", &Completion::text)
      .def_readonly("tokens", &Completion::tokens)
      .def_readonly("finish_reason", &Completion::finish_reason, "'length', 'stop' (EOS or a stop string), ...")
      .def_readonly("n_prompt", &Completion::n_prompt)
      .def_readonly("prompt_ms", &Completion::prompt_ms)
      .def_readonly("gen_ms", &Completion::gen_ms)
      .def_readonly("logprobs", &Completion::logprobs,
                    "(token, logprob, [(token, logprob), ...]) per generated token, with logprobs=N (N top ones)")
      .def_readonly("drafted", &Completion::drafted, "speculative guesses made (lookup=N, mtp=N)")
      .def_readonly("accepted", &Completion::accepted, "of those, accepted")
      .def_readonly("seed", &Completion::seed, "the seed it sampled with (pass it as seed= to get the same text)")
      .def("__str__", [](const Completion& c) { return c.text; })
      .def("__repr__", [](const Completion& c) {
        return "Completion(" + std::to_string(c.tokens.size()) + " tokens, finish_reason='" + c.finish_reason + "')";
      });

  py::class_<PySession>(m, "Session")
      .def("eval", [](PySession& s, const py::handle& ids, const std::vector<std::string>& images, bool all_logits,
                      const Videos& videos, const py::list& audio) {
        return session_eval(s, to_ids(ids, "ids"), images, videos, all_logits, audio_sources(audio));
      }, py::arg("ids"), py::arg("images") = std::vector<std::string>{}, py::arg("all_logits") = false,
         py::arg("videos") = Videos{}, py::arg("audio") = py::list())
      .def("generate", [](PySession& s, const py::handle& ids, const std::vector<std::string>& images,
                          const GenOptions& o, const py::object& on_text, const Videos& videos, const py::list& audio) {
        return run_generate(s, to_ids(ids, "ids"), images, videos, o, on_text, audio_sources(audio));
      }, py::arg("ids"), py::arg("images"), py::arg("options"), py::arg("on_text"), py::arg("videos") = Videos{},
         py::arg("audio") = py::list())
      .def("converse", [](PySession& s, const py::handle& ids, const std::vector<std::string>& images,
                          const GenOptions& o, const py::object& on_text, const Videos& videos, const py::list& audio) {
        return run_generate(s, to_ids(ids, "ids"), images, videos, o, on_text, audio_sources(audio), true);
      }, py::arg("ids"), py::arg("images"), py::arg("options"), py::arg("on_text"), py::arg("videos") = Videos{},
         py::arg("audio") = py::list())
      .def_property_readonly("n_reused", [](const PySession& s) { return s.conv->n_reused(); })
      .def("reset", [](PySession& s) { s.conv->reset(); })
      .def("truncate", [](PySession& s, int n) {
        if (n < 0 || n > s.s->n_past()) bad_arg("truncate({}): the session holds {} positions", n, s.s->n_past());
        s.s->truncate(n);
      }, py::arg("n"))
      .def_property_readonly("n_past", [](const PySession& s) { return s.s->n_past(); })
      .def_property_readonly("n_ctx", [](const PySession& s) { return s.s->n_ctx(); });

  py::class_<PyModel, std::shared_ptr<PyModel>>(m, "Model")
      .def(py::init(&load), py::arg("path"), py::arg("n_threads") = 0, py::arg("mmproj") = "",
           py::arg("precision") = "exact", py::arg("mmap") = false)
      .def_property_readonly("arch", [](const PyModel& pm) { return pm.lm.model->info().arch; })
      .def_property_readonly("n_vocab", [](const PyModel& pm) { return pm.lm.model->info().n_vocab; })
      .def_property_readonly("n_embd", [](const PyModel& pm) { return pm.lm.model->info().n_embd; })
      .def_property_readonly("n_layer", [](const PyModel& pm) { return pm.lm.model->info().n_layer; })
      .def_property_readonly("max_ctx", [](const PyModel& pm) { return pm.lm.model->info().max_ctx; })
      .def_property_readonly("bos_id", [](const PyModel& pm) { return pm.lm.model->info().bos_id; })
      .def_property_readonly("eos_ids", [](const PyModel& pm) { return pm.lm.model->info().eos_ids; })
      .def_property_readonly("has_tokenizer", [](const PyModel& pm) { return bool(pm.lm.tokenizer); })
      .def_property_readonly("has_vision", [](const PyModel& pm) { return pm.lm.model->vision() != nullptr; })
      .def_property_readonly("has_audio", [](const PyModel& pm) { return takes_audio(pm.lm.config.model_type()); })
      .def_property_readonly("audio_token_id", [](const PyModel& pm) {  // the <|audio|> placeholder, -1 without audio
        return takes_audio(pm.lm.config.model_type()) ? int32_t(pm.lm.config.get_int_or("audio_token_id", -1)) : -1;
      })
      .def_property_readonly("config_json", [](const PyModel& pm) { return pm.lm.config.json().dump(); })
      .def_property_readonly("path", [](const PyModel& pm) { return pm.lm.path; })
      .def("tokenize", [](const PyModel& pm, const std::string& text, bool add_special) {
        return unwrap(pm.tok().encode(text, add_special));
      }, py::arg("text"), py::arg("add_special") = true)
      .def("detokenize", [](const PyModel& pm, const py::handle& ids_obj, bool skip_special) {
        const std::vector<int32_t> ids = to_ids(ids_obj, "ids");
        const int32_t V = pm.tok().vocab_size();
        for (int32_t id : ids)
          if (id < 0 || id >= V) bad_arg("token id {} outside the tokenizer's {} ids", id, V);
        const std::string s = pm.tok().decode(ids, skip_special);
        return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), py::ssize_t(s.size()), "replace"));
      }, py::arg("ids"), py::arg("skip_special") = false)
      .def("_chat_template", [](const PyModel& pm, const std::string& messages_json, bool add_generation_prompt) {
        auto j = nlohmann::ordered_json::parse(messages_json, nullptr, false);
        if (j.is_discarded() || !j.is_array()) bad_arg("messages must be a list of dicts");
        return unwrap(apply_chat_template(pm.tok(), j, add_generation_prompt));
      }, py::arg("messages_json"), py::arg("add_generation_prompt") = true)
      .def("_image_placeholder", [](const PyModel& pm) { return image_placeholder_tokens(*pm.lm.model); })
      .def("weight_names", [](const PyModel& pm) {
        std::vector<std::string> names;
        if (auto* ms = dynamic_cast<const MapWeightSource*>(pm.lm.weights.get()))
          for (const auto& kv : ms->tensors()) names.push_back(kv.first);
        return names;
      })
      .def("weight", [](const PyModel& pm, const std::string& name) {
        return PyTensor{unwrap(pm.lm.weights->find(name))};
      }, py::arg("name"), "A weight under its HF name, in the dtype the file holds (shares the file's bytes).")
      .def("session", [](std::shared_ptr<PyModel> pm, int n_ctx, int n_batch, const std::string& kv_type) {
        return PySession{pm, new_session(*pm, n_ctx, n_batch, kv_type)};
      }, py::arg("n_ctx") = 0, py::arg("n_batch") = 512, py::arg("kv_type") = "f16");
}

}  // namespace pipit::python
