// The C API over the C++ runtime: every entry point catches everything, maps Status codes to pipit_status and
// keeps the message in a thread-local last-error string.
#include "capi/capi_internal.h"

#include <malloc.h>

#include <cmath>
#include <mutex>

#include "backends/device.h"
#include "models/vision/image.h"
#include "models/vision/video_file.h"
#include "models/vision/vision_model.h"
#include "runtime/generation_defaults.h"
#include "runtime/grammar.h"
#include "runtime/json_schema.h"
#include "runtime/memory_estimate.h"
#include "runtime/pooling.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pipit::capi {

thread_local std::string g_last_error;

pipit::Result<pipit::DType> kv_dtype_of(int32_t kv_type, const pipit::Model& m, const char* who) {
  const std::string w = who;
  pipit::DType dt;
  switch (kv_type) {
    case PIPIT_KV_DEFAULT:
    case PIPIT_KV_F16: dt = pipit::DType::F16; break;
    case PIPIT_KV_F32: dt = pipit::DType::F32; break;
    case PIPIT_KV_Q8_0: dt = pipit::DType::Q8_0; break;
    default: return pipit::Error::invalid_argument("{}: kv_type {} is not a PIPIT_KV_* value", w, kv_type);
  }
  const auto& info = m.info();
  if (dt == pipit::DType::Q8_0 && info.kv.head_dim % pipit::kQBlock != 0)
    return pipit::Error::invalid_argument("{}: kv_type PIPIT_KV_Q8_0 needs a head_dim that is a multiple of 32 (this "
                                          "model's is {})", w, info.kv.head_dim);
  if (dt == pipit::DType::Q8_0 && info.device)
    return pipit::Error::invalid_argument("{}: kv_type PIPIT_KV_Q8_0: the KV cache on a device is f32 or f16", w);
  return dt;
}

namespace {
std::mutex g_log_mutex;
pipit_log_callback g_log_callback = nullptr;
void* g_log_user = nullptr;
}  // namespace

bool log_enabled() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  return g_log_callback != nullptr;
}

void log_message(int32_t level, const std::string& message) {
  pipit_log_callback cb;
  void* user;
  {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    cb = g_log_callback;
    user = g_log_user;
  }
  if (cb) cb(level, message.c_str(), user);
}

}  // namespace pipit::capi

using namespace pipit::capi;

namespace {

int32_t image_token(const pipit::Model& m) {
  return m.vision() ? m.vision()->vision_tokens().image_token_id : -1;
}

// `n` image placeholders before the text of `ids` (after its BOS).
std::vector<int32_t> with_image_placeholders(const pipit::Model& m, const std::vector<int32_t>& ids, size_t n) {
  std::vector<int32_t> out = ids, marks;
  const std::vector<int32_t> mark = pipit::image_placeholder_tokens(m);
  for (size_t i = 0; i < n; ++i) marks.insert(marks.end(), mark.begin(), mark.end());
  const bool bos = !out.empty() && out[0] == m.info().bos_id;
  out.insert(out.begin() + (bos ? 1 : 0), marks.begin(), marks.end());
  return out;
}

}  // namespace

extern "C" {

const char* pipit_last_error(void) { return g_last_error.c_str(); }
const char* pipit_version(void) { return PIPIT_VERSION; }
int32_t pipit_api_version(void) { return PIPIT_API_VERSION; }

void pipit_set_log_callback(pipit_log_callback callback, void* user) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_log_callback = callback;
  g_log_user = user;
}

void pipit_model_options_init(pipit_model_options* o, size_t size) {
  init_options(o, size, pipit_model_options{uint32_t(sizeof(pipit_model_options)), nullptr, nullptr, 0});
}

void pipit_session_options_init(pipit_session_options* o, size_t size) {
  init_options(o, size, pipit_session_options{uint32_t(sizeof(pipit_session_options)), 0, 0, PIPIT_KV_DEFAULT, 0});
}

pipit_status pipit_model_load(const char* path, const pipit_model_options* options, pipit_model** out) {
  return guard([&] {
    if (!path || !out) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_model_load: path and out must not be NULL");
    *out = nullptr;
    pipit_model_options mo;
    pipit_model_options_default(&mo);
    // API version 1's struct was {reserved = 0, device, precision}: the same bytes as struct_size 0 + those fields
    if (auto st = read_options(options, &mo, "pipit_model_options", offsetof(pipit_model_options, precision) +
                                                                        sizeof(const char*));
        st != PIPIT_OK)
      return st;
    options = &mo;
    pipit::LoadOptions lo{.need_tokenizer = true};
    if (options->mmap_weights != 0 && options->mmap_weights != 1)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_model_load: mmap_weights is " +
                                                  std::to_string(options->mmap_weights) + ", expected 0 or 1");
    lo.copy_weights = options->mmap_weights == 0;
    if (options->device) {
      auto dev = pipit::open_device(options->device);
      if (!dev) return to_status(dev.status());
      lo.device = std::move(dev).value();
    }
    if (options->precision) {
      const std::string p = options->precision;
      if (p != "exact" && p != "fast")
        return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_model_load: precision '" + p + "': expected \"exact\" or \"fast\"");
      lo.precision_fast = p == "fast";
    }
    auto lm = pipit::load_model(path, lo);
    if (!lm) return to_status(lm.status());
    auto* m = new pipit_model{std::move(lm).value(), {}, nullptr};
    m->files = pipit::FileWatch::of(m->lm.path);
    *out = m;
    return PIPIT_OK;
  });
}

void pipit_model_destroy(pipit_model* model) { delete model; }

