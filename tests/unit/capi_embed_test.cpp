// The C API for apps (API version 2): options structs that grow (a caller built with an older or newer header),
// cancel from another thread during decode and during the prompt, images as bytes, the log callback, and the
// OpenAI server inside the process (start on any free port, a completion over HTTP equal to the session's own
// greedy text, stop closing the port).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "convert/checkpoint.h"
#include "include/pipit/pipit.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  std::atomic<int> n{0};
};

int32_t collect(const char* piece, size_t len, int32_t tok, void* user) {
  auto* c = static_cast<Collected*>(user);
  if (tok >= 0) c->tokens.push_back(tok);  // -1: held-back text at the end
  c->text.append(piece, len);
  c->n.fetch_add(1);
  return 1;
}

class CapiEmbed : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pipit_model_load(test::model_dir("stories260k").c_str(), nullptr, &model_), PIPIT_OK)
        << pipit_last_error();
  }
  void TearDown() override { pipit_model_destroy(model_); }
  pipit_session* session(int n_ctx = 0) {
    pipit_session_options so;
    pipit_session_options_default(&so);
    so.n_ctx = n_ctx;
    so.n_threads = 2;
    pipit_session* s = nullptr;
    EXPECT_EQ(pipit_session_create(model_, &so, &s), PIPIT_OK) << pipit_last_error();
    return s;
  }
  pipit_model* model_ = nullptr;
};

TEST(CapiVersion, LibraryMatchesHeader) {
  EXPECT_EQ(pipit_api_version(), PIPIT_API_VERSION);
  EXPECT_GE(PIPIT_API_VERSION, 2);
  EXPECT_STRNE(pipit_version(), "");
}

// A program compiled against an older header passes a shorter struct: its fields are read, the rest defaulted.
TEST_F(CapiEmbed, OptionsFromAnOlderHeader) {
  struct old_session_options {  // only struct_size and n_ctx
    uint32_t struct_size;
    int32_t n_ctx;
  } old_so{sizeof(old_session_options), 64};
  pipit_session* s = nullptr;
  ASSERT_EQ(pipit_session_create(model_, reinterpret_cast<const pipit_session_options*>(&old_so), &s), PIPIT_OK)
      << pipit_last_error();
  EXPECT_EQ(pipit_session_n_ctx(s), 64);
  struct old_generate_options {  // only struct_size and max_tokens
    uint32_t struct_size;
    int32_t max_tokens;
  } old_go{sizeof(old_generate_options), 5};
  Collected c;
  ASSERT_EQ(pipit_session_generate(s, "Once upon a time", 0, reinterpret_cast<const pipit_generate_options*>(&old_go),
                                    collect, &c),
            PIPIT_OK)
      << pipit_last_error();
  EXPECT_EQ(c.tokens.size(), 5u);
  pipit_session_destroy(s);

  // API version 1's model options: {reserved = 0, device, precision}
  struct v1_model_options {
    int32_t reserved;
    const char* device;
    const char* precision;
  } v1{0, "cpu", "exact"};
  pipit_model* m = nullptr;
  EXPECT_EQ(pipit_model_load(test::model_dir("stories260k").c_str(),
                             reinterpret_cast<const pipit_model_options*>(&v1), &m),
            PIPIT_OK)
      << pipit_last_error();
  pipit_model_destroy(m);
}

