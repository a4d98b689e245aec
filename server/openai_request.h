// OpenAI request bodies -> what the runtime needs: messages for the chat template (or a raw prompt), image
// sources, and GenerateParams. This is the server's edge: every field is checked for type and range here, and a
// bad one gives a 400 naming the field, so nothing after it has to distrust the request.
//
// Accepted: /v1/chat/completions {messages, model, stream, stream_options.include_usage, temperature, top_p,
// max_tokens | max_completion_tokens, stop, seed, presence_penalty, frequency_penalty, n (= 1)} plus the common
// extensions top_k, min_p, repetition_penalty, ignore_eos and chat_template_kwargs; /v1/completions the same with `prompt`
// (a string, a list of one string, or token ids). Refused with a 400 rather than silently ignored: n > 1, tools,
// logprobs, logit_bias, response_format other than text, echo, best_of > 1.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/generator.h"
#include "server/api_error.h"

namespace pipit::server {

// The one answer to every refused local image path (outside the shared directory, missing, unreadable, too large,
// not an image, a NUL byte in it): no answer may tell a client whether some file exists or how large it is.
inline constexpr const char* kLocalFileRefused =
    "image_url names no readable PNG or JPEG file in the directory this server shares (--allow-local-files DIR); "
    "send the image as a data URL instead";

struct RequestPolicy {
  bool accepts_images = false;     // the model has a vision tower
  std::string local_files_dir;     // image_url may name a file under this directory ("" : no local files)
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
  GenerateParams params;
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;
};

std::optional<ApiError> parse_chat_request(const nlohmann::json& body, const RequestPolicy& policy,
                                           ParsedRequest& out);
std::optional<ApiError> parse_completion_request(const nlohmann::json& body, const RequestPolicy& policy,
                                                 ParsedRequest& out);

// The model's recommended sampling from generation_config.json (temperature, top_p, top_k, min_p,
// repetition_penalty), over OpenAI's defaults (temperature 1, top_p 1, no top-k / min-p). do_sample false: greedy.
SamplerParams default_sampling(const nlohmann::json& generation_config);

}  // namespace pipit::server
