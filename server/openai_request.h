// OpenAI request bodies -> what the runtime needs: messages for the chat template (or a raw prompt), image
// sources, and GenerateParams. This is the server's edge: every field is checked for type and range here, and a
// bad one gives a 400 naming the field, so nothing after it has to distrust the request.
//
// Accepted: /v1/chat/completions {messages, model, stream, stream_options.include_usage, temperature, top_p,
// max_tokens | max_completion_tokens, stop, seed, presence_penalty, frequency_penalty, n (<= 16), logprobs,
// top_logprobs} plus the common
// extensions top_k, min_p, repetition_penalty, ignore_eos and chat_template_kwargs; /v1/completions the same with `prompt`
// (a string, a list of one string, or token ids; logprobs an integer there). Refused with a 400 rather than
// silently ignored: echo, suffix, best_of > 1. logit_bias: token ids below n_vocab, biases in [-100, 100]. The legacy
// functions / function_call are mapped to tools by parse_structured (answered as message.function_call).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/generator.h"
#include "server/api_error.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace pipit::server {

// The one answer to every refused local image path (outside the shared directory, missing, unreadable, too large,
// not an image, a NUL byte in it): no answer may tell a client whether some file exists or how large it is.
inline constexpr const char* kLocalFileRefused =
    "image_url names no readable PNG or JPEG file in the directory this server shares (--allow-local-files DIR); "
    "send the image as a data URL instead";

// The same for a refused local video path.
inline constexpr const char* kLocalVideoRefused =
    "video_url names no readable video file in the directory this server shares (--allow-local-files DIR); send the "
    "video as a data URL instead";

struct RequestPolicy {
  bool accepts_images = false;     // the model has a vision tower
  std::string no_images_note;      // appended to the refusal when it has none (models/media_note.h)
  bool accepts_videos = false;     // the model has video input and this build decodes video files
  std::string no_videos_note;      // why not, appended to the refusal
  std::string local_files_dir;     // image_url may name a file under this directory ("" : no local files)
  bool accepts_audio = false;      // the model has an audio tower (input_audio parts)
  int n_ctx = 0;                   // per-sequence context: max_tokens above it is an error
  int n_vocab = 0;                 // token ids in a completion prompt must be below it
  SamplerParams defaults;          // sampling when the request does not say
};

struct ParsedRequest {
  bool chat = true;
  std::string model;                  // as sent; echoed in the response
  nlohmann::ordered_json messages;    // chat: [{role, content}], content a string or, with images, parts
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  std::string prompt;                 // completions: text prompt
  std::vector<int32_t> prompt_ids;    // completions: token-id prompt (then `prompt` is empty)
  std::vector<std::string> images;    // chat: data URLs or local paths, in prompt order
  std::vector<std::string> videos;    // chat: video files as data URLs or local paths, in prompt order
  struct Audio {
    std::vector<uint8_t> bytes;       // input_audio.data, base64-decoded
    std::string format;               // input_audio.format ("wav", "mp3", ...)
  };
  std::vector<Audio> audios;          // chat: input_audio parts, in prompt order
  GenerateParams params;
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;
  bool tokens_as_ids = false;         // vLLM's return_tokens_as_token_ids (logprobs name token ids)
  int n = 1;                          // choices: n engine requests, seeds seed, seed + 1, ...
  // Tools (chat): the definitions as sent (key order kept) go to the template; the answer is parsed for calls.
  nlohmann::ordered_json tools;       // null when none (or tool_choice "none")
  std::vector<std::string> tool_names;
  ToolSyntax tool_syntax = ToolSyntax::kNone;  // kNone: the answer is not parsed for calls
  bool parallel_tool_calls = true;    // false: at most one call is returned
  bool legacy_functions = false;      // the request used functions / function_call: one call, as function_call
  // Structured output: GBNF the answer must follow (response_format, grammar, or a forced tool call).
  std::string grammar;
  std::string grammar_param;          // the field it came from, for errors
  std::optional<ReasoningFormat> reasoning_format;  // chat: the request's reasoning_format (else the server's)
};

std::optional<ApiError> parse_chat_request(const nlohmann::json& body, const RequestPolicy& policy,
                                           ParsedRequest& out);
std::optional<ApiError> parse_completion_request(const nlohmann::json& body, const RequestPolicy& policy,
                                                 ParsedRequest& out);

// The model's recommended sampling from generation_config.json (temperature, top_p, top_k, min_p,
// repetition_penalty), over OpenAI's defaults (temperature 1, top_p 1, no top-k / min-p). do_sample false: greedy.
// A value out of a request's range is replaced by OpenAI's default and its name appended to `ignored`.
SamplerParams default_sampling(const nlohmann::json& generation_config, std::vector<std::string>* ignored = nullptr);

// tools, tool_choice, parallel_tool_calls (chat), response_format and grammar, from the body parsed with its key
// order kept (tool definitions and schemas are printed in the order they were sent). `chat_template`: the model's
// template source, which decides the tool-call syntax. Fills out.tools/tool_names/tool_syntax/grammar.
std::optional<ApiError> parse_structured(const nlohmann::ordered_json& body, const std::string& chat_template,
                                         ParsedRequest& out);

}  // namespace pipit::server
