// `pipit chat`: an interactive chat in the terminal. Keeps the conversation, renders it with the model's chat
// template each turn and streams the answer. The KV cache is reused across turns (runtime/conversation.h): each
// turn evaluates the rendered conversation from the first token (or image row) the context does not hold.
// Ctrl-C stops the current answer (a SIGINT handler sets a flag the token callback reads); Ctrl-D or /exit quits.
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/audio_args.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/image_args.h"
#include "cli/line_input.h"
#include "cli/structured_args.h"
#include "core/limits.h"
#include "core/output_file.h"
#include "models/media_note.h"
#include "models/vision/image.h"
#include "models/vision/vision_model.h"
#include "runtime/conversation.h"
#include "runtime/generation_defaults.h"
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

// Media of the conversation by the part that names it ({"type": "image", "image": PATH}, audio, video): encoded
// once, kept while a message still has it.
struct MediaCache {
  std::map<std::string, EncodedImage> images;
  std::map<std::string, std::vector<float>> pcm;  // decoded at attach (a bad file is refused at once)
  std::map<std::string, Tensor> clips;            // encoded
  std::map<std::string, EncodedVideo> videos;     // encoded at attach
};

std::string video_key(const nlohmann::json& part) {
  return part.value("video", std::string()) + "@" + std::to_string(part.value("fps", 0.0));
}

struct Chat {
  const LoadedModel& lm;
  const Tokenizer& tok;
  Session& session;
  GenerateParams params;
  ImageOptions image_opt;
  std::string system;
  nlohmann::json template_extra = nlohmann::json::object();  // --chat-template, --chat-template-kwargs
  nlohmann::json messages = nlohmann::json::array();
  nlohmann::json pending = nlohmann::json::array();  // media parts attached to the next user message
  MediaCache media;
  std::unique_ptr<AudioEncoder> audio_enc;  // built at the first /audio
  Conversation conv{session};               // what the KV cache holds: each turn evaluates what differs

  void clear() {
    messages = nlohmann::json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    nlohmann::json kept = nlohmann::json::array();  // an attached video stays attached
    for (auto& p : pending)
      if (p["type"] == "video") kept.push_back(p);
    pending = kept;
    conv.reset();
  }

  // /system TEXT: the conversation's system message from now on ("" removes it); the next turn re-evaluates from
  // the first position the new rendering changes.
  void set_system(const std::string& text) {
    system = text;
    if (!messages.empty() && messages[0]["role"] == "system") messages.erase(messages.begin());
    if (!system.empty()) messages.insert(messages.begin(), nlohmann::json{{"role", "system"}, {"content", system}});
  }

  Status attach(const std::string& path) {
    if (!lm.model->vision())
      return Error::unsupported("this model does not accept images{}", media_note_suffix(lm.model->info().arch));
    PIPIT_ASSIGN_OR_RETURN(Image img, load_image(path));
    pending.push_back({{"type", "image"}, {"image", path}});
    std::fprintf(stderr, "[image %s: %dx%d, attached to your next message]\n", path.c_str(), img.width, img.height);
    return Status::ok();
  }

  // A video (a file, or its frames at `fps`), encoded now and placed before the next message's text.
  Status attach_video(const std::string& spec, double fps) {
    if (!takes_video(*lm.model))
      return Error::unsupported("model type '{}' does not take video input", lm.model->info().arch);
    const nlohmann::json part = {{"type", "video"}, {"video", spec}, {"fps", fps}};
    if (!media.videos.count(video_key(part))) {
      PIPIT_ASSIGN_OR_RETURN(EncodedVideo video, encode_video_frames(lm, spec, fps, session.pool()));
      media.videos.emplace(video_key(part), std::move(video));
    }
    const EncodedVideo& video = media.videos.at(video_key(part));
    std::fprintf(stderr, "[video: %zu frames sampled, %d tokens, attached to your next message]\n",
                 video.processed.frame_indices.size(), int(video.features.dim(0)));
    pending.push_back(part);
    return Status::ok();
  }

