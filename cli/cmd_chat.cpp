// `pipit chat`: an interactive chat in the terminal. Keeps the conversation, renders it with the model's chat
// template each turn and streams the answer. The KV cache is reused across turns: when the new rendering starts
// with the text the session already holds, only the rest is evaluated (otherwise the session starts over).
// Ctrl-C stops the current answer (a SIGINT handler sets a flag the token callback reads); Ctrl-D or /exit quits.
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/audio_args.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/image_args.h"
#include "cli/structured_args.h"
#include "models/media_note.h"
#include "models/vision/image.h"
#include "models/vision/vision_model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pipit::cli {

namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

// A path as people type or drag it into a terminal after /image: surrounding spaces and quotes ('...' or "...")
// removed, backslash escapes ("My\ Pictures/cat.png", what a file dropped on a terminal gives) undone, a leading
// ~/ made $HOME/.
std::string typed_path(std::string p) {
  const size_t b = p.find_first_not_of(" \t"), e = p.find_last_not_of(" \t");
  p = b == std::string::npos ? "" : p.substr(b, e - b + 1);
  if (p.size() >= 2 && (p.front() == '\'' || p.front() == '"') && p.back() == p.front()) {
    p = p.substr(1, p.size() - 2);
  } else {
    std::string out;
    for (size_t i = 0; i < p.size(); ++i) out += p[i] == '\\' && i + 1 < p.size() ? p[++i] : p[i];
    p = out;
  }
  const char* home = std::getenv("HOME");
  if (home && (p == "~" || p.rfind("~/", 0) == 0)) p = home + p.substr(1);
  return p;
}

// Lines from stdin, read with poll() + read() so a Ctrl-C is noticed within kPollMs whenever it arrives (a
// blocking read could miss a signal that lands just before it starts). A line ending in '\' continues.
class LineReader {
 public:
  enum Got { kLine, kInterrupted, kEof };
  Got next(std::string& out) {
    out.clear();
    for (;;) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty() && line.back() == '\\') {
          line.back() = '\n';
          out += line;
          continue;
        }
        out += line;
        return kLine;
      }
      if (eof_) {
        if (buf_.empty() && out.empty()) return kEof;
        out += buf_;
        buf_.clear();
        return kLine;
      }
      if (g_interrupted) return kInterrupted;
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (poll(&p, 1, kPollMs) <= 0) continue;  // timeout or EINTR: look at the flag again
      char chunk[4096];
      const ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
      if (n > 0) buf_.append(chunk, size_t(n));
      else if (n == 0 || errno != EINTR) eof_ = true;
    }
  }

 private:
  static constexpr int kPollMs = 100;
  std::string buf_;
  bool eof_ = false;
};

struct Chat {
  const LoadedModel& lm;
  const Tokenizer& tok;
  Session& session;
  GenerateParams params;
  ImageOptions image_opt;
  std::string system;
  nlohmann::json template_extra = nlohmann::json::object();  // --chat-template, --chat-template-kwargs
  nlohmann::json messages = nlohmann::json::array();
  std::vector<std::string> images;   // every image of the conversation, in order
  std::vector<std::string> pending;  // attached to the next user message
  std::string held;                  // the text the session's KV cache holds
  std::vector<int32_t> held_ids;     // its tokens (speculative decoding looks up guesses in them)
  size_t images_held = 0;            // how many of `images` it holds
  std::vector<EncodedVideo> videos;  // --video (Qwen3.5): encoded, in conversation order; the first pending
  size_t videos_held = 0, videos_pending = 0;
  std::vector<AudioSource> audios;         // every clip of the conversation (decoded at attach), in order
  std::vector<AudioSource> audio_pending;  // attached to the next user message
  size_t audios_held = 0;                  // how many of `audios` the session holds
  int reused = 0;                    // last turn: tokens of the cache kept from before

  void clear() {
    messages = nlohmann::json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    images.clear();
    pending.clear();
    held.clear();
    images_held = 0;
    audios.clear();
    audios_held = 0;
    videos_held = 0;
    videos.erase(videos.begin(), videos.end() - long(videos_pending));  // an attached video stays attached
    held_ids.clear();
    session.reset();
  }

  Status attach(const std::string& path) {
    if (!lm.model->vision())
      return Error::unsupported("this model does not accept images{}", media_note_suffix(lm.model->info().arch));
    PIPIT_ASSIGN_OR_RETURN(Image img, load_image(path));
    pending.push_back(path);
    std::fprintf(stderr, "[image %s: %dx%d, attached to your next message]\n", path.c_str(), img.width, img.height);
    return Status::ok();
  }

