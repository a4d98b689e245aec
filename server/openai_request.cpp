// Validation of OpenAI request bodies (see openai_request.h). Only scalars from the request are ever printed into
// messages: a deeply nested value is described by its type, never dumped (dump() recurses).
#include "server/openai_request.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>

#include "core/limits.h"
#include "runtime/generation_defaults.h"
#include "models/vision/image.h"  // decode_base64

namespace pipit::server {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxMessages = 4096;
constexpr size_t kMaxParts = 256;
constexpr size_t kMaxStops = 16;
constexpr size_t kMaxStopBytes = 256;
constexpr size_t kMaxImages = 16;
constexpr size_t kMaxVideos = 4;  // each up to the video processor's max_frames
constexpr size_t kMaxAudios = 16;
// input_audio.format values: what libsndfile reads (OpenAI names wav and mp3; the rest are common containers)
constexpr const char* kAudioFormats[] = {"wav", "mp3", "flac", "ogg", "opus", "aiff", "aif", "au", "caf", "w64"};
constexpr int64_t kMaxChoices = 16;   // n: each choice is an engine request, and the queue holds 64
constexpr int64_t kMaxTopLogprobs = 20;  // OpenAI's limit

#define PIPIT_API_TRY(expr)          \
  do {                               \
    if (auto _api_e = (expr)) return _api_e; \
  } while (0)

// A value for an error message: scalars as JSON (cut short), containers by kind.
std::string describe(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  std::string s = v.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  if (s.size() > 48) s = s.substr(0, 45) + "...";
  return v.is_null() ? "null" : std::string(v.type_name()) + " " + s;
}

// The field when present and not null.
const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> read_float(const json& body, const char* name, double lo, double hi, float& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return bad_request(fmt("'{}' must be a number, got {}", name, describe(*v)), name);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    return bad_request(fmt("'{}' is {}; expected a number in [{}, {}]", name, describe(*v), lo, hi), name);
  out = float(d);
  return std::nullopt;
}

std::optional<ApiError> read_int(const json& body, const char* name, int64_t lo, int64_t hi, int64_t& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) return bad_request(fmt("'{}' must be an integer, got {}", name, describe(*v)), name);
  bool in_range;
  int64_t x = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    in_range = hi >= 0 && u <= uint64_t(hi) && int64_t(u) >= lo;
    x = int64_t(u);
  } else {
    x = v->get<int64_t>();
    in_range = x >= lo && x <= hi;
  }
  if (!in_range)
    return bad_request(fmt("'{}' is {}; expected an integer in [{}, {}]", name, describe(*v), lo, hi), name);
  out = x;
  return std::nullopt;
}

std::optional<ApiError> read_bool(const json& body, const char* name, bool& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return bad_request(fmt("'{}' must be a boolean, got {}", name, describe(*v)), name);
  out = v->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_string(const json& body, const char* name, std::string& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) return bad_request(fmt("'{}' must be a string, got {}", name, describe(*v)), name);
  out = v->get<std::string>();
  return std::nullopt;
}

// A present field that must be "off": false, 0, an empty list/object or `ok_value`.
std::optional<ApiError> refuse_unless_off(const json& body, const char* name, const char* what) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  const bool off = (v->is_boolean() && !v->get<bool>()) || (v->is_number_integer() && v->get<int64_t>() == 0) ||
                   ((v->is_array() || v->is_object()) && v->empty());
  if (off) return std::nullopt;
  return bad_request(fmt("'{}' is not supported by this server ({})", name, what), name);
}

bool is_base64(std::string_view s) {
  size_t n = 0, pad = 0;
  for (char c : s) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++pad;
      continue;
    }
    const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
                       c == '/' || c == '-' || c == '_';
    if (!alpha || pad) return false;  // nothing may follow padding
    ++n;
  }
  return n > 0 && n % 4 != 1 && pad <= 2;
}