  // /audio, --audio: decoded now (a bad file is refused at once), encoded with the message.
  Status attach_audio(const std::string& path) {
    PIPIT_TRY(check_takes_audio(lm));
    if (!audio_enc) {
      PIPIT_ASSIGN_OR_RETURN(audio_enc, audio_encoder_of(lm));
    }
    PIPIT_ASSIGN_OR_RETURN(AudioClip clip, decode_audio_file(path, audio_enc->max_seconds()));
    std::fprintf(stderr, "[audio %s: %.1f s, attached to your next message]\n", path.c_str(),
                 double(clip.samples.size()) / kAudioSampleRate);
    media.pcm[path] = std::move(clip.samples);
    media.clips.erase(path);  // the file may have changed since it was last attached
    pending.push_back({{"type", "audio"}, {"audio", path}});
    return Status::ok();
  }

  // One user turn: the message (with the attached media before its text), then the answer. On failure the turn
  // is forgotten (the media stay attached).
  Result<GenerateResult> turn(const std::string& text) {
    nlohmann::json content = text;
    if (!pending.empty()) {
      content = pending;
      content.push_back({{"type", "text"}, {"text", text}});
    }
    messages.push_back({{"role", "user"}, {"content", content}});
    Result<GenerateResult> r = answer();
    if (!r.is_ok()) {
      messages.erase(messages.end() - 1);
      return r;
    }
    pending = nlohmann::json::array();
    return r;
  }

  // /regen: the last answer again, with the next seed (reproducible in a scripted chat with --seed).
  Result<GenerateResult> regenerate() {
    if (messages.empty() || messages.back()["role"] != "assistant")
      return Error::invalid_argument("there is no answer to regenerate");
    const nlohmann::json last = messages.back();
    messages.erase(messages.end() - 1);
    params.sampler.seed += 1;
    Result<GenerateResult> r = answer();
    if (!r.is_ok()) messages.push_back(last);
    return r;
  }

