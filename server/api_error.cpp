// OpenAI-shaped error bodies and the Status -> HTTP status mapping.
#include "server/api_error.h"

namespace pipit::server {

nlohmann::json ApiError::body() const {
  nlohmann::json e = {{"message", message},
                      {"type", type},
                      {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                      {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}};
  return {{"error", std::move(e)}};
}

ApiError from_status(const Status& st, std::string param) {
  switch (st.code()) {
    case Code::kInvalidArgument:
    case Code::kFormat:
    case Code::kUnsupported:
    case Code::kNotFound:
    case Code::kIo:  // an image file the request named
      return ApiError{400, st.message(), std::move(param)};
    case Code::kOutOfRange:
      return ApiError{400, st.message(), std::move(param), "invalid_request_error", "context_length_exceeded"};
    case Code::kUnavailable:
      return ApiError{503, st.message(), "", "server_error", "server_overloaded"};
    default:
      return ApiError{500, st.message(), "", "server_error"};
  }
}

}  // namespace pipit::server