// An image_url or video_url as the runtime's media source: a data URL (checked to be base64 data of that kind;
// decoding happens when the media is loaded) or, with --allow-local-files, a path. Remote URLs are never fetched.
// kind: "image" or "video".
std::optional<ApiError> media_source(const std::string& url, const std::string& param, const RequestPolicy& policy,
                                     const std::string& kind, std::string& source) {
  const std::string example = kind == "image" ? "data:image/png;base64,..." : "data:video/mp4;base64,...";
  if (url.rfind("data:", 0) == 0) {
    const size_t comma = url.find(',');
    if (comma == std::string::npos)
      return bad_request(fmt("the {} is not a valid data URL (expected {})", kind, example), param);
    const std::string header = url.substr(5, comma - 5);
    const std::string kB64 = ";base64";
    if (header.size() < kB64.size() || header.compare(header.size() - kB64.size(), kB64.size(), kB64) != 0)
      return bad_request(fmt("the {} data URL must be base64-encoded ({})", kind, example), param);
    const std::string media = header.substr(0, header.size() - kB64.size());
    if (kind == "image" ? !media.empty() && media.rfind("image/", 0) != 0 : media.rfind("video/", 0) != 0)
      return bad_request(fmt("the data URL has media type '{}', expected {} ({})", media.substr(0, 40),
                             kind == "image" ? "an image" : "a video", example), param);
    if (!is_base64(std::string_view(url).substr(comma + 1)))
      return bad_request(fmt("the {} data URL holds invalid base64", kind), param);
    source = url;
    return std::nullopt;
  }
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0)
    return bad_request(fmt("remote {} URLs are not fetched; send the {} as a data URL ({})", kind, kind, example),
                       param);
  if (policy.local_files_dir.empty())
    return bad_request(fmt("{}_url must be a data URL ({}); local files are only read when the server runs with "
                           "--allow-local-files DIR", kind, example), param);
  source = url.rfind("file://", 0) == 0 ? url.substr(7) : url;
  // Every refusal of a local path gets this one message, here and when the file is read (server/local_files.cpp),
  // so that answers tell nothing about what exists outside the shared directory.
  if (source.empty() || source.find('\0') != std::string::npos)
    return bad_request(kind == "image" ? kLocalFileRefused : kLocalVideoRefused, param);
  return std::nullopt;
}