  // The messages with their media as the prompt the model reads: rendered, tokenized, every placeholder expanded
  // with the media's encodings (the new ones encoded now).
  Result<MultimodalPrompt> prompt() {
    PIPIT_ASSIGN_OR_RETURN(std::string full,
                           apply_chat_template(tok, messages, /*add_generation_prompt=*/true, template_extra));
    PIPIT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(full, false));
    std::vector<EncodedImage> images;
    std::vector<EncodedVideo> videos;
    std::vector<Tensor> clips;
    std::set<std::string> used;
    for (const auto& m : messages) {
      if (!m["content"].is_array()) continue;
      for (const auto& part : m["content"]) {
        const std::string type = part.value("type", std::string());
        if (type == "image") {
          const std::string path = part.value("image", std::string());
          auto it = media.images.find(path);
          if (it == media.images.end()) {
            PIPIT_ASSIGN_OR_RETURN(nlohmann::json pp, preprocessor_config_of(lm));
            PIPIT_ASSIGN_OR_RETURN(ImageProcessorConfig proc, image_processor_for(*lm.model, pp, image_opt));
            PIPIT_ASSIGN_OR_RETURN(Image img, load_image(path));
            auto e = encode_image(*lm.model, proc, img, session.pool());
            if (!e) return e.status().with_context("[image] " + path);
            it = media.images.emplace(path, std::move(e).value()).first;
          }
          images.push_back(it->second);
          used.insert("image:" + path);
        } else if (type == "video") {
          auto it = media.videos.find(video_key(part));
          if (it == media.videos.end()) return Error::internal("[chat] video {} not encoded", video_key(part));
          videos.push_back(it->second);
          used.insert("video:" + video_key(part));
        } else if (type == "audio") {
          const std::string path = part.value("audio", std::string());
          auto it = media.clips.find(path);
          if (it == media.clips.end()) {
            auto pcm = media.pcm.find(path);
            if (pcm == media.pcm.end()) return Error::internal("[chat] audio {} not decoded", path);
            auto e = encode_audio(*audio_enc, pcm->second, session.pool());
            if (!e) return e.status().with_context("[audio] " + path);
            it = media.clips.emplace(path, std::move(e).value()).first;
          }
          clips.push_back(it->second);
          used.insert("audio:" + path);
        }
      }
    }
    // encodings no message uses any more go (a pending attachment keeps its decoded / encoded form)
    for (const auto& p : pending) {
      const std::string type = p.value("type", std::string());
      used.insert(type + ":" + (type == "video" ? video_key(p) : p.value(type, std::string())));
    }
    std::erase_if(media.images, [&](const auto& kv) { return !used.count("image:" + kv.first); });
    std::erase_if(media.clips, [&](const auto& kv) { return !used.count("audio:" + kv.first); });
    std::erase_if(media.pcm, [&](const auto& kv) { return !used.count("audio:" + kv.first); });
    std::erase_if(media.videos, [&](const auto& kv) { return !used.count("video:" + kv.first); });
    if (images.empty() && videos.empty() && clips.empty()) return text_prompt(ids);
    MultimodalPrompt mm;
    if (images.empty() && videos.empty()) {
      mm = text_prompt(ids);
    } else {
      const TextEncoder encode = [this](const std::string& t) { return tok.encode(t, false); };
      PIPIT_ASSIGN_OR_RETURN(mm, build_multimodal_prompt(*lm.model, ids, images, videos, encode));
    }
    if (!clips.empty()) PIPIT_TRY(splice_audio(mm, audio_enc->tokens(), clips));
    return mm;
  }

  // The prompt, with the oldest turns dropped while it leaves less room than an answer needs (max_tokens, at
  // most a quarter of the context): a long chat goes on instead of ending at a full context.
  Result<MultimodalPrompt> fitted_prompt() {
    const int n_ctx = session.n_ctx();
    const int room = std::max(1, std::min(params.max_tokens > 0 ? params.max_tokens : n_ctx, n_ctx / 4));
    int dropped = 0;
    for (;;) {
      PIPIT_ASSIGN_OR_RETURN(MultimodalPrompt mm, prompt());
      if (int64_t(mm.tokens.size()) + room <= n_ctx) {
        if (dropped > 0)
          std::fprintf(stderr, "[context: the %d oldest messages were dropped to fit the context of %d tokens]\n",
                       dropped, n_ctx);
        return mm;
      }
      // the first turn after the system message: its user message and everything up to the next user message
      const size_t first = !messages.empty() && messages[0]["role"] == "system" ? 1 : 0;
      size_t next = first + 1;
      while (next < messages.size() && messages[next]["role"] != "user") ++next;
      if (next >= messages.size()) {  // only the new message is left
        if (mm.tokens.size() < size_t(n_ctx)) return mm;  // it fits, with less room for the answer
        return Error::out_of_range("the message ({} tokens with the template) does not fit the context of {}; -c "
                                   "raises it",
                                   mm.tokens.size(), n_ctx);
      }
      dropped += int(next - first);
      messages.erase(messages.begin() + long(first), messages.begin() + long(next));
    }
  }

  Result<GenerateResult> answer() {
    PIPIT_ASSIGN_OR_RETURN(MultimodalPrompt mm, fitted_prompt());
    auto print = [](const std::string& piece, int32_t) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
      return !g_interrupted;
    };
    Result<GenerateResult> res = mm.embd_row.empty() ? conv.generate(&tok, mm.tokens, params, print)
                                                     : conv.generate(&tok, mm, params, print);
    if (res.is_ok()) messages.push_back({{"role", "assistant"}, {"content", res->text}});
    return res;
  }

  // /save FILE: the conversation as JSON ({"messages": [...]}, media parts naming their files).
  Status save(const std::string& path) const {
    // as a shell redirection would write it: a FIFO nobody reads, a directory or /dev/full is an error, not a hang
    PIPIT_ASSIGN_OR_RETURN(std::FILE * f, open_output_stream(path, "/save"));
    const std::string text = nlohmann::json{{"messages", messages}}.dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), f);
    return close_output(f, path, "/save");
  }

  // /load FILE: a conversation /save wrote (or any {"messages": [...]} / [...] of role + content), its media
  // checked (images load, clips decode, videos encode) before it replaces the current one.
  Status load(const std::string& path) {
    PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(path, Limits::kMaxPromptFile));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("messages")) j = j["messages"];
    if (j.is_discarded() || !j.is_array()) return Error::invalid_argument("{}: expected {\"messages\": [...]}", path);
    for (const auto& m : j)
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
          !(m["content"].is_string() || m["content"].is_array()))
        return Error::invalid_argument("{}: every message needs a role and a content (text or parts)", path);
    const nlohmann::json old_messages = messages, old_pending = pending;
    pending = nlohmann::json::array();
    Status st = Status::ok();
    for (const auto& m : j) {
      if (!m["content"].is_array()) continue;
      for (const auto& part : m["content"]) {
        const std::string type = part.is_object() ? part.value("type", std::string()) : "";
        if (type == "image") st = attach(part.value("image", std::string()));
        else if (type == "audio") st = attach_audio(part.value("audio", std::string()));
        else if (type == "video") st = attach_video(part.value("video", std::string()), part.value("fps", 0.0));
        if (!st) break;
      }
      if (!st) break;
    }
    pending = old_pending;
    if (!st) {
      messages = old_messages;
      return st.with_context(path);
    }
    messages = j;
    system = !messages.empty() && messages[0]["role"] == "system" && messages[0]["content"].is_string()
                 ? messages[0]["content"].get<std::string>()
                 : "";
    return Status::ok();
  }
};

const char* kHelp =
    "commands: /clear (forget the conversation), /regen (the last answer again, next seed), /system TEXT (the system\n"
    "          message; /system alone removes it), /save FILE, /load FILE (the conversation as JSON),\n"
    "          /set [temp|top_k|top_p|min_p|repeat_penalty|max_tokens|seed VALUE] (shows the settings without one),\n"
    "          /image PATH (attach an image to your next message), /audio PATH (attach an audio clip: WAV, FLAC,\n"
    "          OGG, MP3), /video FILE (attach a video: models with video input), /exit\n"
    "Ctrl-C stops an answer; Ctrl-D or /exit quits; end a line with \\ to continue it on the next. When the\n"
    "conversation outgrows the context, its oldest turns are dropped (said on stderr).\n";

// `/set NAME VALUE`: a sampling setting for the next answers. Returns what to print.
std::string set_option(GenerateParams& p, const std::string& args) {
  std::istringstream in(args);
  std::string name, value, extra;
  in >> name >> value >> extra;
  auto show = [&p] {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "temp %g, top_k %d, top_p %g, min_p %g, repeat_penalty %g, max_tokens %d, seed %llu\n",
                  double(p.sampler.temperature), p.sampler.top_k, double(p.sampler.top_p), double(p.sampler.min_p),
                  double(p.sampler.repetition_penalty), p.max_tokens, static_cast<unsigned long long>(p.sampler.seed));
    return std::string(buf);
  };
  if (name.empty()) return show();
  if (value.empty() || !extra.empty()) return "usage: /set NAME VALUE (temp, top_k, top_p, min_p, repeat_penalty, max_tokens, seed)\n";
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || errno != 0 || !std::isfinite(v)) return "not a number: " + value + "\n";
  const bool whole = v == std::floor(v);
  if (name == "temp" || name == "temperature") {
    if (v < 0) return "temp must be >= 0\n";
    p.sampler.temperature = float(v);
  } else if (name == "top_k") {
    if (!whole || v < 0 || v > 1e9) return "top_k must be a whole number >= 0 (0: off)\n";
    p.sampler.top_k = int(v);
  } else if (name == "top_p") {
    if (v <= 0 || v > 1) return "top_p must be in (0, 1]\n";
    p.sampler.top_p = float(v);
  } else if (name == "min_p") {
    if (v < 0 || v > 1) return "min_p must be in [0, 1]\n";
    p.sampler.min_p = float(v);
  } else if (name == "repeat_penalty") {
    if (v <= 0) return "repeat_penalty must be > 0\n";
    p.sampler.repetition_penalty = float(v);
  } else if (name == "max_tokens") {
    if (!whole || v < 1 || v > 1e9) return "max_tokens must be a whole number >= 1\n";
    p.max_tokens = int(v);
  } else if (name == "seed") {
    if (!whole || v < 0 || v > 9.007199254740992e15) return "seed must be a whole number >= 0\n";
    p.sampler.seed = uint64_t(v);
  } else {
    return "unknown setting " + name + " (temp, top_k, top_p, min_p, repeat_penalty, max_tokens, seed)\n";
  }
  return show();
}

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
  std::unique_ptr<LineInput> input = LineInput::open(&g_interrupted);
  for (;;) {
    g_interrupted = 0;
    std::string line;
    const LineInput::Got got = input->next("> ", line);
    if (got == LineInput::kEof) break;  // Ctrl-D
    if (got == LineInput::kInterrupted) {
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
    if (line == "/system" || line.rfind("/system ", 0) == 0) {
      chat.set_system(line.size() > 8 ? line.substr(8) : "");
      std::fputs(chat.system.empty() ? "[system message removed]\n" : "[system message set]\n", stdout);
      continue;
    }
    if (line == "/set" || line.rfind("/set ", 0) == 0) {
      std::fputs(set_option(chat.params, line.substr(4)).c_str(), stdout);
      continue;
    }
    if (line == "/save" || line.rfind("/save ", 0) == 0 || line == "/load" || line.rfind("/load ", 0) == 0) {
      const bool save = line[1] == 's';
      const std::string path = typed_path(line.substr(5));
      if (path.empty()) {
        std::fputs(save ? "usage: /save FILE\n" : "usage: /load FILE\n", stdout);
      } else if (auto st = save ? chat.save(path) : chat.load(path); !st) {
        std::fprintf(stdout, "error: %s\n", st.message().c_str());
      } else {
        std::fprintf(stdout, save ? "[conversation saved to %s]\n" : "[conversation loaded from %s]\n", path.c_str());
      }
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
    if (line[0] == '/' && line != "/regen") {
      std::fprintf(stdout, "unknown command %s\n%s", line.c_str(), kHelp);
      continue;
    }
    auto res = line == "/regen" ? chat.regenerate() : chat.turn(line);
    if (!res.is_ok()) {
      std::fprintf(stdout, "\nerror: %s\n", res.status().message().c_str());
      continue;
    }
    if (res->reason == StopReason::kCallback)
      std::fputs(" [stopped]\n", stdout);
    else if (res->reason == StopReason::kContext)  // not a finished answer: say so, and what to do
      std::fprintf(stdout, " [context full (%d tokens): the answer is cut; the next turn drops the oldest ones, -c raises it]\n",
                   chat.session.n_ctx());
    else
      std::fputs("\n", stdout);
    std::fflush(stdout);
    if (a.get_flag("-v")) {
      const size_t n_dec = res->tokens.size() > 1 ? res->tokens.size() - 1 : 0;
      std::fprintf(stderr, "[reused %d cached tokens | prompt %d tokens, %.1f ms | %zu tokens, %.1f tok/s | %s]\n",
                   res->n_cached, res->n_prompt, res->prompt_ms, res->tokens.size(),
                   res->gen_ms > 0 ? double(n_dec) * 1000.0 / res->gen_ms : 0.0, stop_reason_name(res->reason));
    }
  }
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("chat", "interactive chat in the terminal", cmd_chat);

}  // namespace pipit::cli