  // A video (a file, or its frames at `fps`), encoded now and placed before the next message's text.
  Status attach_video(const std::string& spec, double fps) {
    const VisionLanguageModel* v = lm.model->vision();
    if (!v || v->vision_tokens().video_token_id < 0)
      return Error::unsupported("model type '{}' does not take video input", lm.model->info().arch);
    PIPIT_ASSIGN_OR_RETURN(EncodedVideo video, encode_video_frames(lm, spec, fps, session.pool()));
    std::fprintf(stderr, "[video: %zu frames sampled, %d tokens, attached to your next message]\n",
                 video.processed.frame_indices.size(), int(video.features.dim(0)));
    videos.push_back(std::move(video));
    ++videos_pending;
    return Status::ok();
  }

  // /audio, --audio: decoded now (a bad file is refused at once), encoded with the message.
  Status attach_audio(const std::string& path) {
    PIPIT_TRY(check_takes_audio(lm));
    PIPIT_ASSIGN_OR_RETURN(auto enc, audio_encoder_of(lm));
    AudioSource src;
    src.what = path;
    PIPIT_ASSIGN_OR_RETURN(AudioClip clip, decode_audio_file(path, enc->max_seconds()));
    src.pcm = std::move(clip.samples);
    std::fprintf(stderr, "[audio %s: %.1f s, attached to your next message]\n", path.c_str(),
                 double(src.pcm.size()) / kAudioSampleRate);
    audio_pending.push_back(std::move(src));
    return Status::ok();
  }

  // One user turn: renders, evaluates what is new, streams the answer. On failure the turn is forgotten.
  Result<GenerateResult> turn(const std::string& text) {
    const size_t n_messages = messages.size(), n_images = images.size(), n_pending_videos = videos_pending;
    const std::vector<std::string> attached = pending;
    const size_t n_audios = audios.size();
    const std::vector<AudioSource> attached_audio = audio_pending;
    Result<GenerateResult> r = answer(text);
    if (!r.is_ok()) {
      messages.erase(messages.begin() + long(n_messages), messages.end());
      images.resize(n_images);
      pending = attached;
      audios.resize(n_audios);
      audio_pending = attached_audio;
      videos_pending = n_pending_videos;
    }
    return r;
  }

  Result<GenerateResult> answer(const std::string& text) {
    nlohmann::json content = text;
    if (!pending.empty() || videos_pending > 0 || !audio_pending.empty()) {
      content = nlohmann::json::array();
      for (size_t i = 0; i < videos_pending; ++i) content.push_back({{"type", "video"}});
      videos_pending = 0;
      for (size_t i = 0; i < pending.size(); ++i) content.push_back({{"type", "image"}});
      for (size_t i = 0; i < audio_pending.size(); ++i) content.push_back({{"type", "audio"}});
      audios.insert(audios.end(), audio_pending.begin(), audio_pending.end());
      audio_pending.clear();
      content.push_back({{"type", "text"}, {"text", text}});
      images.insert(images.end(), pending.begin(), pending.end());
      pending.clear();
    }
    messages.push_back({{"role", "user"}, {"content", content}});
    PIPIT_ASSIGN_OR_RETURN(std::string full,
                           apply_chat_template(tok, messages, /*add_generation_prompt=*/true, template_extra));
    if (session.n_past() == 0 || held.empty() || full.compare(0, held.size(), held) != 0) {
      session.reset();  // the template rewrote earlier turns (or nothing is held): start over
      held.clear();
      held_ids.clear();
      images_held = 0;
      videos_held = 0;
      audios_held = 0;
    }
    PIPIT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(full.substr(held.size()), false));
    reused = session.n_past();
    if (session.n_past() + int64_t(ids.size()) >= session.n_ctx() && session.n_past() > 0) {
      session.reset();  // no room after what is held: re-evaluate the conversation from the start
      held.clear();
      held_ids.clear();
      images_held = 0;
      videos_held = 0;
      audios_held = 0;
      PIPIT_ASSIGN_OR_RETURN(ids, tok.encode(full, false));
      reused = 0;
    }
    auto print = [](const std::string& piece, int32_t) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
      return !g_interrupted;
    };
    const std::vector<std::string> new_images(images.begin() + long(images_held), images.end());
    const std::vector<EncodedVideo> new_videos(videos.begin() + long(videos_held), videos.end());
    const std::vector<AudioSource> new_audios(audios.begin() + long(audios_held), audios.end());
    Result<GenerateResult> res = Error::internal("unset");
    if (int64_t(held_ids.size()) != session.n_past()) held_ids.clear();  // not known (images): no context to search
    params.spec.context = held_ids;
    if (!new_images.empty() || !new_videos.empty() || !new_audios.empty()) {
      MultimodalPrompt mm;
      if (new_images.empty() && new_videos.empty()) {
        mm = text_prompt(ids);
      } else if (new_videos.empty()) {
        PIPIT_ASSIGN_OR_RETURN(mm, prepare_multimodal_prompt(lm, ids, new_images, image_opt, session.pool()));
      } else {  // the images encoded here, beside the videos encoded at attach time
        PIPIT_ASSIGN_OR_RETURN(nlohmann::json pp, preprocessor_config_of(lm));
        PIPIT_ASSIGN_OR_RETURN(ImageProcessorConfig proc, image_processor_for(*lm.model, pp, image_opt));
        std::vector<EncodedImage> encoded;
        for (const auto& path : new_images) {
          PIPIT_ASSIGN_OR_RETURN(Image img, load_image(path));
          PIPIT_ASSIGN_OR_RETURN(EncodedImage e, encode_image(*lm.model, proc, img, session.pool()));
          encoded.push_back(std::move(e));
        }
        const TextEncoder encode = [this](const std::string& t) { return tok.encode(t, false); };
        PIPIT_ASSIGN_OR_RETURN(mm, build_multimodal_prompt(*lm.model, ids, encoded, new_videos, encode));
      }
      if (!new_audios.empty()) PIPIT_TRY(add_audio(lm, mm, new_audios, session.pool()));
      if (session.n_past() + int64_t(mm.tokens.size()) >= session.n_ctx())
        return Error::out_of_range("the conversation ({} tokens) does not fit the context of {}; /clear starts over",
                                   session.n_past() + mm.tokens.size(), session.n_ctx());
      res = generate(session, &tok, mm, params, print);
      ids = mm.tokens;
    } else {
      if (session.n_past() + int64_t(ids.size()) >= session.n_ctx())
        return Error::out_of_range("the conversation ({} tokens) does not fit the context of {}; /clear starts over",
                                   session.n_past() + ids.size(), session.n_ctx());
      res = generate(session, &tok, ids, params, print);
    }
    if (!res.is_ok()) {
      session.reset();
      held.clear();
      held_ids.clear();
      images_held = 0;
      videos_held = 0;
      audios_held = 0;
      return res;
    }
    held_ids.insert(held_ids.end(), ids.begin(), ids.end());
    held_ids.insert(held_ids.end(), res->tokens.begin(), res->tokens.end());
    images_held = images.size();
    videos_held = videos.size();
    audios_held = audios.size();
    held = full;
    // The last sampled token is not in the cache yet (EOS never is: the template writes its own end of turn).
    if (res->reason != StopReason::kEos && !res->tokens.empty()) {
      const int32_t last = res->tokens.back();
      if (!session.eval(std::span<const int32_t>(&last, 1)).is_ok()) session.reset();
    }
    if (int64_t(held_ids.size()) != session.n_past()) held_ids.clear();
    held += tok.decode(res->tokens, /*skip_special_tokens=*/false);
    messages.push_back({{"role", "assistant"}, {"content", res->text}});
    return res;
  }
};

