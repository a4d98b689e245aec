// The Host / Origin / CORS rules of origin_policy.h.
#include "server/origin_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace pipit::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// What a refusal quotes of a header: printable ASCII, at most 100 characters (the body is JSON; bytes that are
// not UTF-8 could not be written into it).
std::string quoted(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 100)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

bool parse_port(std::string_view s, int* port) {
  if (s.empty() || s.size() > 5) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > 65535) return false;
  *port = v;
  return true;
}

bool is_ipv6(const std::string& s, in6_addr* a) { return inet_pton(AF_INET6, s.c_str(), a) == 1; }

// A Host header or an origin's authority: "name", "name:port", "1.2.3.4:port", "[v6]:port" -> lowercase host
// (brackets removed) and port (-1 when absent). False for anything else.
bool split_host_port(std::string_view s, std::string* host, int* port) {
  *port = -1;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos) return false;
    *host = lower(s.substr(1, close - 1));
    in6_addr a;
    if (!is_ipv6(*host, &a)) return false;
    std::string_view rest = s.substr(close + 1);
    if (rest.empty()) return true;
    return rest.front() == ':' && parse_port(rest.substr(1), port);
  }
  const size_t colon = s.rfind(':');
  if (colon != std::string_view::npos) {
    if (!parse_port(s.substr(colon + 1), port)) return false;
    s = s.substr(0, colon);
  }
  if (s.empty() || s.size() > 253) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) return false;
  *host = lower(s);
  return true;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// localhost and *.localhost resolve to this machine in browsers without asking DNS (RFC 6761 6.3), so no
// rebinding domain can be one of them.
bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || ends_with(host, ".localhost")) return true;
  in_addr a4;
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6;
  if (!is_ipv6(host, &a6)) return false;
  if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

bool listed(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), "*") != list.end() ||
         std::find(list.begin(), list.end(), item) != list.end();
}

int default_port(std::string_view scheme) { return scheme == "https" ? 443 : scheme == "http" ? 80 : -1; }

// "scheme://host[:port]" -> its parts; false for "null", paths, user info, and anything else.
bool split_origin(std::string_view origin, std::string* scheme, std::string* host, int* port) {
  const size_t sep = origin.find("://");
  if (sep == std::string_view::npos || sep == 0) return false;
  *scheme = lower(origin.substr(0, sep));
  for (char c : *scheme)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.')) return false;
  if (!split_host_port(origin.substr(sep + 3), host, port)) return false;
  if (*port < 0) *port = default_port(*scheme);
  return true;
}

std::vector<std::string> split_commas(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) {
    size_t start = 0;
    while (start <= v.size()) {
      size_t end = v.find(',', start);
      if (end == std::string::npos) end = v.size();
      out.emplace_back(trim(std::string_view(v).substr(start, end - start)));
      start = end + 1;
    }
  }
  return out;
}

}  // namespace

bool is_loopback_bind(std::string_view address) {
  if (std::count(address.begin(), address.end(), ':') > 1 && address.front() != '[')
    return is_loopback_host(lower(address));  // "::1", as --host takes it
  std::string host;
  int port = -1;
  return split_host_port(address, &host, &port) && port < 0 && is_loopback_host(host);
}

Result<std::vector<std::string>> parse_allow_hosts(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& item : split_commas(values)) {
    std::string host;
    int port = -1;
    if (item != "*" && (!split_host_port(item, &host, &port) || port >= 0))
      return Error::invalid_argument("--allow-host '{}': expected a host name or address without a port or "
                                     "scheme (e.g. mybox.lan), or *", quoted(item));
    out.push_back(item == "*" ? item : host);
  }
  return out;
}

Result<std::vector<std::string>> parse_cors_origins(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (std::string item : split_commas(values)) {
    if (item == "*" || item == "null") {
      out.push_back(item);
      continue;
    }
    if (ends_with(item, "/")) item.pop_back();  // "http://localhost:3000/": browsers send no slash
    std::string scheme, host;
    int port = -1;
    if (!split_origin(item, &scheme, &host, &port))
      return Error::invalid_argument("--cors '{}': expected origins like http://localhost:3000 (scheme, host and "
                                     "port only), or *", quoted(item));
    // the form browsers send: lowercase, the scheme's default port left out, IPv6 in brackets
    const bool v6 = host.find(':') != std::string::npos;
    std::string o = scheme;
    o.append("://").append(v6 ? "[" : "").append(host).append(v6 ? "]" : "");
    if (port >= 0 && port != default_port(scheme)) o.append(":").append(std::to_string(port));
    out.push_back(o);
  }
  return out;
}

OriginVerdict judge_request(const OriginPolicy& p, std::string_view host, bool has_origin, std::string_view origin) {
  OriginVerdict v;
  std::string host_name;
  int host_port = -1;
  const bool host_ok = split_host_port(trim(host), &host_name, &host_port);
  // No Host at all: not a browser (browsers always send it), so not a rebinding page.
  if (p.check_host && !trim(host).empty() &&
      !(host_ok && (is_loopback_host(host_name) || listed(p.allow_hosts, host_name)))) {
    v.status = 403;
    v.code = "host_not_allowed";
    v.message = fmt("Host '{}' is not allowed: this server listens on a loopback address and answers only "
                    "localhost names (a guard against DNS rebinding); start it with --allow-host NAME to allow "
                    "another name", quoted(host));
    return v;
  }
  if (!has_origin) return v;
  const std::string o = lower(trim(origin));
  if (listed(p.cors_origins, o)) {
    v.allow_origin = std::string(trim(origin));
    return v;
  }
  // Same origin (the chat page's own POSTs carry Origin): the page's host and port are the ones it sent to.
  std::string scheme, o_host;
  int o_port = -1;
  if (host_ok && split_origin(o, &scheme, &o_host, &o_port) && o_host == host_name &&
      o_port == (host_port >= 0 ? host_port : default_port(scheme)))
    return v;
  v.status = 403;
  v.code = "origin_not_allowed";
  v.message = fmt("cross-origin request from '{}' refused: start the server with --cors ORIGIN to let a web page "
                  "of that origin call it", quoted(origin));
  return v;
}

std::string preflight_allow_headers(std::string_view requested) {
  std::vector<std::string> names = {"authorization", "content-type"};
  std::string req(requested.substr(0, 4096));
  for (const std::string& item : split_commas({req})) {
    const std::string name = lower(item);
    auto token_char = [](char c) {  // RFC 9110 tchar
      return std::isalnum(static_cast<unsigned char>(c)) || (c != 0 && std::strchr("!#$%&'*+-.^_`|~", c));
    };
    const bool token = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), token_char);
    if (token && names.size() < 64 && std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  }
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace pipit::server