// One message's content: a string, null (assistant turns with tool calls) or a list of text / image_url /
// input_audio parts. Without media the text parts are joined into one string (text-only chat templates expect a
// string); with images or audio it stays a list of {"type": "image"}, {"type": "audio"} and {"type": "text",
// "text"} parts, as multimodal templates expect.
std::optional<ApiError> parse_content(const json& msg, const std::string& param, const RequestPolicy& policy,
                                      ParsedRequest& out, ojson& content) {
  auto it = msg.find("content");
  if (it == msg.end()) return bad_request(fmt("{} has no 'content'", param), param + ".content");
  const json& c = *it;
  if (c.is_null()) {
    content = "";
    return std::nullopt;
  }
  if (c.is_string()) {
    content = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array())
    return bad_request(fmt("{}.content must be a string or a list of parts, got {}", param, describe(c)),
                       param + ".content");
  if (c.size() > kMaxParts) return bad_request(fmt("{}.content has more than {} parts", param, kMaxParts), param);
  ojson parts = ojson::array();
  std::string joined;
  bool has_media = false;
  for (size_t k = 0; k < c.size(); ++k) {
    const std::string pp = fmt("{}.content[{}]", param, k);
    const json& part = c[k];
    if (!part.is_object()) return bad_request(fmt("{} must be an object, got {}", pp, describe(part)), pp);
    std::string type;
    PIPIT_API_TRY(read_string(part, "type", type));
    if (type == "text") {
      const json* t = field(part, "text");
      if (!t || !t->is_string()) return bad_request(fmt("{}.text must be a string", pp), pp + ".text");
      if (!joined.empty()) joined += "\n";
      joined += t->get<std::string>();
      parts.push_back({{"type", "text"}, {"text", t->get<std::string>()}});
    } else if (type == "image_url") {
      const json* iu = field(part, "image_url");
      const json* url = iu && iu->is_object() ? field(*iu, "url") : iu;
      if (!url || !url->is_string())
        return bad_request(fmt("{}.image_url must be {{\"url\": \"data:image/...;base64,...\"}}", pp),
                           pp + ".image_url");
      std::string source;
      PIPIT_API_TRY(media_source(url->get<std::string>(), pp + ".image_url", policy, "image", source));
      if (!policy.accepts_images) return bad_request("this model does not accept images" + policy.no_images_note, pp);
      if (out.images.size() >= kMaxImages)
        return bad_request(fmt("more than {} images in one request", kMaxImages), pp);
      out.images.push_back(std::move(source));
      parts.push_back({{"type", "image"}});
      has_media = true;
    } else if (type == "video_url") {  // vLLM's part: {"type": "video_url", "video_url": {"url": ...}}
      const json* vu = field(part, "video_url");
      const json* url = vu && vu->is_object() ? field(*vu, "url") : vu;
      if (!url || !url->is_string())
        return bad_request(fmt("{}.video_url must be {{\"url\": \"data:video/...;base64,...\"}}", pp),
                           pp + ".video_url");
      std::string source;
      PIPIT_API_TRY(media_source(url->get<std::string>(), pp + ".video_url", policy, "video", source));
      if (!policy.accepts_videos) return bad_request("this model does not accept videos" + policy.no_videos_note, pp);
      if (out.videos.size() >= kMaxVideos)
        return bad_request(fmt("more than {} videos in one request", kMaxVideos), pp);
      out.videos.push_back(std::move(source));
      parts.push_back({{"type", "video"}});
      has_media = true;
    } else if (type == "input_audio") {  // OpenAI: {"input_audio": {"data": BASE64, "format": "wav" | "mp3"}}
      const json* ia = field(part, "input_audio");
      const json* data = ia && ia->is_object() ? field(*ia, "data") : nullptr;
      const json* format = ia && ia->is_object() ? field(*ia, "format") : nullptr;
      if (!data || !data->is_string() || !format || !format->is_string())
        return bad_request(fmt("{}.input_audio must be {{\"data\": BASE64, \"format\": \"wav\" | \"mp3\" | ...}}",
                               pp), pp + ".input_audio");
      const std::string f = format->get<std::string>();
      if (std::find(std::begin(kAudioFormats), std::end(kAudioFormats), f) == std::end(kAudioFormats))
        return bad_request(fmt("{}.input_audio.format '{}' is not supported (wav, mp3, flac, ogg, opus, aiff, au, "
                               "caf, w64)", pp, f.substr(0, 40)), pp + ".input_audio.format");
      if (!policy.accepts_audio) return bad_request("this model does not accept audio", pp);
      if (out.audios.size() >= kMaxAudios)
        return bad_request(fmt("more than {} audio clips in one request", kMaxAudios), pp);
      auto bytes = decode_base64(data->get<std::string>());
      if (!bytes.is_ok() || bytes->empty())
        return bad_request(fmt("{}.input_audio.data is not base64 audio data", pp), pp + ".input_audio.data");
      out.audios.push_back({std::move(bytes).value(), f});
      parts.push_back({{"type", "audio"}});
      has_media = true;
    } else if (type.empty()) {
      return bad_request(fmt("{} has no 'type'", pp), pp + ".type");
    } else {
      return bad_request(fmt("{}.type '{}' is not supported (expected text, image_url, video_url or input_audio)",
                             pp, type.substr(0, 40)),
                         pp + ".type");
    }
  }
  if (has_media) content = std::move(parts);
  else content = std::move(joined);
  return std::nullopt;
}