int32_t pipit_model_n_vocab(const pipit_model* model) { return model ? int32_t(model->lm.model->info().n_vocab) : 0; }
int32_t pipit_model_n_ctx_max(const pipit_model* model) {
  return model ? int32_t(model->lm.model->info().max_ctx) : 0;
}

pipit_status pipit_tokenize(const pipit_model* model, const char* text, size_t text_len, int32_t add_special,
                            int32_t* ids, size_t capacity, size_t* n_out) {
  return guard([&] {
    if (!model || (!text && text_len)) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_tokenize: NULL argument");
    auto r = model->lm.tokenizer->encode(std::string_view(text ? text : "", text_len), add_special != 0);
    if (!r) return to_status(r.status());
    if (n_out) *n_out = r->size();
    if (r->size() > capacity || (!ids && !r->empty()))
      return fail(PIPIT_ERR_BUFFER_TOO_SMALL, "pipit_tokenize: " + std::to_string(r->size()) + " ids, capacity " +
                                                  std::to_string(capacity));
    std::copy(r->begin(), r->end(), ids);
    return PIPIT_OK;
  });
}

pipit_status pipit_detokenize(const pipit_model* model, const int32_t* ids, size_t n_ids, int32_t skip_special,
                              char* buf, size_t capacity, size_t* len_out) {
  return guard([&] {
    if (!model || (!ids && n_ids)) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_detokenize: NULL argument");
    const int32_t V = model->lm.tokenizer->vocab_size();
    for (size_t i = 0; i < n_ids; ++i)
      if (ids[i] < 0 || ids[i] >= V)
        return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_detokenize: id " + std::to_string(ids[i]) + " out of range");
    std::string s = model->lm.tokenizer->decode(std::span<const int32_t>(ids, n_ids), skip_special != 0);
    return write_string(s, buf, capacity, len_out);
  });
}

pipit_status pipit_chat_template_apply(const pipit_model* model, const char* messages_json,
                                       int32_t add_generation_prompt, char* buf, size_t capacity, size_t* len_out) {
  return guard([&] {
    if (!model || !messages_json) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_chat_template_apply: NULL argument");
    auto j = nlohmann::json::parse(messages_json, nullptr, false);
    if (j.is_discarded() || !j.is_array())
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_chat_template_apply: messages must be a JSON array");
    auto r = pipit::apply_chat_template(*model->lm.tokenizer, j, add_generation_prompt != 0);
    if (!r) return to_status(r.status());
    return write_string(*r, buf, capacity, len_out);
  });
}

pipit_status pipit_session_create(pipit_model* model, const pipit_session_options* options, pipit_session** out) {
  return guard([&] {
    if (!model || !out) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_create: NULL argument");
    pipit::SessionOptions so;
    pipit_session_options opt;
    pipit_session_options_default(&opt);
    if (auto st = read_options(options, &opt, "pipit_session_options"); st != PIPIT_OK) return st;
    if (opt.n_ctx < 0 || opt.n_threads < 0 || opt.n_threads > pipit::Limits::kMaxThreads)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_create: n_ctx must be >= 0 and n_threads in [0, " +
                                                  std::to_string(pipit::Limits::kMaxThreads) + "]");
    so.n_ctx = opt.n_ctx;
    so.n_threads = opt.n_threads;
    auto kv = kv_dtype_of(opt.kv_type, *model->lm.model, "pipit_session_create");
    if (!kv) return to_status(kv.status());
    so.kv_dtype = *kv;
    if (opt.mtp < 0 || opt.mtp > 16)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_create: mtp must be in [0, 16], got " +
                                                  std::to_string(opt.mtp));
    auto session = pipit::Session::create(*model->lm.model, so, nullptr, "n_ctx");
    if (!session) return to_status(session.status());
    auto s = std::unique_ptr<pipit_session>(new pipit_session{model, std::move(session).value()});
    s->conv = std::make_unique<pipit::Conversation>(*s->s);
    if (opt.mtp > 0) {
      auto d = pipit::MtpDraft::create(*s->s);
      if (!d) return to_status(d.status().with_context("pipit_session_create: mtp"));
      s->mtp = std::move(d).value();
      s->n_mtp = opt.mtp;
    }
    *out = s.release();
    return PIPIT_OK;
  });
}

void pipit_session_destroy(pipit_session* session) { delete session; }

pipit_status pipit_session_reset(pipit_session* session) {
  return guard([&] {
    if (!session) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_reset: NULL session");
    session->conv->reset();
    session->pending_images.clear();
    session->images.clear();
    session->pending_videos.clear();
    session->videos.clear();
    session->pending_audio.clear();
    session->audio_clips.clear();
    session->unexpanded.clear();
    return PIPIT_OK;
  });
}

void pipit_generate_options_init(pipit_generate_options* o, size_t size) {
  init_options(o, size, pipit_generate_options{uint32_t(sizeof(pipit_generate_options)), 256, PIPIT_MODEL_DEFAULT,
                                               PIPIT_MODEL_DEFAULT_INT, PIPIT_MODEL_DEFAULT, PIPIT_MODEL_DEFAULT,
                                               PIPIT_MODEL_DEFAULT, PIPIT_SEED_RANDOM, nullptr, 0});
}