// pipit_model_options::mmap_weights (API version 4, the CLI's --mmap): 1 loads and generates the same greedy tokens as
// the default copy (stories260k); a value other than 0 / 1 is refused by name. (That the matrices stay in the file
// mapping with it is checked at the loader: ConvertRoundTripPipit.LargePanelMatricesLoadAsStored.)
TEST_F(CapiEmbed, MmapWeightsOption) {
  auto greedy = [&](int32_t mmap_weights) {
    std::vector<int32_t> got;
    pipit_model_options mo;
    pipit_model_options_default(&mo);
    EXPECT_EQ(mo.mmap_weights, 0);
    mo.mmap_weights = mmap_weights;
    pipit_model* m = nullptr;
    EXPECT_EQ(pipit_model_load(test::model_dir("stories260k").c_str(), &mo, &m), PIPIT_OK) << pipit_last_error();
    if (!m) return got;
    pipit_session* s = nullptr;
    pipit_session_options so;
    pipit_session_options_default(&so);
    so.n_threads = 1;
    EXPECT_EQ(pipit_session_create(m, &so, &s), PIPIT_OK) << pipit_last_error();
    pipit_generate_options o;
    pipit_generate_options_default(&o);
    o.max_tokens = 12;
    o.temperature = 0;
    auto cb = [](const char*, size_t, int32_t tok, void* user) -> int32_t {
      if (tok >= 0) static_cast<std::vector<int32_t>*>(user)->push_back(tok);
      return 1;
    };
    EXPECT_EQ(pipit_session_generate(s, "Once upon a time", 0, &o, cb, &got), PIPIT_OK) << pipit_last_error();
    pipit_session_destroy(s);
    pipit_model_destroy(m);
    return got;
  };
  const auto copied = greedy(0), mapped = greedy(1);
  EXPECT_FALSE(copied.empty());
  EXPECT_EQ(mapped, copied);
  pipit_model_options bad;
  pipit_model_options_default(&bad);
  bad.mmap_weights = 2;
  pipit_model* m = nullptr;
  EXPECT_EQ(pipit_model_load(test::model_dir("stories260k").c_str(), &bad, &m), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(pipit_last_error()).find("mmap_weights is 2"), std::string::npos) << pipit_last_error();
}

// A newer header's struct: unknown fields that are zero are fine; a set one is refused, naming the struct.
TEST_F(CapiEmbed, OptionsFromANewerHeader) {
  struct newer_session_options {
    pipit_session_options known;
    int64_t future_field;
  } n{};
  // what the newer header's pipit_session_options_default(&o) expands to: init with the caller's sizeof
  pipit_session_options_init(&n.known, sizeof n);
  EXPECT_EQ(n.known.struct_size, sizeof(newer_session_options));
  EXPECT_EQ(n.future_field, 0);
  n.known.n_threads = 2;
  pipit_session* s = nullptr;
  ASSERT_EQ(pipit_session_create(model_, &n.known, &s), PIPIT_OK) << pipit_last_error();
  pipit_session_destroy(s);
  n.future_field = 1;
  EXPECT_EQ(pipit_session_create(model_, &n.known, &s), PIPIT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(pipit_last_error()).find("pipit_session_options"), std::string::npos) << pipit_last_error();

  // not initialised: struct_size 0
  pipit_generate_options zero{};
  pipit_session* s2 = session();
  EXPECT_EQ(pipit_session_generate(s2, "Once", 0, &zero, nullptr, nullptr), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pipit_last_error()).find("struct_size"), std::string::npos) << pipit_last_error();
  pipit_session_destroy(s2);
}

