// Errors as the OpenAI API reports them: an HTTP status plus {"error": {"message", "type", "param", "code"}}.
// Every failure the server sees (bad JSON, a wrong field, a full queue, a failed forward pass) becomes one of
// these; clients such as the official SDKs read `message` and raise by status.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the request field at fault ("" when none)
  std::string type = "invalid_request_error";
  std::string code;   // "" when none

  nlohmann::json body() const;
};

// 400 invalid_request_error, naming the field.
inline ApiError bad_request(std::string message, std::string param = "") {
  return ApiError{400, std::move(message), std::move(param)};
}

// A runtime Status as an HTTP error: invalid input and prompts too long for the context -> 400, a full queue ->
// 503, anything else -> 500.
ApiError from_status(const Status& st, std::string param = "");

}  // namespace pipit::server