namespace {

// The options as GenerateParams: sampling fields left at PIPIT_MODEL_DEFAULT take the model's generation_config.json
// value (else SamplerParams'), seed PIPIT_SEED_RANDOM a new one; the session's grammar, logprobs and speculation.
pipit::Result<pipit::GenerateParams> generate_params_of(pipit_session* session, const pipit_generate_options& o) {
  if (o.max_tokens < 0) return pipit::Error::invalid_argument("max_tokens must be >= 0");
  pipit::GenerateParams gp;
  gp.max_tokens = o.max_tokens;
  gp.sampler = pipit::model_sampling(session->model->lm.generation_config, pipit::SamplerParams{});
  if (!std::isnan(o.temperature)) gp.sampler.temperature = o.temperature;
  if (o.top_k != PIPIT_MODEL_DEFAULT_INT) gp.sampler.top_k = o.top_k;
  if (!std::isnan(o.top_p)) gp.sampler.top_p = o.top_p;
  if (!std::isnan(o.min_p)) gp.sampler.min_p = o.min_p;
  if (!std::isnan(o.repeat_penalty)) gp.sampler.repetition_penalty = o.repeat_penalty;
  gp.sampler.presence_penalty = gp.sampler.frequency_penalty = 0;
  gp.sampler.seed = o.seed == PIPIT_SEED_RANDOM ? pipit::random_seed() : o.seed;
  for (size_t i = 0; i < o.n_stop; ++i)
    if (o.stop && o.stop[i]) gp.stop.push_back(o.stop[i]);
  gp.grammar = session->grammar;
  gp.logprobs = session->n_logprobs;
  gp.logit_bias = session->logit_bias;
  if (session->n_draft > 0) {
    gp.spec.n_draft = session->n_draft;
    gp.spec.draft = session->draft_session ? &session->draft : nullptr;
  }
  if (session->mtp) {  // the model's MTP head (pipit_session_options.mtp) takes precedence
    gp.spec.n_draft = session->n_mtp;
    gp.spec.mtp = session->mtp.get();
  }
  return gp;
}

// The whole token sequence this call wants in the context, media placeholders unexpanded: the rendered messages
// (use_chat_template), or the conversation so far + the raw text, with a placeholder per newly attached image,
// video and audio clip laid in after BOS when the text has none.
pipit::Result<std::vector<int32_t>> conversation_tokens(pipit_session* session, const char* prompt,
                                                        bool use_chat_template) {
  const pipit::Tokenizer& tok = *session->model->lm.tokenizer;
  const pipit::Model& model = *session->model->lm.model;
  if (use_chat_template) {
    auto j = nlohmann::json::parse(prompt, nullptr, false);
    if (j.is_discarded() || !j.is_array())
      return pipit::Error::invalid_argument("with use_chat_template, prompt must be a JSON array of messages");
    PIPIT_ASSIGN_OR_RETURN(std::string text, pipit::apply_chat_template(tok, j, true));
    return tok.encode(text, false);
  }
  PIPIT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(prompt, session->unexpanded.empty()));
  std::vector<int32_t> full = session->unexpanded;
  // raw text without placeholders: the newly attached images go first (after BOS), as with `pipit run`
  const bool has_marks = std::find(ids.begin(), ids.end(), image_token(model)) != ids.end();
  std::vector<int32_t> marked = has_marks ? ids : with_image_placeholders(model, ids, session->pending_images.size());
  const int64_t at_bos = !marked.empty() && marked[0] == model.info().bos_id ? 1 : 0;
  if (!session->pending_videos.empty()) {  // and the new videos before them
    const int32_t video_token = model.vision()->vision_tokens().video_token_id;
    const std::vector<int32_t> mark = pipit::video_placeholder_tokens(model);  // the model's video processor's
    if (std::find(marked.begin(), marked.end(), video_token) == marked.end())
      for (size_t k = 0; k < session->pending_videos.size(); ++k)
        marked.insert(marked.begin() + at_bos, mark.begin(), mark.end());
  }
  if (!session->pending_audio.empty()) {  // and one audio placeholder per new clip, unless the text has them
    const int32_t mark = session->audio_enc->tokens().audio_token_id;
    if (std::find(marked.begin(), marked.end(), mark) == marked.end())
      marked.insert(marked.begin() + at_bos, session->pending_audio.size(), mark);
  }
  full.insert(full.end(), marked.begin(), marked.end());
  return full;
}

