// Which browser requests the server answers: the Host check that stops DNS rebinding, the Origin check that stops
// cross-site requests, and opt-in CORS (--allow-host, --cors). Plain string logic with no HTTP library, so it is
// tested directly (tests/tokenizer/origin_policy_test.cpp); server.cpp applies it to every request's head.
//
// Rules (docs/server.md, "Security: Host, Origin, CORS"):
//  - A server bound to a loopback address answers only requests whose Host is a loopback name or address
//    (localhost, *.localhost, 127.0.0.0/8, [::1], any port) or a name given to --allow-host. A page on a
//    rebinding domain reaches 127.0.0.1 with its own name in Host, so it is refused. A server bound elsewhere
//    takes any Host: its operator exposed it, and anyone who can reach it can send any Host anyway.
//  - A request with an Origin header is answered only when that origin is the server itself (the chat page: the
//    Origin's host and port are the Host the request came to) or is listed by --cors ("*": every origin).
//    Requests without Origin (curl, SDKs, servers) are not browser cross-site requests and pass.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace pipit::server {

struct OriginPolicy {
  bool check_host = true;                 // true for a loopback bind
  std::vector<std::string> allow_hosts;   // lowercase host names (no port); "*": any
  std::vector<std::string> cors_origins;  // lowercase "scheme://host[:port]"; "*": any
};

// True for 127.0.0.0/8, ::1 (or ::ffff:127.x) and "localhost": the bind addresses only this machine reaches.
bool is_loopback_bind(std::string_view address);

// "a.example, b.example" (each item checked: a host name or address, no scheme, port or path) -> lowercase names.
Result<std::vector<std::string>> parse_allow_hosts(const std::vector<std::string>& values);
// "http://localhost:3000,https://app.example" or "*" -> lowercase origins; a path, user info or bad port is refused.
Result<std::vector<std::string>> parse_cors_origins(const std::vector<std::string>& values);

struct OriginVerdict {
  int status = 0;               // 0: answer the request; else 403
  std::string code, message;    // for the 403's OpenAI-style body
  std::string allow_origin;     // non-empty: send Access-Control-Allow-Origin with this value
};

// `host`: the Host header ("" when absent); `origin`: the Origin header, `has_origin` false when absent.
OriginVerdict judge_request(const OriginPolicy& p, std::string_view host, bool has_origin, std::string_view origin);

// The Access-Control-Allow-Headers of a preflight: Authorization and Content-Type, and the header names the
// browser asked for (Access-Control-Request-Headers; the openai SDK adds its own x-stainless-* headers), kept only
// when they are plain header names.
std::string preflight_allow_headers(std::string_view requested);

}  // namespace pipit::server