// An assistant message's tool_calls, as chat templates read them: [{id, type, function: {name, arguments}}] with
// the arguments as an object (Llama's template applies tojson to them; Qwen's takes either), parsed from OpenAI's
// JSON string with the key order kept.
std::optional<ApiError> parse_tool_calls_field(const json& msg, const std::string& param, ojson& m) {
  const json& tc = msg["tool_calls"];
  const std::string p = param + ".tool_calls";
  if (!tc.is_array()) return bad_request(fmt("{} must be a list", p), p);
  if (tc.size() > 128) return bad_request(fmt("{} has more than 128 calls", p), p);
  ojson calls = ojson::array();
  for (size_t k = 0; k < tc.size(); ++k) {
    const std::string pk = fmt("{}[{}]", p, k);
    const json& c = tc[k];
    const json* f = c.is_object() ? field(c, "function") : nullptr;
    const json* name = f && f->is_object() ? field(*f, "name") : nullptr;
    if (!name || !name->is_string())
      return bad_request(pk + " must be {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}", pk);
    ojson args = ojson::object();
    if (const json* a = field(*f, "arguments")) {
      if (a->is_string()) {
        args = ojson::parse(a->get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (args.is_discarded()) return bad_request(fmt("{}.function.arguments is not valid JSON", pk), pk + ".function.arguments");
      } else if (a->is_object()) {
        args = ojson(*a);
      } else {
        return bad_request(fmt("{}.function.arguments must be a JSON string", pk), pk + ".function.arguments");
      }
    }
    ojson call = {{"type", "function"}, {"function", {{"name", name->get<std::string>()}, {"arguments", std::move(args)}}}};
    if (const json* id = field(c, "id"); id && id->is_string()) call["id"] = id->get<std::string>();
    calls.push_back(std::move(call));
  }
  m["tool_calls"] = std::move(calls);
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& body, const RequestPolicy& policy, ParsedRequest& out) {
  const json* m = field(body, "messages");
  if (!m) return bad_request("'messages' is required", "messages");
  if (!m->is_array()) return bad_request(fmt("'messages' must be a list, got {}", describe(*m)), "messages");
  if (m->empty()) return bad_request("'messages' must hold at least one message", "messages");
  if (m->size() > kMaxMessages) return bad_request(fmt("more than {} messages", kMaxMessages), "messages");
  out.messages = ojson::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const std::string param = fmt("messages[{}]", i);
    const json& msg = (*m)[i];
    if (!msg.is_object()) return bad_request(fmt("{} must be an object, got {}", param, describe(msg)), param);
    const json* r = field(msg, "role");
    if (!r) return bad_request(fmt("{} has no 'role'", param), param + ".role");
    if (!r->is_string()) return bad_request(fmt("{}.role must be a string, got {}", param, describe(*r)), param + ".role");
    std::string role = r->get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name; chat templates know "system"
    if (role == "function") {  // the legacy function calling's result message, which names its function
      const json* name = field(msg, "name");
      if (!name || !name->is_string())
        return bad_request(fmt("{} has role \"function\" but no 'name' (the function it answers)", param),
                           param + ".name");
      role = "tool";
    }
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      return bad_request(fmt("{}.role '{}' is not one of system, developer, user, assistant, tool, function", param,
                             role.substr(0, 40)),
                         param + ".role");
    ojson content;
    // the legacy assistant function_call {name, arguments} is a one-call tool_calls list
    json legacy;
    if (const json* fc = field(msg, "function_call"); fc && role == "assistant" && !field(msg, "tool_calls")) {
      legacy = msg;
      legacy["tool_calls"] = json::array({{{"type", "function"}, {"function", *fc}}});
    }
    const json& call_msg = legacy.is_null() ? msg : legacy;
    const bool has_calls = role == "assistant" && field(call_msg, "tool_calls");
    if (has_calls && !msg.contains("content")) content = "";
    else PIPIT_API_TRY(parse_content(msg, param, policy, out, content));
    ojson m = {{"role", role}, {"content", std::move(content)}};
    if (has_calls) PIPIT_API_TRY(parse_tool_calls_field(call_msg, param, m));
    if (const json* rc = field(msg, "reasoning_content"); rc && role == "assistant") {
      if (!rc->is_string())
        return bad_request(fmt("{}.reasoning_content must be a string", param), param + ".reasoning_content");
      m["reasoning_content"] = rc->get<std::string>();  // Qwen3's template renders it in <think>
    }
    if (role == "tool") {
      for (const char* k : {"tool_call_id", "name"})
        if (const json* v = field(msg, k)) {
          if (!v->is_string()) return bad_request(fmt("{}.{} must be a string", param, k), param + "." + k);
          m[k] = v->get<std::string>();
        }
    }
    out.messages.push_back(std::move(m));
  }
  return std::nullopt;
}

