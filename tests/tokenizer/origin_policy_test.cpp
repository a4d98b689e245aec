// The server's Host / Origin / CORS rules (server/origin_policy.h): DNS-rebinding Host names and cross-origin
// pages refused on a loopback server, the chat page's same-origin requests and clients without Origin answered,
// --allow-host and --cors parsed and applied. The HTTP side is tested in tests/e2e/server_hostile_test.py.
#include <gtest/gtest.h>

#include "server/origin_policy.h"

namespace pipit::server {
namespace {

OriginVerdict judge(const OriginPolicy& p, const char* host, const char* origin = nullptr) {
  return judge_request(p, host, origin != nullptr, origin ? origin : "");
}

TEST(OriginPolicy, LoopbackBindAddresses) {
  for (const char* a : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]", "::ffff:127.0.0.1"})
    EXPECT_TRUE(is_loopback_bind(a)) << a;
  for (const char* a : {"0.0.0.0", "::", "192.168.1.4", "10.0.0.1", "myhost", "128.0.0.1", ""})
    EXPECT_FALSE(is_loopback_bind(a)) << a;
}

TEST(OriginPolicy, LoopbackServerAnswersOnlyLoopbackHosts) {
  OriginPolicy p;
  for (const char* h : {"127.0.0.1:8080", "127.0.0.1", "localhost:8080", "LOCALHOST", "[::1]:8080", "[::1]",
                        "app.localhost:8080", "127.9.9.9:1", ""})
    EXPECT_EQ(judge(p, h).status, 0) << h;
  for (const char* h : {"evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io:8080",
                        "[::2]:8080", "0.0.0.0:8080", "localhost:99999", "localhost:", "a b", "[::1", "\xff"}) {
    const OriginVerdict v = judge(p, h);
    EXPECT_EQ(v.status, 403) << h;
    EXPECT_EQ(v.code, "host_not_allowed") << h;
    EXPECT_NE(v.message.find("--allow-host"), std::string::npos);
    EXPECT_EQ(v.message.find('\xff'), std::string::npos);  // quoted as printable ASCII only
  }
}

TEST(OriginPolicy, AllowHostAndNonLoopbackBind) {
  OriginPolicy p;
  p.allow_hosts = *parse_allow_hosts({"MyBox.lan, other.lan", "[fd00::1]"});
  EXPECT_EQ(p.allow_hosts, (std::vector<std::string>{"mybox.lan", "other.lan", "fd00::1"}));
  EXPECT_EQ(judge(p, "mybox.lan:8080").status, 0);
  EXPECT_EQ(judge(p, "[fd00::1]:8080").status, 0);
  EXPECT_EQ(judge(p, "evil.example").status, 403);
  p.allow_hosts = {"*"};
  EXPECT_EQ(judge(p, "evil.example").status, 0);
  OriginPolicy open;
  open.check_host = false;  // bound to 0.0.0.0: the operator exposed it
  EXPECT_EQ(judge(open, "evil.example:8080").status, 0);
  for (const char* bad : {"host:80", "http://host", "a/b", "", "a b"})
    EXPECT_FALSE(parse_allow_hosts({bad}).is_ok()) << bad;
}

TEST(OriginPolicy, SameOriginPassesCrossOriginIsRefused) {
  OriginPolicy p;
  EXPECT_EQ(judge(p, "127.0.0.1:8080", "http://127.0.0.1:8080").status, 0);  // the chat page's POST
  EXPECT_EQ(judge(p, "localhost:8080", "http://LOCALHOST:8080").status, 0);
  EXPECT_EQ(judge(p, "localhost", "http://localhost").status, 0);             // default port on both sides
  EXPECT_EQ(judge(p, "[::1]:8080", "http://[::1]:8080").status, 0);
  EXPECT_TRUE(judge(p, "127.0.0.1:8080", "http://127.0.0.1:8080").allow_origin.empty());  // no CORS needed
  for (const char* o : {"http://localhost:3000", "http://evil.example", "null", "http://127.0.0.1:8081",
                        "http://localhost:8080", "file://", "chrome-extension://abc", "", "http://127.0.0.1"}) {
    const OriginVerdict v = judge(p, "127.0.0.1:8080", o);
    EXPECT_EQ(v.status, 403) << o;
    EXPECT_EQ(v.code, "origin_not_allowed") << o;
    EXPECT_NE(v.message.find("--cors"), std::string::npos);
  }
  // a non-loopback server still refuses other origins' pages
  OriginPolicy open;
  open.check_host = false;
  EXPECT_EQ(judge(open, "192.168.1.4:8080", "http://evil.example").status, 403);
  EXPECT_EQ(judge(open, "192.168.1.4:8080", "http://192.168.1.4:8080").status, 0);
}

TEST(OriginPolicy, CorsOrigins) {
  auto list = parse_cors_origins({"http://LocalHost:3000/, https://app.example:443", "http://[::1]:80"});
  ASSERT_TRUE(list.is_ok()) << list.status().message();
  EXPECT_EQ(*list, (std::vector<std::string>{"http://localhost:3000", "https://app.example", "http://[::1]"}));
  OriginPolicy p;
  p.cors_origins = *list;
  const OriginVerdict v = judge(p, "127.0.0.1:8080", "http://localhost:3000");
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.allow_origin, "http://localhost:3000");
  EXPECT_EQ(judge(p, "127.0.0.1:8080", "https://app.example").status, 0);
  EXPECT_EQ(judge(p, "127.0.0.1:8080", "http://localhost:3001").status, 403);
  EXPECT_EQ(judge(p, "evil.example", "http://localhost:3000").status, 403);  // CORS does not lift the Host check
  p.cors_origins = {"*"};
  EXPECT_EQ(judge(p, "127.0.0.1:8080", "http://anything.example").allow_origin, "http://anything.example");
  for (const char* bad : {"localhost:3000", "http://a/b", "http://u@a", "http://a:99999", "", "://a"})
    EXPECT_FALSE(parse_cors_origins({bad}).is_ok()) << bad;
}

TEST(OriginPolicy, PreflightHeaders) {
  EXPECT_EQ(preflight_allow_headers(""), "authorization, content-type");
  EXPECT_EQ(preflight_allow_headers("Content-Type, X-Stainless-OS,x-stainless-lang"),
            "authorization, content-type, x-stainless-os, x-stainless-lang");
  EXPECT_EQ(preflight_allow_headers("bad header, \r\nx: y, ok"), "authorization, content-type, ok");
}

}  // namespace
}  // namespace pipit::server