// A conversation with media: the newly attached images, videos and clips encoded (one that fails is dropped, the
// error naming it), every placeholder of the conversation expanded. The session keeps the encodings.
pipit::Result<pipit::MultimodalPrompt> media_conversation(pipit_session* session, const std::vector<int32_t>& full) {
  const pipit::LoadedModel& lm = session->model->lm;
  const pipit::Tokenizer& tok = *lm.tokenizer;
  pipit::ThreadPool& pool = session->s->pool();
  std::vector<pipit::EncodedImage> images = session->images;
  const std::vector<pipit_session::PendingImage> pending = std::move(session->pending_images);
  session->pending_images.clear();
  for (size_t k = 0; k < pending.size(); ++k) {  // (attach_image refuses images for models without vision)
    PIPIT_ASSIGN_OR_RETURN(auto pp, pipit::preprocessor_config_of(lm));
    PIPIT_ASSIGN_OR_RETURN(auto proc, pipit::image_processor_for(*lm.model, pp));
    const auto& p = pending[k];
    const std::string what = p.bytes.empty() ? p.path : "image bytes #" + std::to_string(k + 1);
    PIPIT_ASSIGN_OR_RETURN(auto img, p.bytes.empty() ? pipit::load_image(p.path) : pipit::decode_image(p.bytes, what));
    auto e = pipit::encode_image(*lm.model, proc, img, pool);
    if (!e) return e.status().with_context("[image] " + what);
    images.push_back(std::move(e).value());
  }
  std::vector<pipit::EncodedVideo> videos = session->videos;
  const std::vector<pipit_session::PendingVideo> pending_v = std::move(session->pending_videos);
  session->pending_videos.clear();
  if (!pending_v.empty()) {
    PIPIT_ASSIGN_OR_RETURN(auto vpp, pipit::video_preprocessor_config_of(lm));
    PIPIT_ASSIGN_OR_RETURN(auto vproc, pipit::video_processor_for(*lm.model, vpp));
    for (size_t k = 0; k < pending_v.size(); ++k) {  // only the sampled frames are decoded
      const auto& pv = pending_v[k];
      pipit::Result<pipit::EncodedVideo> e = pipit::Error::internal("no video");
      if (!pv.frames.empty()) {
        e = pipit::encode_video_files(*lm.model, vproc, pv.frames, pv.fps, pool);
      } else if (!pv.source.empty()) {
        e = pipit::encode_video_source(*lm.model, vproc, pv.source, pool);
      } else {
        const std::string what = "video bytes #" + std::to_string(k + 1);
        PIPIT_ASSIGN_OR_RETURN(auto file, pipit::VideoFile::open_bytes(pv.bytes, what));
        e = pipit::encode_video_file(*lm.model, vproc, *file, pool);
      }
      PIPIT_TRY(e.status());
      videos.push_back(std::move(e).value());
    }
  }
  const pipit::TextEncoder encode = [&tok](const std::string& text) { return tok.encode(text, false); };
  PIPIT_ASSIGN_OR_RETURN(pipit::MultimodalPrompt mm,
                         lm.model->vision() ? pipit::build_multimodal_prompt(*lm.model, full, images, videos, encode)
                                            : pipit::Result<pipit::MultimodalPrompt>(pipit::text_prompt(full)));
  std::vector<pipit::Tensor> clips = session->audio_clips;
  const std::vector<pipit::AudioSource> pending_a = std::move(session->pending_audio);
  session->pending_audio.clear();
  for (const auto& a : pending_a) {
    auto e = pipit::encode_audio(*session->audio_enc, a.pcm, pool);
    if (!e) return e.status().with_context("[audio] " + a.what);
    clips.push_back(std::move(e).value());
  }
  if (!clips.empty()) PIPIT_TRY(pipit::splice_audio(mm, session->audio_enc->tokens(), clips));
  if (int64_t(mm.tokens.size()) >= session->s->n_ctx())
    return pipit::Error::out_of_range("the conversation has {} tokens with its images, which does not fit the context "
                                      "of {}", mm.tokens.size(), session->s->n_ctx());
  session->images = std::move(images);
  session->videos = std::move(videos);
  session->audio_clips = std::move(clips);
  return mm;
}

// After a generation: the conversation so far (its answer included), the figures of pipit_session_* getters; or
// the turn forgotten after an error (runtime/conversation.h says what the context keeps).
pipit_status finish_generation(pipit_session* session, pipit::Result<pipit::GenerateResult>& res,
                               const std::vector<int32_t>& full, size_t n_prompt, int64_t evaluated0,
                               bool with_media) {
  session->n_reused = session->conv->n_reused();
  if (!res && res.status().code() == pipit::Code::kCancelled && !with_media) {
    // cancelled during the prompt: the chunks evaluated so far stay in the context
    session->unexpanded = session->conv->tokens();
    session->finish_reason = "cancelled";
    session->logprobs.clear();
    session->n_prompt = int32_t(full.size());
    session->n_evaluated = int32_t(session->s->n_evaluated() - evaluated0);
    return PIPIT_OK;
  }
  if (!res) {
    const bool cancelled = res.status().code() == pipit::Code::kCancelled;
    session->conv->reset();
    session->unexpanded.clear();
    session->images.clear();
    session->videos.clear();
    session->audio_clips.clear();
    if (cancelled) {  // a conversation with media is evaluated from its start at the next generation anyway
      session->finish_reason = "cancelled";
      return PIPIT_OK;
    }
    return to_status(res.status());
  }
  // the KV cache holds the prompt and the generated tokens that were fed back (all but possibly the last); the
  // conversation has them all
  const size_t n_fed = session->conv->tokens().size() - n_prompt;
  session->unexpanded = full;
  session->unexpanded.insert(session->unexpanded.end(), res->tokens.begin(), res->tokens.end());
  session->finish_reason = pipit::stop_reason_name(res->reason);
  session->spec = res->spec;
  session->logprobs = std::move(res->logprobs);
  session->n_prompt = int32_t(n_prompt);
  // the prompt's forward passes: what was evaluated minus the decode steps (one per fed answer token)
  session->n_evaluated = int32_t(session->s->n_evaluated() - evaluated0 - int64_t(n_fed));
  return PIPIT_OK;
}

}  // namespace