// logit_bias: {"token id": bias}, ids as decimal strings (JSON keys) below n_vocab, biases in [-100, 100].
std::optional<ApiError> read_logit_bias(const json& body, int n_vocab, std::vector<std::pair<int32_t, float>>& out) {
  const json* v = field(body, "logit_bias");
  if (!v) return std::nullopt;
  if (!v->is_object())
    return bad_request(fmt("'logit_bias' must be an object mapping token ids to biases, got {}", describe(*v)),
                       "logit_bias");
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= n_vocab)
      return bad_request(fmt("logit_bias key '{}' is not a token id in [0, {})", key.substr(0, 40), n_vocab),
                         "logit_bias");
    const json& b = *it;
    if (!b.is_number() || !(b.get<double>() >= -100.0 && b.get<double>() <= 100.0))
      return bad_request(fmt("logit_bias['{}'] is {}; expected a number in [-100, 100]", key, describe(b)),
                         "logit_bias");
    out.emplace_back(int32_t(id), b.get<float>());
  }
  return std::nullopt;
}

// Fields both endpoints share: model, stream, sampling, limits, stop.
std::optional<ApiError> parse_common(const json& body, const RequestPolicy& policy, ParsedRequest& out) {
  if (!body.is_object()) return bad_request(fmt("the request body must be a JSON object, got {}", describe(body)));
  PIPIT_API_TRY(read_string(body, "model", out.model));
  PIPIT_API_TRY(read_bool(body, "stream", out.stream));
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object())
      return bad_request(fmt("'stream_options' must be an object, got {}", describe(*so)), "stream_options");
    PIPIT_API_TRY(read_bool(*so, "include_usage", out.include_usage));
  }
  int64_t n = 1;
  PIPIT_API_TRY(read_int(body, "n", 1, kMaxChoices, n));
  out.n = int(n);
  PIPIT_API_TRY(read_bool(body, "return_tokens_as_token_ids", out.tokens_as_ids));

  SamplerParams& s = out.params.sampler;
  s = policy.defaults;
  // read as any float here; the ranges are validate()'s (runtime/sampler.h), the same rule as the CLI's options
  constexpr double kF = std::numeric_limits<float>::max();
  const std::pair<const char*, float*> floats[] = {
      {"temperature", &s.temperature}, {"top_p", &s.top_p}, {"min_p", &s.min_p},
      {"presence_penalty", &s.presence_penalty}, {"frequency_penalty", &s.frequency_penalty},
      {"repetition_penalty", &s.repetition_penalty}};
  for (auto [name, v] : floats) PIPIT_API_TRY(read_float(body, name, -kF, kF, *v));
  int64_t top_k = s.top_k;
  PIPIT_API_TRY(read_int(body, "top_k", -1, std::max(policy.n_vocab, 1), top_k));
  s.top_k = int(top_k);
  int64_t ngram = out.params.no_repeat_ngram_size;  // -1: the model's default
  PIPIT_API_TRY(read_int(body, "no_repeat_ngram_size", -1, Limits::kMaxNoRepeatNgram, ngram));
  out.params.no_repeat_ngram_size = int(ngram);
  int64_t seed = 0;
  if (field(body, "seed")) {
    PIPIT_API_TRY(read_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                           seed));
    s.seed = uint64_t(seed);
  } else {
    s.seed = std::random_device{}();  // OpenAI: no seed, no reproducibility
  }
  const char* bad = nullptr;  // the sampling fields read above, against the one rule (runtime/sampler.h)
  if (Status st = validate(s, {}, &bad); !st) return bad_request(st.message(), bad ? bad : "");

  int64_t max_tokens = policy.n_ctx;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {  // the newer name wins
    if (!field(body, name)) continue;
    PIPIT_API_TRY(read_int(body, name, 1, std::numeric_limits<int64_t>::max(), max_tokens));
    if (max_tokens > policy.n_ctx)
      return bad_request(fmt("'{}' is {}; this server's context holds {} tokens (prompt + answer)", name, max_tokens,
                             policy.n_ctx),
                         name);
    out.max_tokens_given = true;
  }
  out.params.max_tokens = int(max_tokens);
  PIPIT_API_TRY(read_bool(body, "ignore_eos", out.params.ignore_eos));

  if (const json* st = field(body, "stop")) {
    std::vector<const json*> items;
    if (st->is_string()) items.push_back(st);
    else if (st->is_array())
      for (const json& x : *st) items.push_back(&x);
    else return bad_request(fmt("'stop' must be a string or a list of strings, got {}", describe(*st)), "stop");
    if (items.size() > kMaxStops) return bad_request(fmt("'stop' has more than {} strings", kMaxStops), "stop");
    for (const json* x : items) {
      if (!x->is_string()) return bad_request(fmt("'stop' entries must be strings, got {}", describe(*x)), "stop");
      std::string v = x->get<std::string>();
      if (v.size() > kMaxStopBytes) return bad_request(fmt("a 'stop' string is longer than {} bytes", kMaxStopBytes), "stop");
      if (!v.empty()) out.params.stop.push_back(std::move(v));
    }
  }

  if (out.chat) {
    // chat: logprobs is a boolean, top_logprobs (0..20) the number of alternatives, which needs logprobs on
    bool lp = false;
    PIPIT_API_TRY(read_bool(body, "logprobs", lp));
    int64_t top = 0;
    PIPIT_API_TRY(read_int(body, "top_logprobs", 0, kMaxTopLogprobs, top));
    if (field(body, "top_logprobs") && !lp)
      return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    out.params.logprobs = lp ? int(top) : -1;
  } else {
    // completions (legacy): logprobs is the number of alternatives per token, 0 for the chosen token only
    int64_t lp = -1;
    PIPIT_API_TRY(read_int(body, "logprobs", 0, kMaxTopLogprobs, lp));
    out.params.logprobs = int(lp);
  }
  PIPIT_API_TRY(read_logit_bias(body, policy.n_vocab, out.params.logit_bias));
  // tools, tool_choice, response_format and grammar: parse_structured (server/structured.cpp), which reads the
  // body with its key order kept
  return std::nullopt;
}

}  // namespace