// *_options_init writes no more than the caller's size (an older header's smaller struct).
TEST(CapiOptions, InitWritesOnlyTheCallersSize) {
  unsigned char buf[sizeof(pipit_generate_options) + 16];
  std::memset(buf, 0xAB, sizeof buf);
  const size_t small = offsetof(pipit_generate_options, temperature);
  pipit_generate_options_init(reinterpret_cast<pipit_generate_options*>(buf), small);
  for (size_t i = small; i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
  pipit_generate_options o;
  std::memcpy(&o, buf, small);
  EXPECT_EQ(o.struct_size, small);
  EXPECT_EQ(o.max_tokens, 256);
}

// Cancel from another thread during decode: the generation returns OK, "cancelled", with the tokens so far; the
// session goes on.
TEST_F(CapiEmbed, CancelDuringDecode) {
  pipit_session* s = session();
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 100000;  // the whole context, far longer than the cancel takes
  o.seed = 7;
  Collected c;
  pipit_status st = PIPIT_ERR_INTERNAL;
  std::thread gen([&] { st = pipit_session_generate(s, "Once upon a time", 0, &o, collect, &c); });
  while (c.n.load() < 5) std::this_thread::sleep_for(std::chrono::microseconds(100));
  EXPECT_EQ(pipit_session_cancel(s), PIPIT_OK);
  gen.join();
  EXPECT_EQ(st, PIPIT_OK) << pipit_last_error();
  EXPECT_STREQ(pipit_session_finish_reason(s), "cancelled");
  EXPECT_LT(int(c.tokens.size()), pipit_session_n_ctx(s) - 8);
  // the next generation is not affected (the flag is cleared when it starts)
  o.max_tokens = 4;
  Collected more;
  EXPECT_EQ(pipit_session_generate(s, " The end.", 0, &o, collect, &more), PIPIT_OK);
  EXPECT_STREQ(pipit_session_finish_reason(s), "length");
  EXPECT_EQ(more.tokens.size(), 4u);
  pipit_session_destroy(s);
}

// A Llama-shaped test checkpoint (4096-token context) with stories260k's tokenizer (same vocabulary size), in a
// temporary folder that the destructor removes.
struct LongContextModel {
  std::string dir;
  LongContextModel() {
    namespace fs = std::filesystem;
    dir = (fs::temp_directory_path() / ("pipit_capi_long_" + std::to_string(::getpid()))).string();
    fs::create_directories(dir);
    const std::string q = test::model_dir("llama"), st = test::model_dir("stories260k");
    fs::create_symlink(q + "/config.json", dir + "/config.json");
    fs::create_symlink(q + "/model.safetensors", dir + "/model.safetensors");
    fs::create_symlink(st + "/tokenizer.json", dir + "/tokenizer.json");
    fs::create_symlink(st + "/tokenizer_config.json", dir + "/tokenizer_config.json");
  }
  ~LongContextModel() { std::filesystem::remove_all(dir); }
};

// Cancel during a long prompt (several 512-token prefill chunks): no token is generated, the chunks evaluated so
// far stay in the context and the next generation reuses them.
TEST(CapiCancel, DuringThePrompt) {
  LongContextModel lcm;
  pipit_model* m = nullptr;
  ASSERT_EQ(pipit_model_load(lcm.dir.c_str(), nullptr, &m), PIPIT_OK) << pipit_last_error();
  ASSERT_EQ(pipit_model_n_vocab(m), 512);
  pipit_session_options so;
  pipit_session_options_default(&so);
  so.n_ctx = 4096;
  so.n_threads = 1;
  pipit_session* s = nullptr;
  ASSERT_EQ(pipit_session_create(m, &so, &s), PIPIT_OK) << pipit_last_error();
  std::string prompt;
  while (prompt.size() < 9000) prompt += "Once upon a time, there was a little girl named Lily. ";
  size_t n_prompt = 0;
  ASSERT_EQ(pipit_tokenize(m, prompt.data(), prompt.size(), 1, nullptr, 0, &n_prompt), PIPIT_ERR_BUFFER_TOO_SMALL);
  ASSERT_GT(n_prompt, 1536u);  // at least three chunks
  ASSERT_LT(n_prompt, 4000u);

  // a canceller that keeps cancelling until the generation returns: the first cancel after the generation clears
  // the flag lands inside its first prefill chunk
  std::atomic<bool> done{false};
  std::thread canceller([&] {
    while (!done.load()) {
      pipit_session_cancel(s);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 8;
  Collected c;
  const pipit_status r = pipit_session_generate(s, prompt.c_str(), 0, &o, collect, &c);
  done = true;
  canceller.join();
  EXPECT_EQ(r, PIPIT_OK) << pipit_last_error();
  EXPECT_STREQ(pipit_session_finish_reason(s), "cancelled");
  EXPECT_EQ(c.tokens.size(), 0u);
  const int kept = pipit_session_n_past(s);
  EXPECT_GT(kept, 0);
  EXPECT_LT(size_t(kept), n_prompt);
  EXPECT_EQ(kept % 512, 0) << "whole prefill chunks are kept";

  int32_t n_evaluated = -1;
  ASSERT_EQ(pipit_session_prompt_stats(s, nullptr, nullptr, &n_evaluated), PIPIT_OK);
  EXPECT_EQ(n_evaluated, kept);
  // the session works on after the cancel
  ASSERT_EQ(pipit_session_reset(s), PIPIT_OK);
  o.temperature = 0;
  Collected a;
  ASSERT_EQ(pipit_session_generate(s, prompt.c_str(), 0, &o, collect, &a), PIPIT_OK) << pipit_last_error();
  EXPECT_EQ(a.tokens.size(), 8u);
  pipit_session_destroy(s);
  pipit_model_destroy(m);
}

TEST_F(CapiEmbed, ImageBytesOnATextModelIsUnsupported) {
  pipit_session* s = session();
  const unsigned char png_magic[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  EXPECT_EQ(pipit_session_attach_image_bytes(s, png_magic, sizeof png_magic), PIPIT_ERR_UNSUPPORTED);
  EXPECT_EQ(pipit_session_attach_image_bytes(s, nullptr, 0), PIPIT_ERR_INVALID_ARGUMENT);
  pipit_session_destroy(s);
}

// ---- the in-process server ----

// One HTTP/1.1 request to 127.0.0.1:port; the whole response ("" when the connection is refused).
std::string http(int port, const std::string& method, const std::string& path, const std::string& body = "") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                          "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
  (void)!::write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  ::close(fd);
  return out;
}

struct LogLines {
  std::mutex mu;
  std::vector<std::string> lines;
};

TEST_F(CapiEmbed, InProcessServer) {
  LogLines log;
  pipit_set_log_callback(
      [](int32_t, const char* msg, void* user) {
        auto* l = static_cast<LogLines*>(user);
        std::lock_guard<std::mutex> lock(l->mu);
        l->lines.push_back(msg);
      },
      &log);
  pipit_server_options so;
  pipit_server_options_default(&so);
  so.port = 0;
  so.n_threads = 2;
  so.model_name = "stories";
  pipit_server* srv = nullptr;
  ASSERT_EQ(pipit_server_start(model_, &so, &srv), PIPIT_OK) << pipit_last_error();
  const int port = pipit_server_port(srv);
  ASSERT_GT(port, 0);

  const std::string models = http(port, "GET", "/v1/models");
  EXPECT_NE(models.find("200 OK"), std::string::npos) << models;
  EXPECT_NE(models.find("\"stories\""), std::string::npos) << models;
  const std::string r = http(port, "POST", "/v1/completions",
                             R"({"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0})");
  EXPECT_NE(r.find("200 OK"), std::string::npos) << r;
  // the session path's greedy text, from the same loaded model
  pipit_session* s = session();
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 16;
  o.temperature = 0;
  Collected c;
  ASSERT_EQ(pipit_session_generate(s, "Once upon a time", 0, &o, collect, &c), PIPIT_OK);
  pipit_session_destroy(s);
  std::string escaped;
  for (char ch : c.text) escaped += ch == '\n' ? std::string("\\n") : ch == '"' ? std::string("\\\"") : std::string(1, ch);
  EXPECT_NE(r.find("\"text\":\"" + escaped + "\""), std::string::npos) << r << "\nsession: " << c.text;
  EXPECT_NE(http(port, "POST", "/v1/completions", "{\"prompt\": ").find("400"), std::string::npos);


  pipit_server_stop(srv);
  EXPECT_EQ(http(port, "GET", "/health"), "") << "the port is closed after stop";
  pipit_set_log_callback(nullptr, nullptr);
  std::lock_guard<std::mutex> lock(log.mu);
  bool listened = false, logged_request = false;
  for (const auto& l : log.lines) {
    listened |= l.find("listening on http://127.0.0.1:" + std::to_string(port)) != std::string::npos;
    logged_request |= l.find("POST /v1/completions -> 200") != std::string::npos;
  }
  EXPECT_TRUE(listened);
  EXPECT_TRUE(logged_request);
}

// Clients that leave in the middle of long streams (a 4096-token context): the server notices (it checks the
// socket before writing, and writes with MSG_NOSIGNAL, so no SIGPIPE reaches this process, whose disposition is
// the default as in most apps; the app's signal handlers are never changed: a JVM checks its own with
// -Xcheck:jni, which the java_binding test runs under) and goes on serving.
TEST(CapiServer, SurvivesClientsThatLeave) {
  LongContextModel lcm;
  pipit_model* m = nullptr;
  ASSERT_EQ(pipit_model_load(lcm.dir.c_str(), nullptr, &m), PIPIT_OK) << pipit_last_error();
  pipit_server_options so;
  pipit_server_options_default(&so);
  so.n_threads = 1;
  pipit_server* srv = nullptr;
  ASSERT_EQ(pipit_server_start(m, &so, &srv), PIPIT_OK) << pipit_last_error();
  const int port = pipit_server_port(srv);
  for (int i = 0; i < 3; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 3000, "stream": true, "seed": 1,
                                 "ignore_eos": true})";
    const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    (void)!::write(fd, req.data(), req.size());
    char buf[256];
    ASSERT_GT(::read(fd, buf, sizeof buf), 0);  // the stream has started
    ::close(fd);  // the server's next write draws a reset; the one after fails with EPIPE (SIGPIPE's moment)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_NE(http(port, "GET", "/health").find("200 OK"), std::string::npos) << "the server survived the clients";
  pipit_server_stop(srv);
  pipit_model_destroy(m);
}

// A stop right after the start (before the server thread listens) returns: httplib's stop() does nothing to a loop
// that has not begun, so pipit_server_stop waits for it to listen or to see the stop (it hung before).
TEST_F(CapiEmbed, ServerStopRightAfterStart) {
  for (int i = 0; i < 20; ++i) {
    pipit_server_options so;
    pipit_server_options_default(&so);
    pipit_server* srv = nullptr;
    ASSERT_EQ(pipit_server_start(model_, &so, &srv), PIPIT_OK) << pipit_last_error();
    if (i % 2) std::this_thread::sleep_for(std::chrono::milliseconds(i));
    pipit_server_stop(srv);  // a hang here is the failure (ctest's timeout)
  }
}

TEST_F(CapiEmbed, ServerOptionsChecked) {
  pipit_server_options so;
  pipit_server_options_default(&so);
  so.port = 70000;
  pipit_server* srv = nullptr;
  EXPECT_EQ(pipit_server_start(model_, &so, &srv), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(srv, nullptr);
  so.port = 0;
  so.n_parallel = 0;
  EXPECT_EQ(pipit_server_start(model_, &so, &srv), PIPIT_ERR_INVALID_ARGUMENT);
  // two servers of one model, and a port in use
  so.n_parallel = 1;
  pipit_server *a = nullptr, *b = nullptr;
  ASSERT_EQ(pipit_server_start(model_, &so, &a), PIPIT_OK) << pipit_last_error();
  so.port = pipit_server_port(a);
  EXPECT_NE(pipit_server_start(model_, &so, &b), PIPIT_OK);
  EXPECT_EQ(b, nullptr);
  pipit_server_stop(a);
  pipit_server_stop(nullptr);
}

}  // namespace
}  // namespace pipit

namespace pipit {
namespace {

TEST(CapiMemory, EstimateBeforeLoading) {
  const std::string path = test::model_dir("stories260k");
  pipit_memory_estimate e{};
  e.struct_size = sizeof e;
  pipit_session_options so;
  pipit_session_options_default(&so);
  so.n_ctx = 512;
  ASSERT_EQ(pipit_estimate_memory(path.c_str(), &so, 1, &e), PIPIT_OK) << pipit_last_error();
  // 260k parameters in f32 (the checkpoint's dtype); K and V of 5 layers x 4 KV heads x 8 dims at 512 positions, f16
  EXPECT_NEAR(double(e.weights), 1.04e6, 0.05e6);
  EXPECT_EQ(e.kv_cache, uint64_t(2 * 5 * 512 * 4 * 8 * 2));
  EXPECT_EQ(e.tower_weights, 0u);
  EXPECT_EQ(e.total, e.runtime + e.weights + std::max(e.kv_cache + e.activations + e.tower_activations + e.tokenizer,
                                                      e.load_transient));
  // four sequences: four KV caches
  pipit_memory_estimate e4{};
  e4.struct_size = sizeof e4;
  ASSERT_EQ(pipit_estimate_memory(path.c_str(), &so, 4, &e4), PIPIT_OK);
  EXPECT_EQ(e4.kv_cache, 4 * e.kv_cache);

  // an older header's shorter result struct: nothing written past it
  struct {
    pipit_memory_estimate head;  // only struct_size and weights are the caller's
    char canary[8];
  } small{};
  small.head.struct_size = offsetof(pipit_memory_estimate, tower_weights);
  std::memset(&small.head.tower_weights, 0x5A, sizeof small - offsetof(pipit_memory_estimate, tower_weights));
  ASSERT_EQ(pipit_estimate_memory(path.c_str(), nullptr, 1, &small.head), PIPIT_OK);
  EXPECT_EQ(small.head.weights, e.weights);
  EXPECT_EQ(small.head.struct_size, offsetof(pipit_memory_estimate, tower_weights));
  EXPECT_EQ(static_cast<unsigned char>(small.canary[7]), 0x5A);

  EXPECT_EQ(pipit_estimate_memory((path + "/missing.pipit").c_str(), nullptr, 1, &e), PIPIT_ERR_NOT_FOUND);
  pipit_memory_estimate unset{};
  EXPECT_EQ(pipit_estimate_memory(path.c_str(), nullptr, 1, &unset), PIPIT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pipit_estimate_memory(path.c_str(), nullptr, 0, &e), PIPIT_ERR_INVALID_ARGUMENT);
}

TEST(CapiMemory, TrimKeepsTheModelUsable) {
  pipit_model* m = nullptr;
  ASSERT_EQ(pipit_model_load(test::model_dir("stories260k").c_str(), nullptr, &m), PIPIT_OK);
  ASSERT_EQ(pipit_model_set_prompt_cache(m, 16), PIPIT_OK);
  pipit_session* s = nullptr;
  ASSERT_EQ(pipit_session_create(m, nullptr, &s), PIPIT_OK);
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 4;
  ASSERT_EQ(pipit_session_generate(s, "Once upon a time", 0, &o, nullptr, nullptr), PIPIT_OK);
  EXPECT_EQ(pipit_model_trim(m), PIPIT_OK);
  ASSERT_EQ(pipit_session_generate(s, " there", 0, &o, nullptr, nullptr), PIPIT_OK) << pipit_last_error();
  EXPECT_EQ(pipit_model_trim(nullptr), PIPIT_ERR_INVALID_ARGUMENT);
  pipit_session_destroy(s);
  pipit_model_destroy(m);
}

}  // namespace
}  // namespace pipit

namespace pipit {
namespace {

// Token-level access: pipit_session_eval's logits are the model's (the greedy token of a generation from the same
// prompt is their argmax), and pipit_embed's last-token vector is the final norm's last row: stories260k ties its
// output head to the embedding table, so E . v must be those logits.
TEST(CapiTokens, EvalLogitsAndEmbedding) {
  namespace fs = std::filesystem;
  const std::string src = test::model_dir("stories260k");
  const std::string dir = (fs::temp_directory_path() / ("pipit_capi_embed_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir + "/1_Pooling");
  for (const auto& f : fs::directory_iterator(src)) fs::create_symlink(f.path(), dir + "/" + f.path().filename().string());
  std::ofstream(dir + "/modules.json") << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])";
  std::ofstream(dir + "/1_Pooling/config.json") << R"({"word_embedding_dimension": 64, "pooling_mode_lasttoken": true})";

  pipit_model* m = nullptr;
  ASSERT_EQ(pipit_model_load(dir.c_str(), nullptr, &m), PIPIT_OK) << pipit_last_error();
  const int V = pipit_model_n_vocab(m);
  pipit_session* s = nullptr;
  ASSERT_EQ(pipit_session_create(m, nullptr, &s), PIPIT_OK);
  const std::string text = "Once upon a time";
  std::vector<int32_t> ids(64);
  size_t n = 0;
  ASSERT_EQ(pipit_tokenize(m, text.data(), text.size(), 1, ids.data(), ids.size(), &n), PIPIT_OK);
  ids.resize(n);

  std::vector<float> logits(static_cast<size_t>(V));
  EXPECT_EQ(pipit_session_eval(s, ids.data(), ids.size(), logits.data(), 10), PIPIT_ERR_BUFFER_TOO_SMALL);
  ASSERT_EQ(pipit_session_eval(s, ids.data(), ids.size(), logits.data(), logits.size()), PIPIT_OK) << pipit_last_error();
  EXPECT_EQ(pipit_session_n_past(s), int(n));
  const int argmax = int(std::max_element(logits.begin(), logits.end()) - logits.begin());

  pipit_session* g = nullptr;
  ASSERT_EQ(pipit_session_create(m, nullptr, &g), PIPIT_OK);
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 1;
  o.temperature = 0;
  Collected c;
  ASSERT_EQ(pipit_session_generate(g, text.c_str(), 0, &o, collect, &c), PIPIT_OK);
  ASSERT_EQ(c.tokens.size(), 1u);
  EXPECT_EQ(c.tokens[0], argmax);
  pipit_session_destroy(g);
  // a raw generate continues after the evaluated tokens
  Collected more;
  o.max_tokens = 3;
  ASSERT_EQ(pipit_session_generate(s, " there", 0, &o, collect, &more), PIPIT_OK) << pipit_last_error();
  EXPECT_GT(pipit_session_n_past(s), int(n));
  int32_t n_prompt = 0, n_reused = 0;
  ASSERT_EQ(pipit_session_prompt_stats(s, &n_prompt, &n_reused, nullptr), PIPIT_OK);
  EXPECT_EQ(n_reused, int(n)) << "the evaluated tokens' KV is reused";

  std::vector<float> v(64);
  size_t n_embd = 0;
  ASSERT_EQ(pipit_embed(s, text.data(), text.size(), v.data(), v.size(), &n_embd), PIPIT_OK) << pipit_last_error();
  EXPECT_EQ(n_embd, 64u);
  EXPECT_EQ(pipit_session_n_past(s), 0) << "pipit_embed resets the session";
  auto ck = open_checkpoint(src);
  ASSERT_TRUE(ck.is_ok());
  const Tensor& E = ck->tensors.at("model.embed_tokens.weight");
  ASSERT_EQ(E.dtype(), DType::F32);
  double max_err = 0, max_abs = 0;
  for (int t = 0; t < V; ++t) {
    double dot = 0;
    for (int k = 0; k < 64; ++k) dot += double(E.ptr<float>()[size_t(t) * 64 + size_t(k)]) * v[size_t(k)];
    max_err = std::max(max_err, std::abs(dot - logits[size_t(t)]));
    max_abs = std::max(max_abs, double(std::abs(logits[size_t(t)])));
  }
  EXPECT_LT(max_err, 1e-4 * std::max(1.0, max_abs)) << "E . embedding vs the eval's logits";
  EXPECT_EQ(pipit_embed(s, text.data(), text.size(), v.data(), 8, &n_embd), PIPIT_ERR_BUFFER_TOO_SMALL);
  pipit_session_destroy(s);
  pipit_model_destroy(m);
  fs::remove_all(dir);

  // a chat model without a pooling config: refused with the reason
  pipit_model* plain = nullptr;
  ASSERT_EQ(pipit_model_load(src.c_str(), nullptr, &plain), PIPIT_OK);
  pipit_session* ps = nullptr;
  ASSERT_EQ(pipit_session_create(plain, nullptr, &ps), PIPIT_OK);
  EXPECT_EQ(pipit_embed(ps, "hi", 2, v.data(), v.size(), &n_embd), PIPIT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(pipit_last_error()).find("modules.json"), std::string::npos) << pipit_last_error();
  pipit_session_destroy(ps);
  pipit_model_destroy(plain);
}

}  // namespace
}  // namespace pipit

namespace pipit {
namespace {

// A model file changed in place under a loaded model (truncated, rewritten) would fault at the next forward pass
// (SIGBUS) or compute with other bytes: each generation checks the mapped files first (runtime/file_watch.h) and
// refuses, naming the file. A file replaced by a rename is fine: the mapping keeps the old one.
TEST(CapiFiles, ModelFileChangedInPlaceIsRefused) {
  namespace fs = std::filesystem;
  const std::string src = test::model_dir("stories260k");
  const std::string dir = (fs::temp_directory_path() / ("pipit_capi_files_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(src + "/" + f, dir + "/" + f, fs::copy_options::overwrite_existing);
  const std::string weights = dir + "/model.safetensors";
  pipit_model* m = nullptr;
  ASSERT_EQ(pipit_model_load(dir.c_str(), nullptr, &m), PIPIT_OK) << pipit_last_error();
  pipit_session* s = nullptr;
  ASSERT_EQ(pipit_session_create(m, nullptr, &s), PIPIT_OK);
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = 4;
  ASSERT_EQ(pipit_session_generate(s, "Once", 0, &o, nullptr, nullptr), PIPIT_OK) << pipit_last_error();

  // replaced by a rename (how an update should be written): the loaded model goes on with the old file's bytes
  fs::copy_file(weights, weights + ".new");
  fs::rename(weights + ".new", weights);
  ASSERT_EQ(pipit_session_generate(s, " upon", 0, &o, nullptr, nullptr), PIPIT_OK) << pipit_last_error();
  pipit_session_destroy(s);
  pipit_model_destroy(m);

  // truncated in place under a loaded model: refused (it would be SIGBUS), naming the file
  ASSERT_EQ(pipit_model_load(dir.c_str(), nullptr, &m), PIPIT_OK) << pipit_last_error();
  ASSERT_EQ(pipit_session_create(m, nullptr, &s), PIPIT_OK);
  ASSERT_EQ(pipit_session_generate(s, "Once", 0, &o, nullptr, nullptr), PIPIT_OK);
  fs::resize_file(weights, fs::file_size(weights) / 2);
  EXPECT_EQ(pipit_session_generate(s, " upon", 0, &o, nullptr, nullptr), PIPIT_ERR_UNAVAILABLE);
  EXPECT_NE(std::string(pipit_last_error()).find("model.safetensors' changed on disk"), std::string::npos)
      << pipit_last_error();
  const int32_t one = 1;
  EXPECT_EQ(pipit_session_eval(s, &one, 1, nullptr, 0), PIPIT_ERR_UNAVAILABLE);
  pipit_session_destroy(s);
  pipit_model_destroy(m);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipit
