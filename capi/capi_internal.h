// What the C API's files share: the handles' contents, the error mapping (a thread-local last-error string, no
// exception crossing into C) and the rule by which options structs grow (read_options).
#pragma once

#include "pipit/pipit.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "core/limits.h"
#include "core/status.h"
#include "runtime/file_watch.h"
#include "runtime/audio_input.h"
#include "runtime/conversation.h"
#include "runtime/generator.h"
#include "runtime/loader.h"
#include "runtime/mtp_draft.h"
#include "runtime/multimodal.h"
#include "runtime/multimodal_video.h"
#include "runtime/prompt_cache.h"
#include "runtime/session.h"

struct pipit_model {
  pipit::LoadedModel lm;
  // its mapped files, checked before each generation (runtime/file_watch.h)
  pipit::FileWatch files;
  // shared by the model's sessions (pipit_model_set_prompt_cache); null: off
  std::shared_ptr<pipit::PromptCache> cache;
};

struct pipit_session {
  pipit_model* model;
  std::unique_ptr<pipit::Session> s;
  // `s` with what its KV cache holds: each generation's prompt is the whole conversation, evaluated from where it
  // differs (runtime/conversation.h)
  std::unique_ptr<pipit::Conversation> conv;
  // Images of the conversation (vision-language models): attached paths not yet used, the encoded ones in the
  // order their placeholders appear, and the conversation's tokens with one placeholder per image (what the chat
  // template or the raw prompts give, before expansion)
  struct PendingImage {
    std::string path;            // a file path or data: URL, or
    std::vector<uint8_t> bytes;  // the file's bytes (pipit_session_attach_image_bytes)
  };
  std::vector<PendingImage> pending_images;
  std::vector<pipit::EncodedImage> images;
  // Videos (models with video input): attached frame lists not yet used, and the encoded ones in placeholder order
  struct PendingVideo {
    std::vector<std::string> frames;  // decoded frames at fps, or
    double fps;
    std::string source;               // a video file path or data: URL, or
    std::vector<uint8_t> bytes;       // a video file's bytes
  };
  std::vector<PendingVideo> pending_videos;
  std::vector<pipit::EncodedVideo> videos;
  // Audio clips (models with audio input): decoded at attach (16 kHz PCM) and not yet used, and the encoded soft
  // tokens of the conversation's clips in placeholder order
  std::vector<pipit::AudioSource> pending_audio;
  std::vector<pipit::Tensor> audio_clips;
  std::shared_ptr<const pipit::AudioEncoder> audio_enc;  // built at the first attach
  // the conversation's tokens with one placeholder per image / video / clip (before expansion), the answers' tokens
  // included: what the next raw-text prompt continues
  std::vector<int32_t> unexpanded;
  // the last generation: why it ended ("" after an error) and its prompt's counts
  std::string finish_reason;
  uint64_t last_seed = 0;  // pipit_session_last_seed
  int32_t n_prompt = 0, n_reused = 0, n_evaluated = 0;
  // speculative decoding (pipit_session_set_speculation): n_draft 0 is off; a draft model's own session
  int32_t n_draft = 0;
  std::unique_ptr<pipit::Session> draft_session;
  pipit::Draft draft{nullptr, {}};
  pipit::SpecStats spec;
  // pipit_session_options.mtp: guesses per pass from the model's MTP head, which follows `s` (declared after it:
  // destroyed first)
  int32_t n_mtp = 0;
  std::unique_ptr<pipit::MtpDraft> mtp;
  // structured output and log-probabilities for the next generations (pipit_session_set_grammar / _logprobs), and
  // the last generation's records
  std::shared_ptr<const pipit::Grammar> grammar;
  int32_t n_logprobs = -1;
  std::vector<std::pair<int32_t, float>> logit_bias;  // pipit_session_set_logit_bias
  std::vector<pipit::TokenLogprob> logprobs;
  // pipit_session_cancel from another thread; cleared when a generation starts
  std::atomic<bool> cancel{false};
};

namespace pipit::capi {

extern thread_local std::string g_last_error;


inline pipit_status to_status(const pipit::Status& st) {
  g_last_error = st.message();
  switch (st.code()) {
    case pipit::Code::kOk: return PIPIT_OK;
    case pipit::Code::kInvalidArgument: return PIPIT_ERR_INVALID_ARGUMENT;
    case pipit::Code::kNotFound: return PIPIT_ERR_NOT_FOUND;
    case pipit::Code::kIo: return PIPIT_ERR_IO;
    case pipit::Code::kFormat: return PIPIT_ERR_FORMAT;
    case pipit::Code::kUnsupported: return PIPIT_ERR_UNSUPPORTED;
    case pipit::Code::kOutOfRange: return PIPIT_ERR_OUT_OF_RANGE;
    case pipit::Code::kCancelled: return PIPIT_ERR_CANCELLED;
    case pipit::Code::kUnavailable: return PIPIT_ERR_UNAVAILABLE;
    default: return PIPIT_ERR_INTERNAL;
  }
}

inline pipit_status fail(pipit_status s, const std::string& msg) {
  g_last_error = msg;
  return s;
}

// Runs f, turning any escaping exception into PIPIT_ERR_INTERNAL (nothing may unwind into C).
template <class F>
pipit_status guard(F&& f) {
  g_last_error.clear();
  try {
    return f();
  } catch (const std::bad_alloc&) {  // a real allocation on a full machine: sizes were checked before
    return fail(PIPIT_ERR_UNAVAILABLE, "out of memory (" + pipit::format_bytes(pipit::available_memory()) +
                                           " available now)");
  } catch (const std::exception& e) {
    return fail(PIPIT_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(PIPIT_ERR_INTERNAL, "internal error");
  }
}

inline pipit_status write_string(const std::string& s, char* buf, size_t cap, size_t* len_out) {
  if (len_out) *len_out = s.size();
  if (!buf || cap < s.size() + 1) return fail(PIPIT_ERR_BUFFER_TOO_SMALL, "buffer too small for the result");
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  return PIPIT_OK;
}

// The KV cache dtype of a PIPIT_KV_* value, checked against the model (q8_0 needs head_dim % 32 == 0 and the CPU).
pipit::Result<pipit::DType> kv_dtype_of(int32_t kv_type, const pipit::Model& m, const char* who);

// The app's log callback (pipit_set_log_callback): whether one is set, and a message to it (none: dropped).
bool log_enabled();
void log_message(int32_t level, const std::string& message);

// An options struct as the caller's header declares it (its struct_size; 0 means `v1_size` where an API version 1
// layout existed, else invalid), completed with `defaults` for the fields past it. A newer header's fields this
// library does not know must be zero. `who` names the struct in errors.
template <class T>
pipit_status read_options(const T* in, T* out, const char* who, size_t v1_size = 0) {
  if (!in) return PIPIT_OK;  // *out holds the defaults
  size_t n = in->struct_size;
  if (n == 0) n = v1_size;
  if (n < sizeof(uint32_t))
    return fail(PIPIT_ERR_INVALID_ARGUMENT, std::string(who) + ".struct_size is " + std::to_string(in->struct_size) +
                                                ": initialise the struct with its *_default() macro first");
  if (n > sizeof(T)) {
    const auto* extra = reinterpret_cast<const unsigned char*>(in) + sizeof(T);
    for (size_t i = 0; i < n - sizeof(T); ++i)
      if (extra[i])
        return fail(PIPIT_ERR_UNSUPPORTED, std::string(who) + " sets a field this library (API version " +
                                               std::to_string(PIPIT_API_VERSION) + ") does not know");
    n = sizeof(T);
  }
  std::memcpy(static_cast<void*>(out), in, n);
  out->struct_size = uint32_t(sizeof(T));
  return PIPIT_OK;
}

// *_options_init: the library's defaults, written within the caller's `size` bytes (a newer header's extra fields
// zeroed), struct_size = size.
template <class T>
void init_options(T* o, size_t size, const T& defaults) {
  if (!o || size < sizeof(uint32_t)) return;
  std::memset(static_cast<void*>(o), 0, size);
  std::memcpy(static_cast<void*>(o), &defaults, std::min(size, sizeof(T)));
  o->struct_size = uint32_t(size);
}

}  // namespace pipit::capi