// chat_template_kwargs may set the template's own options (enable_thinking, add_vision_id, ...), never what the
// renderer itself decides: which template runs (a client template is arbitrary code with a 64 MiB output limit,
// and each new one would be parsed and cached), the messages and generation prompt, or the special tokens.
static bool reserved_template_kwarg(const std::string& k) {
  static const char* kReserved[] = {"chat_template", "messages", "add_generation_prompt", "continue_final_message",
                                    "tools", "documents", "additional_special_tokens", "extra_special_tokens",
                                    "raise_exception", "strftime_now", "tokenize", "return_dict"};
  for (const char* r : kReserved)
    if (k == r) return true;
  auto ends = [&](std::string_view suf) { return k.size() >= suf.size() && k.compare(k.size() - suf.size(), suf.size(), suf) == 0; };
  return ends("_token") || ends("_tokens");  // bos_token, eos_token, image_token, ...
}

std::optional<ApiError> parse_chat_request(const json& body, const RequestPolicy& policy, ParsedRequest& out) {
  out = ParsedRequest{};
  out.chat = true;
  PIPIT_API_TRY(parse_common(body, policy, out));
  PIPIT_API_TRY(parse_messages(body, policy, out));
  // the legacy function calling (functions, function_call) is mapped to tools by parse_structured; not both
  if (field(body, "functions") && field(body, "tools"))
    return bad_request("'functions' (the legacy function calling) and 'tools' cannot be used together", "functions");
  if (field(body, "function_call") && field(body, "tool_choice"))
    return bad_request("'function_call' and 'tool_choice' cannot be used together", "function_call");
  if (field(body, "function_call") && !field(body, "functions"))
    return bad_request("'function_call' needs 'functions'", "function_call");
  std::string reasoning;
  PIPIT_API_TRY(read_string(body, "reasoning_format", reasoning));
  if (field(body, "reasoning_format")) {
    out.reasoning_format = parse_reasoning_format(reasoning);
    if (!out.reasoning_format)
      return bad_request(fmt("'reasoning_format' is '{}'; expected auto, deepseek or none", reasoning.substr(0, 40)),
                         "reasoning_format");
  }
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object())
      return bad_request(fmt("'chat_template_kwargs' must be an object, got {}", describe(*kw)), "chat_template_kwargs");
    for (auto it = kw->begin(); it != kw->end(); ++it) {
      if (it->is_structured())
        return bad_request(fmt("chat_template_kwargs.{} must be a string, number or boolean", it.key().substr(0, 40)),
                           "chat_template_kwargs");
      if (reserved_template_kwarg(it.key()))
        return bad_request(fmt("chat_template_kwargs.{} is set by the server, not by requests (the model's template "
                               "and its special tokens are fixed); template options such as enable_thinking are "
                               "accepted", it.key().substr(0, 40)),
                           "chat_template_kwargs");
      out.template_kwargs[it.key()] = ojson(*it);
    }
  }
  return std::nullopt;
}