pipit_status pipit_session_generate(pipit_session* session, const char* prompt, int32_t use_chat_template,
                                    const pipit_generate_options* options, pipit_token_callback callback,
                                    void* user) {
  return guard([&] {
    if (!session || !prompt) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_generate: NULL argument");
    session->cancel.store(false);
    if (auto st = session->model->files.check(); !st) return to_status(st);
    pipit_generate_options o;
    pipit_generate_options_default(&o);
    if (auto st = read_options(options, &o, "pipit_generate_options"); st != PIPIT_OK) return st;
    auto gp = generate_params_of(session, o);
    if (!gp) return to_status(gp.status());
    session->last_seed = gp->sampler.seed;
    session->logprobs.clear();
    const bool with_media = !session->images.empty() || !session->pending_images.empty() ||
                            !session->videos.empty() || !session->pending_videos.empty() ||
                            !session->audio_clips.empty() || !session->pending_audio.empty();
    auto full = conversation_tokens(session, prompt, use_chat_template != 0);
    if (!full) return to_status(full.status());
    if (full->empty()) return fail(PIPIT_ERR_INVALID_ARGUMENT, "the prompt is empty");
    session->finish_reason.clear();
    const int64_t evaluated0 = session->s->n_evaluated();
    session->conv->set_cache(session->model->cache);  // the model's sessions share it (text contexts)
    auto on_text = [&](const std::string& piece, int32_t token) {
      if (session->cancel.load(std::memory_order_relaxed)) return false;
      return callback ? callback(piece.c_str(), piece.size(), token, user) != 0 : true;
    };
    // pipit_session_cancel during the prompt: checked after each prefill chunk
    session->s->set_progress([session](int64_t, int64_t) { return !session->cancel.load(std::memory_order_relaxed); });
    struct ProgressReset {
      pipit::Session& s;
      ~ProgressReset() { s.set_progress(nullptr); }
    } progress_reset{*session->s};
    const pipit::Tokenizer& tok = *session->model->lm.tokenizer;
    pipit::Result<pipit::GenerateResult> res = pipit::Status::ok();
    size_t n_prompt = 0;  // the prompt's tokens, media expanded
    if (!with_media) {
      if (int64_t(full->size()) >= session->s->n_ctx())
        return fail(PIPIT_ERR_OUT_OF_RANGE, "the conversation has " + std::to_string(full->size()) +
                                                " tokens, which does not fit the context of " +
                                                std::to_string(session->s->n_ctx()));
      res = session->conv->generate(&tok, *full, *gp, on_text);
      n_prompt = full->size();
    } else {
      // media: encode the new ones and expand every placeholder of the conversation; what the context holds of
      // it (the same text, the same media rows) is kept
      auto mm = media_conversation(session, *full);
      if (!mm) return to_status(mm.status());
      res = session->conv->generate(&tok, *mm, *gp, on_text);
      n_prompt = mm->tokens.size();
    }
    return finish_generation(session, res, *full, n_prompt, evaluated0, with_media);
  });
}

const char* pipit_session_finish_reason(const pipit_session* session) {
  return session ? session->finish_reason.c_str() : "";
}

uint64_t pipit_session_last_seed(const pipit_session* session) { return session ? session->last_seed : 0; }

int32_t pipit_session_n_past(const pipit_session* session) { return session ? session->s->n_past() : 0; }
int32_t pipit_session_n_ctx(const pipit_session* session) { return session ? session->s->n_ctx() : 0; }

pipit_status pipit_session_prompt_stats(const pipit_session* session, int32_t* n_prompt, int32_t* n_reused,
                                        int32_t* n_evaluated) {
  return guard([&] {
    if (!session) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_prompt_stats: NULL session");
    if (n_prompt) *n_prompt = session->n_prompt;
    if (n_reused) *n_reused = session->n_reused;
    if (n_evaluated) *n_evaluated = session->n_evaluated;
    return PIPIT_OK;
  });
}

pipit_status pipit_session_set_speculation(pipit_session* session, pipit_model* draft, int32_t n_draft) {
  return guard([&] {
    if (!session) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_set_speculation: NULL session");
    if (n_draft < 0 || n_draft > 16)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_set_speculation: n_draft must be in [0, 16]");
    session->draft_session.reset();
    session->draft = pipit::Draft{nullptr, {}};
    session->n_draft = n_draft;
    if (n_draft == 0 || !draft) return PIPIT_OK;
    const pipit::Model& dm = *draft->lm.model;
    if (dm.info().n_vocab != session->model->lm.model->info().n_vocab) {
      session->n_draft = 0;
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_set_speculation: the draft model's vocabulary has " +
                                                  std::to_string(dm.info().n_vocab) + " tokens, the model's " +
                                                  std::to_string(session->model->lm.model->info().n_vocab));
    }
    pipit::SessionOptions so;
    so.n_ctx = session->s->n_ctx();
    so.n_threads = int(session->s->pool().size());
    auto ds = pipit::Session::create(*draft->lm.model, so, nullptr, "n_ctx");
    if (!ds) {
      session->n_draft = 0;
      return to_status(ds.status());
    }
    session->draft_session = std::move(ds).value();
    session->draft.session = session->draft_session.get();
    return PIPIT_OK;
  });
}

pipit_status pipit_session_speculation_stats(const pipit_session* session, int64_t* drafted, int64_t* accepted) {
  return guard([&] {
    if (!session) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_speculation_stats: NULL session");
    if (drafted) *drafted = session->spec.drafted;
    if (accepted) *accepted = session->spec.accepted;
    return PIPIT_OK;
  });
}

pipit_status pipit_model_set_prompt_cache(pipit_model* model, size_t budget_mib) {
  return guard([&] {
    if (!model) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_model_set_prompt_cache: NULL model");
    if (budget_mib > (size_t(1) << 24))
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_model_set_prompt_cache: budget over 16 TiB");
    // sessions hold their own reference to the cache in use during a generation
    model->cache = budget_mib ? std::make_shared<pipit::PromptCache>(budget_mib << 20) : nullptr;
    return PIPIT_OK;
  });
}

pipit_status pipit_session_eval(pipit_session* session, const int32_t* ids, size_t n_ids, float* logits,
                                size_t capacity) {
  return guard([&] {
    if (!session || (!ids && n_ids)) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_eval: NULL argument");
    if (n_ids == 0) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_eval: no tokens");
    if (auto st = session->model->files.check(); !st) return to_status(st);
    const pipit::Model& m = *session->model->lm.model;
    const int64_t V = m.info().n_vocab;
    if (logits && capacity < size_t(V))
      return fail(PIPIT_ERR_BUFFER_TOO_SMALL, "pipit_session_eval: logits need " + std::to_string(V) +
                                                  " floats, capacity " + std::to_string(capacity));
    for (size_t i = 0; i < n_ids; ++i)
      if (ids[i] < 0 || ids[i] >= V)
        return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_eval: id " + std::to_string(ids[i]) +
                                                    " outside the vocabulary [0, " + std::to_string(V) + ")");
    if (!session->images.empty() || !session->pending_images.empty() || !session->videos.empty() ||
        !session->pending_videos.empty() || !session->audio_clips.empty() || !session->pending_audio.empty())
      return fail(PIPIT_ERR_UNSUPPORTED, "pipit_session_eval: the conversation has images or audio; use "
                                         "pipit_session_generate (or reset the session)");
    // the conversation so far (its answers in full: the context may lack an answer's last token) and the new ids
    std::vector<int32_t> want = session->unexpanded;
    want.insert(want.end(), ids, ids + n_ids);
    if (int64_t(want.size()) > session->s->n_ctx())
      return fail(PIPIT_ERR_OUT_OF_RANGE, "pipit_session_eval: " + std::to_string(n_ids) + " tokens after " +
                                              std::to_string(want.size() - n_ids) + " do not fit the context of " +
                                              std::to_string(session->s->n_ctx()));
    session->conv->set_cache(session->model->cache);
    auto r = session->conv->eval(want);
    if (!r) {
      session->unexpanded.clear();
      return to_status(r.status());
    }
    if (logits) std::memcpy(logits, r->ptr<float>(), size_t(V) * sizeof(float));
    session->unexpanded = want;
    return PIPIT_OK;
  });
}

pipit_status pipit_embed(pipit_session* session, const char* text, size_t text_len, float* out, size_t capacity,
                         size_t* n_out) {
  return guard([&] {
    if (!session || (!text && text_len)) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_embed: NULL argument");
    const pipit::LoadedModel& lm = session->model->lm;
    const int64_t n_embd = lm.model->info().n_embd;
    if (n_out) *n_out = size_t(n_embd);
    if (!out || capacity < size_t(n_embd))
      return fail(PIPIT_ERR_BUFFER_TOO_SMALL, "pipit_embed: the embedding has " + std::to_string(n_embd) +
                                                  " floats, capacity " + std::to_string(capacity));
    if (auto st = session->model->files.check(); !st) return to_status(st);
    const pipit::PoolingConfig cfg = pipit::read_pooling_config(lm.path);
    if (cfg.mode == pipit::PoolingConfig::Mode::kNone) return fail(PIPIT_ERR_UNSUPPORTED, "pipit_embed: " + cfg.error);
    auto ids = lm.tokenizer->encode(std::string_view(text ? text : "", text_len), true);
    if (!ids) return to_status(ids.status());
    if (int64_t(ids->size()) > session->s->n_ctx())
      return fail(PIPIT_ERR_OUT_OF_RANGE, "pipit_embed: " + std::to_string(ids->size()) +
                                              " tokens do not fit the context of " +
                                              std::to_string(session->s->n_ctx()));
    session->conv->reset();
    session->unexpanded.clear();
    session->images.clear();
    session->pending_images.clear();
    session->videos.clear();
    session->pending_videos.clear();
    session->audio_clips.clear();
    session->pending_audio.clear();
    auto v = pipit::embed_tokens(*session->s, *ids, cfg);
    if (!v) return to_status(v.status());
    std::copy(v->begin(), v->end(), out);
    return PIPIT_OK;
  });
}

pipit_status pipit_model_trim(pipit_model* model) {
  return guard([&] {
    if (!model) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_model_trim: NULL model");
    if (model->cache) model->cache = std::make_shared<pipit::PromptCache>(model->cache->stats().budget);
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    return PIPIT_OK;
  });
}

pipit_status pipit_estimate_memory(const char* path, const pipit_session_options* session, int32_t n_parallel,
                                   pipit_memory_estimate* out) {
  return guard([&] {
    if (!path || !out) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_estimate_memory: path and out must not be NULL");
    if (out->struct_size < sizeof(uint32_t))
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_estimate_memory: set out->struct_size to sizeof(*out)");
    pipit_session_options so;
    pipit_session_options_default(&so);
    if (auto st = read_options(session, &so, "pipit_session_options"); st != PIPIT_OK) return st;
    if (so.n_ctx < 0 || n_parallel < 1)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_estimate_memory: n_ctx must be >= 0 and n_parallel >= 1");
    pipit::MemoryEstimateOptions o;
    o.n_ctx = so.n_ctx;
    o.n_slot = n_parallel;
    switch (so.kv_type) {
      case PIPIT_KV_F32: o.kv_dtype = pipit::DType::F32; break;
      case PIPIT_KV_Q8_0: o.kv_dtype = pipit::DType::Q8_0; break;
      case PIPIT_KV_DEFAULT:
      case PIPIT_KV_F16: o.kv_dtype = pipit::DType::F16; break;
      default: return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_estimate_memory: kv_type is not a PIPIT_KV_* value");
    }
    auto e = pipit::estimate_memory(path, o);
    if (!e) return to_status(e.status());
    pipit_memory_estimate r{uint32_t(sizeof r), e->weights, e->tower_weights, e->kv_cache, e->activations,
                            e->tower_activations, e->tokenizer, e->runtime, e->load_transient, e->total()};
    const size_t n = std::min<size_t>(out->struct_size, sizeof r);
    const uint32_t caller_size = out->struct_size;
    std::memcpy(static_cast<void*>(out), &r, n);
    out->struct_size = caller_size;
    return PIPIT_OK;
  });
}