const char* kHelp =
    "commands: /clear (forget the conversation), /image PATH (attach an image to your next message),\n"
    "          /audio PATH (attach an audio clip: WAV, FLAC, OGG, MP3), /video FILE (attach a video: Qwen3.5), /exit\n"
    "Ctrl-C stops an answer; Ctrl-D or /exit quits; end a line with \\ to continue it on the next.\n";

int cmd_chat(Args& a) {
  add_model_options(a);
  add_sampling_options(a);
  add_image_options(a);
  add_video_options(a);
  add_audio_options(a);
  add_speculative_options(a);
  add_structured_options(a);
  a.option({"-s", "--system"}, "system message");
  a.flag({"-v", "--verbose"}, "after each answer: tokens reused from the cache, evaluated, generated, speed");
  add_template_options(a);
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || !a.has("-m")) {
    std::printf("usage: pipit chat -m MODEL [-s SYSTEM] [--image PATH] [--audio PATH] [--video FRAMES] [options]\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  if (auto st = check_system_option(a); !st) return fail(a, st.message());
  auto template_extra = template_context(a);
  if (!template_extra) return fail(a, template_extra.status().message());
  auto so = session_options(a);
  if (!so) return fail(a, so.status().message());
  auto gp = generate_params(a);
  if (!gp) return fail(a, gp.status().message());
  auto io = image_options(a);
  if (!io) return fail(a, io.status().message());
  // SIGINT goes to this thread, not to a worker: workers start with it blocked.
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigint, nullptr);
  auto lo = load_options(a, true);
  if (!lo) return fail(a, lo.status().message());
  auto lm = load_model(a.get("-m"), *lo);
  if (!lm) return fail(a, lm.status().message());
  if (auto st = check_kv_type(*lm->model, so->kv_dtype); !st) return fail(a, st.message());
  if (auto st = check_model_sampling(*lm, *gp); !st) return fail(a, st.message());
  for (const auto& f : apply_model_sampling(a, *lm, *gp))
    std::fprintf(stderr, "[pipit] generation_config.json: %s is out of range, ignored\n", f.c_str());
  if (lm->tokenizer->config().chat_template.empty() && !a.has("--chat-template"))
    return fail(a, "this model has no chat template; use `pipit run` for plain text continuation");

  auto grammar = structured_grammar(a);
  if (!grammar) return fail(a, grammar.status().message());
  gp->grammar = *grammar;
  auto pool = std::make_shared<ThreadPool>(so->n_threads > 0 ? so->n_threads : ThreadPool::default_threads());
  auto session = Session::create(*lm->model, *so, pool);
  if (!session) return fail(a, session.status().message());
  auto spec = speculative_setup(a, *lm->model, *so, pool);
  if (!spec) return fail(a, spec.status().message());
  if (auto st = (*spec)->attach(**session); !st) return fail(a, st.message());
  gp->spec = (*spec)->params;
  Chat chat{*lm, *lm->tokenizer, **session, *gp, *io, a.get("-s")};
  chat.clear();
  chat.template_extra = *template_extra;
  for (const auto& path : a.get_all("--image"))
    if (auto st = chat.attach(path); !st) return fail(a, st.message());
  for (const auto& path : a.get_all("--audio"))
    if (auto st = chat.attach_audio(path); !st) return fail(a, st.message());
  auto video_fps = a.get_float("--video-fps");
  if (!video_fps) return fail(a, video_fps.status().message());
  if (has_video(a))  // attached to the first message
    if (auto st = chat.attach_video(a.get("--video"), *video_fps); !st) return fail(a, "--video: " + st.message());

  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  pthread_sigmask(SIG_UNBLOCK, &sigint, nullptr);

  std::fprintf(stderr, "pipit chat: %s (context %d). /help for commands.\n", a.get("-m").c_str(),
               chat.session.n_ctx());
  LineReader input;
  for (;;) {
    g_interrupted = 0;
    std::fputs("> ", stdout);
    std::fflush(stdout);
    std::string line;
    const LineReader::Got got = input.next(line);
    if (got == LineReader::kEof) break;  // Ctrl-D
    if (got == LineReader::kInterrupted) {
      std::fputs("\n(Ctrl-D or /exit quits)\n", stdout);
      continue;
    }
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/help") {
      std::fputs(kHelp, stdout);
      continue;
    }
    if (line == "/clear") {
      chat.clear();
      std::fputs("[conversation cleared]\n", stdout);
      continue;
    }
    if (line == "/image" || line.rfind("/image ", 0) == 0) {
      std::string path = typed_path(line.substr(6));
      if (path.empty()) std::fputs("usage: /image PATH\n", stdout);
      else if (auto st = chat.attach(path); !st) std::fprintf(stdout, "error: %s\n", st.message().c_str());
      continue;
    }
    if (line == "/video" || line.rfind("/video ", 0) == 0) {
      std::string path = typed_path(line.substr(6));
      if (path.empty()) std::fputs("usage: /video FILE (or a directory of frames, at --video-fps)\n", stdout);
      else if (auto st = chat.attach_video(path, *video_fps); !st) std::fprintf(stdout, "error: %s\n", st.message().c_str());
      continue;
    }
    if (line == "/audio" || line.rfind("/audio ", 0) == 0) {
      std::string path = typed_path(line.substr(6));
      if (path.empty()) std::fputs("usage: /audio PATH\n", stdout);
      else if (auto st = chat.attach_audio(path); !st) std::fprintf(stdout, "error: %s\n", st.message().c_str());
      continue;
    }
    if (line[0] == '/') {
      std::fprintf(stdout, "unknown command %s\n%s", line.c_str(), kHelp);
      continue;
    }
    auto res = chat.turn(line);
    if (!res.is_ok()) {
      std::fprintf(stdout, "\nerror: %s\n", res.status().message().c_str());
      continue;
    }
    if (res->reason == StopReason::kCallback)
      std::fputs(" [stopped]\n", stdout);
    else if (res->reason == StopReason::kContext)  // not a finished answer: say so, and what to do
      std::fprintf(stdout, " [context full (%d tokens): the answer is cut; /clear starts over, -c raises it]\n",
                   chat.session.n_ctx());
    else
      std::fputs("\n", stdout);
    std::fflush(stdout);
    if (a.get_flag("-v")) {
      const size_t n_dec = res->tokens.size() > 1 ? res->tokens.size() - 1 : 0;
      std::fprintf(stderr, "[reused %d cached tokens | prompt %d tokens, %.1f ms | %zu tokens, %.1f tok/s | %s]\n",
                   chat.reused, res->n_prompt, res->prompt_ms, res->tokens.size(),
                   res->gen_ms > 0 ? double(n_dec) * 1000.0 / res->gen_ms : 0.0, stop_reason_name(res->reason));
    }
  }
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("chat", "interactive chat in the terminal", cmd_chat);

}  // namespace pipit::cli