std::optional<ApiError> parse_completion_request(const json& body, const RequestPolicy& policy, ParsedRequest& out) {
  out = ParsedRequest{};
  out.chat = false;
  PIPIT_API_TRY(parse_common(body, policy, out));
  PIPIT_API_TRY(refuse_unless_off(body, "echo", "the prompt is not echoed"));
  PIPIT_API_TRY(refuse_unless_off(body, "suffix", "no fill-in-the-middle"));
  int64_t best_of = 1;
  PIPIT_API_TRY(read_int(body, "best_of", 1, 1, best_of));

  const json* p = field(body, "prompt");
  if (!p) return bad_request("'prompt' is required", "prompt");
  const json* ids = nullptr;
  if (p->is_string()) {
    out.prompt = p->get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    out.prompt = (*p)[0].get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    ids = p;
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_array()) {
    ids = &(*p)[0];
  } else if (p->is_array() && p->size() > 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    return bad_request("batched prompts are not supported; send one prompt per request", "prompt");
  } else {
    return bad_request(fmt("'prompt' must be a string or a list of token ids, got {}", describe(*p)), "prompt");
  }
  if (ids) {
    for (const json& t : *ids) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= policy.n_vocab)
        return bad_request(fmt("'prompt' token {} is not an id in [0, {})", describe(t), policy.n_vocab), "prompt");
      out.prompt_ids.push_back(int32_t(t.get<int64_t>()));
    }
    if (out.prompt_ids.empty()) return bad_request("'prompt' is empty", "prompt");
  } else if (out.prompt.empty()) {
    return bad_request("'prompt' is empty", "prompt");
  }
  return std::nullopt;
}

SamplerParams default_sampling(const json& gc, std::vector<std::string>* ignored) {
  SamplerParams neutral;  // OpenAI's / HF's meaning of a field a request leaves out: no truncation, temperature 1
  neutral.temperature = 1.0f;
  neutral.top_p = 1.0f;
  neutral.top_k = 0;
  neutral.min_p = 0.0f;
  return model_sampling(gc, neutral, ignored);
}

}  // namespace pipit::server