pipit_status pipit_session_attach_image(pipit_session* session, const char* path) {
  return guard([&] {
    if (!session || !path) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_image: NULL argument");
    if (!session->model->lm.model->vision())
      return fail(PIPIT_ERR_UNSUPPORTED, "model '" + session->model->lm.model->info().arch +
                                             "' has no vision tower; images are not supported");
    // decoded at the next generate, with the conversation's other images
    session->pending_images.push_back({path, {}});
    return PIPIT_OK;
  });
}

pipit_status pipit_session_attach_image_bytes(pipit_session* session, const void* data, size_t size) {
  return guard([&] {
    if (!session || !data || size == 0)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_image_bytes: NULL session or no bytes");
    if (!session->model->lm.model->vision())
      return fail(PIPIT_ERR_UNSUPPORTED, "model '" + session->model->lm.model->info().arch +
                                             "' has no vision tower; images are not supported");
    constexpr size_t kMaxBytes = size_t(256) << 20;  // a compressed image; its pixels are bounded when decoded
    if (size > kMaxBytes)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_image_bytes: " + pipit::format_bytes(size) +
                                                  " is over the limit of " + pipit::format_bytes(kMaxBytes));
    const auto* b = static_cast<const uint8_t*>(data);
    session->pending_images.push_back({"", std::vector<uint8_t>(b, b + size)});
    return PIPIT_OK;
  });
}

namespace {

// The three audio attach functions: the model's audio tower (built once per session), then the clip decoded and
// checked now, so a bad one is an error here.
pipit_status attach_audio(pipit_session* session, pipit::AudioSource src, const char* fn) {
  const pipit::LoadedModel& lm = session->model->lm;
  if (!pipit::takes_audio(lm.config.model_type()))
    return fail(PIPIT_ERR_UNSUPPORTED, std::string(fn) + ": model '" + lm.model->info().arch +
                                           "' does not take audio input");
  if (!session->audio_enc) {
    auto enc = pipit::audio_encoder_of(lm);
    if (!enc) return to_status(enc.status());
    session->audio_enc = std::shared_ptr<const pipit::AudioEncoder>(std::move(enc).value());
  }
  auto pcm = pipit::load_audio(src, session->audio_enc->max_seconds());
  if (!pcm) return to_status(pcm.status());
  pipit::AudioSource decoded;
  decoded.what = src.what;
  decoded.pcm = std::move(pcm).value();
  session->pending_audio.push_back(std::move(decoded));
  return PIPIT_OK;
}

}  // namespace

pipit_status pipit_session_attach_audio(pipit_session* session, const char* path) {
  return guard([&] {
    if (!session || !path) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_audio: NULL argument");
    pipit::AudioSource src;
    src.path = src.what = path;
    return attach_audio(session, std::move(src), "pipit_session_attach_audio");
  });
}

pipit_status pipit_session_attach_audio_bytes(pipit_session* session, const void* data, size_t size) {
  return guard([&] {
    if (!session || !data || size == 0)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_audio_bytes: NULL session or no bytes");
    constexpr size_t kMaxBytes = size_t(256) << 20;  // 30 s of 8-channel 192 kHz float is 184 MB
    if (size > kMaxBytes)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_audio_bytes: " + pipit::format_bytes(size) +
                                                  " is over the limit of " + pipit::format_bytes(kMaxBytes));
    pipit::AudioSource src;
    const auto* b = static_cast<const uint8_t*>(data);
    src.bytes.assign(b, b + size);
    src.what = "audio bytes #" + std::to_string(session->pending_audio.size() + session->audio_clips.size() + 1);
    return attach_audio(session, std::move(src), "pipit_session_attach_audio_bytes");
  });
}

pipit_status pipit_session_attach_audio_pcm(pipit_session* session, const float* samples, size_t n_samples) {
  return guard([&] {
    if (!session || (!samples && n_samples))
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_audio_pcm: NULL argument");
    constexpr size_t kMaxSamples = size_t(16000) * 3600;  // refused before the copy; the model's cap is far lower
    if (n_samples > kMaxSamples)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_audio_pcm: " + std::to_string(n_samples) +
                                                  " samples, more than an hour at 16 kHz");
    pipit::AudioSource src;
    src.pcm.assign(samples, samples + n_samples);
    src.what = "audio PCM #" + std::to_string(session->pending_audio.size() + session->audio_clips.size() + 1);
    if (src.pcm.empty())
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_audio_pcm: " + src.what + " has 0 samples");
    return attach_audio(session, std::move(src), "pipit_session_attach_audio_pcm");
  });
}

pipit_status pipit_session_attach_video_frames(pipit_session* session, const char* const* frames, int32_t n_frames,
                                               double fps) {
  return guard([&] {
    if (!session || !frames || n_frames <= 0)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_video_frames: NULL argument or no frames");
    const pipit::Model& m = *session->model->lm.model;
    if (!pipit::takes_video(m))
      return fail(PIPIT_ERR_UNSUPPORTED, "model '" + m.info().arch + "' does not take video input");
    constexpr int32_t kMaxFrames = 1000000;  // paths only; the generation decodes the sampled frames
    if (n_frames > kMaxFrames || !(fps > 0) || !std::isfinite(fps))
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_video_frames: " + std::to_string(n_frames) +
                                                  " frames at " + std::to_string(fps) + " fps (at most " +
                                                  std::to_string(kMaxFrames) + " frames, fps > 0)");
    pipit_session::PendingVideo v{{}, fps};
    for (int32_t i = 0; i < n_frames; ++i) {
      if (!frames[i]) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_video_frames: NULL frame path");
      v.frames.push_back(frames[i]);
    }
    session->pending_videos.push_back(std::move(v));
    return PIPIT_OK;
  });
}

namespace {

pipit_status attach_video(pipit_session* session, const char* fn, pipit_session::PendingVideo v) {
  return guard([&] {
    const pipit::Model& m = *session->model->lm.model;
    if (!pipit::takes_video(m))
      return fail(PIPIT_ERR_UNSUPPORTED, "model '" + m.info().arch + "' does not take video input");
    if (!pipit::video_files_supported())
      return fail(PIPIT_ERR_UNSUPPORTED, std::string(fn) + ": this build of pipit decodes no video files (built "
                                         "without FFmpeg's libraries); attach the frames instead");
    session->pending_videos.push_back(std::move(v));
    return PIPIT_OK;
  });
}

}  // namespace

pipit_status pipit_session_attach_video(pipit_session* session, const char* source) {
  if (!session || !source || !*source)
    return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_video: NULL session or source");
  return attach_video(session, "pipit_session_attach_video", {{}, 0.0, source, {}});
}

pipit_status pipit_session_attach_video_bytes(pipit_session* session, const void* data, size_t size) {
  if (!session || !data || size == 0)
    return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_video_bytes: NULL argument or no bytes");
  constexpr size_t kMaxBytes = size_t(4) << 30;  // a copy is kept until the generation
  if (size > kMaxBytes)
    return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_attach_video_bytes: " + std::to_string(size) +
                                                " bytes, more than 4 GiB");
  const auto* b = static_cast<const uint8_t*>(data);
  return attach_video(session, "pipit_session_attach_video_bytes", {{}, 0.0, {}, std::vector<uint8_t>(b, b + size)});
}

pipit_status pipit_session_cancel(pipit_session* session) {
  if (!session) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_cancel: NULL session");
  session->cancel.store(true);
  return PIPIT_OK;
}

}  // extern "C"

namespace {
// The session's grammar from `text` by `compile` (GBNF or a JSON schema); NULL or "" turns it off. `who` names the
// entry point in errors.
template <class Compile>
pipit_status set_session_grammar(pipit_session* session, const char* text, const char* who, Compile compile) {
  return guard([&] {
    if (!session) return fail(PIPIT_ERR_INVALID_ARGUMENT, std::string(who) + ": NULL session");
    if (!text || !*text) {
      session->grammar.reset();
      return PIPIT_OK;
    }
    auto g = compile(text);
    if (!g) return to_status(g.status().with_context(who));
    session->grammar = std::move(g).value();
    return PIPIT_OK;
  });
}
}  // namespace

extern "C" {

pipit_status pipit_session_set_grammar(pipit_session* session, const char* gbnf) {
  return set_session_grammar(session, gbnf, "pipit_session_set_grammar",
                             [](const char* t) { return pipit::Grammar::parse(t); });
}

pipit_status pipit_session_set_json_schema(pipit_session* session, const char* schema_json) {
  return set_session_grammar(session, schema_json, "pipit_session_set_json_schema",
                             [](const char* t) { return pipit::grammar_from_json_schema(t, "schema"); });
}

pipit_status pipit_session_set_logprobs(pipit_session* session, int32_t n_top) {
  return guard([&] {
    if (!session) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_set_logprobs: NULL session");
    if (n_top < -1 || n_top > 20)
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_set_logprobs: n_top " + std::to_string(n_top) +
                                                  " outside [-1, 20]");
    session->n_logprobs = n_top;
    return PIPIT_OK;
  });
}

pipit_status pipit_session_set_logit_bias(pipit_session* session, const int32_t* tokens, const float* biases,
                                          size_t n) {
  return guard([&] {
    if (!session || (n > 0 && (!tokens || !biases)))
      return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_set_logit_bias: NULL argument");
    std::vector<std::pair<int32_t, float>> bias;
    for (size_t i = 0; i < n; ++i) bias.emplace_back(tokens[i], biases[i]);
    const int64_t n_vocab = session->model->lm.model->info().n_vocab;
    if (auto st = pipit::check_logit_bias(bias, n_vocab, "pipit_session_set_logit_bias"); !st) return to_status(st);
    session->logit_bias = std::move(bias);
    return PIPIT_OK;
  });
}

int32_t pipit_session_n_logprobs(const pipit_session* session) {
  return session ? int32_t(session->logprobs.size()) : 0;
}

pipit_status pipit_session_logprob(const pipit_session* session, int32_t i, int32_t* token, float* logprob,
                                   int32_t* top_tokens, float* top_logprobs, int32_t capacity, int32_t* n_top) {
  return guard([&] {
    if (!session) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_logprob: NULL session");
    if (i < 0 || size_t(i) >= session->logprobs.size())
      return fail(PIPIT_ERR_OUT_OF_RANGE, "pipit_session_logprob: index " + std::to_string(i) + " outside [0, " +
                                              std::to_string(session->logprobs.size()) + ")");
    if (capacity < 0) return fail(PIPIT_ERR_INVALID_ARGUMENT, "pipit_session_logprob: capacity < 0");
    const pipit::TokenLogprob& lp = session->logprobs[size_t(i)];
    if (token) *token = lp.token;
    if (logprob) *logprob = lp.logprob;
    if (n_top) *n_top = int32_t(lp.top.size());
    for (size_t k = 0; k < lp.top.size() && k < size_t(capacity); ++k) {
      if (top_tokens) top_tokens[k] = lp.top[k].first;
      if (top_logprobs) top_logprobs[k] = lp.top[k].second;
    }
    return PIPIT_OK;
  });
}

}  // extern "C"
